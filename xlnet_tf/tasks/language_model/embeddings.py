"""Embeddings: the encoder's content states of chosen layers for every piece
of a text, and pooled vectors, for texts of any length.

Shapes (B texts, T padded length, K chosen layers, D d_model, S the window
`max_seq_length`, M the memory `mem_len`):
  features   input_ids, segment_ids int32 `[B, T]`, input_mask float32
             `[B, T]` (1 = padding), the layout of
             `data_utils.lm.embedding_files.window_features` (`pieces <sep>
             <cls>`, LEFT padded). T <= S: one pass. T > S: N = ceil(T / S)
             windows aligned from the RIGHT end, the first holding the
             remainder r = T - (N - 1) * S (1 <= r <= S; r = S when T is a
             whole number of windows), read in order, each attending to
             itself and to the memory of the previous ones (M positions per
             layer, padding and empty memory masked with `mems_mask`), as
             `PooledTaskModel.read_segment`. Padding only ever precedes a
             row's pieces and is masked, so a text's states are the same
             whether its first window is whole (padded) or partial.
  states     `[B, K, T, D]`: layer index 0 is the embedding output, n_layer
             the last layer (`XLNetModel`'s `hidden_states`); -1 = last.
  pooled     {pooling: `[B, K, D]`}, on each chosen layer:
    last         the last position (`<cls>`), as the original's
                 `summarize_sequence`;
    first        the first position that is not padding (the original reads
                 position 0, padding whenever a text is shorter than the
                 window);
    mean         the mean over the S positions of the last window, padding
                 included (the original's; a one-window batch is then padded
                 to S; past one window the last window is whole in either
                 layout and its padding's states the same);
    attn         the original's attention summary (`summary_bias` attends
                 the states, padding masked), only from a checkpoint that
                 has one trained (`load_attn_summary`); without the tanh
                 projection;
    masked_mean  the mean over every position that is not padding, all
                 segments (`<sep>` and `<cls>` included).
  With several segments, last/first/mean/attn read the LAST segment (as the
  segment classifier does); masked_mean the whole text.

`embed_text_signature` builds the SavedModel signature `embed_text`
(text `[B]` tf.string in, in-graph tokenization).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from data_utils.errors import UsageError
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.lm.embedding_files import (TextPieces, layout_length,
                                           text_pieces, window_features)
from data_utils.progress import Progress
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_CLS, SEG_ID_PAD,
                                     SEP_ID)
from xlnet_tf.building import build_once
from xlnet_tf.checkpoint_files import open_checkpoint
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.io.hf_files import is_hf_directory
from xlnet_tf.io.original import load_original_checkpoint
from xlnet_tf.masks import memory_mask
from xlnet_tf.tasks.language_model.choices import (  # noqa: F401 (API)
    POOLINGS, SIGNATURE_POOLINGS, layer_indices, pooling_names)
from xlnet_tf.tasks.pooling import SequenceSummary

SUMMARY_BIAS = SequenceSummary.ORIGINAL_SCOPE + "/summary_bias"


def encode_layers(encoder: XLNetModel, input_ids, segment_ids, input_mask,
                  layers: Sequence[int], segment_length: int,
                  mem_len: int) -> tf.Tensor:
  """Features `[B, T]` -> states `[B, K, T, D]` of `layers` (indices in
  [0, n_layer]: Python ints, or an int32 tensor `[K]` chosen at run time);
  T <= `segment_length` in one pass, else any T in right-aligned windows
  with a memory of `mem_len` (`_segments`; graph code: usable in
  tf.function)."""
  input_ids = tf.convert_to_tensor(input_ids, tf.int32)
  segment_ids = tf.convert_to_tensor(segment_ids, tf.int32)
  input_mask = tf.convert_to_tensor(input_mask, tf.float32)
  length = tf.shape(input_ids)[1]

  def one_pass():
    return _one_pass(encoder, input_ids, segment_ids, input_mask, layers)

  def segments():
    return _segments(encoder, input_ids, segment_ids, input_mask, layers,
                     segment_length, mem_len)
  return tf.cond(length > segment_length, segments, one_pass)


def _pick(hidden_states, layers) -> tf.Tensor:
  """`[B, K, T, D]`: the `hidden_states` (n_layer + 1 `[B, T, D]`) of
  `layers`; a tensor of layers gathers from all of them stacked."""
  if tf.is_tensor(layers):
    return tf.gather(tf.stack(hidden_states, axis=1), layers, axis=1)
  return tf.stack([hidden_states[k] for k in layers], axis=1)


def _one_pass(encoder, input_ids, segment_ids, input_mask, layers):
  out = encoder(input_ids, segment_ids=segment_ids, input_mask=input_mask,
                mem_len=0, return_hidden_states=True)
  return _pick(out["hidden_states"], layers)


def _segments(encoder, input_ids, segment_ids, input_mask, layers,
              segment_length, mem_len):
  """Features `[B, T]` (T > S = `segment_length`) -> states `[B, K, T, D]`:
  the first window holds r = T - (N - 1) * S positions (1 <= r <= S) and
  is read with the initial memory (`mem_len` positions, all masked), then
  the N - 1 whole windows in a loop, each with the memory the previous
  ones left. For T = N * S the same calls on the same shapes as reading
  all N windows in the loop."""
  batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
  rest = (length - 1) // segment_length  # whole windows after the first
  head = length - rest * segment_length  # r, in [1, S]
  d_model, dtype = encoder.config.d_model, encoder.compute_dtype
  mems = [tf.zeros([batch, mem_len, d_model], dtype)
          for _ in range(encoder.config.n_layer)]
  mems_mask = tf.ones([batch, mem_len], tf.float32)  # nothing there yet

  def read(ids, segs, mask, mems, mems_mask):
    out = encoder(ids, segment_ids=segs, input_mask=mask, mems=list(mems),
                  mems_mask=mems_mask, mem_len=mem_len, reuse_len=0,
                  return_hidden_states=True)
    return (_pick(out["hidden_states"], layers), out["new_mems"],
            memory_mask(mems_mask, mask, mem_len))

  first, mems, mems_mask = read(
      *(x[:, :head] for x in (input_ids, segment_ids, input_mask)), mems,
      mems_mask)
  split = [tf.reshape(x[:, head:], [batch, rest, segment_length])
           for x in (input_ids, segment_ids, input_mask)]

  def body(i, mems, mems_mask, states):
    layer_states, mems, mems_mask = read(*(x[:, i] for x in split), mems,
                                         mems_mask)
    return i + 1, mems, mems_mask, states.write(i, layer_states)

  count = tf.size(layers) if tf.is_tensor(layers) else len(layers)
  states = tf.TensorArray(dtype, size=rest, element_shape=[
      None, None if tf.is_tensor(layers) else count, segment_length,
      d_model])
  _, _, _, states = tf.while_loop(lambda i, *_: i < rest, body,
                                  (tf.constant(0), mems, mems_mask, states))
  stacked = tf.transpose(states.stack(), [1, 2, 0, 3, 4])  # [B, K, N-1, S, D]
  tail = tf.reshape(stacked, [batch, count, rest * segment_length, d_model])
  return tf.concat([first, tail], axis=2)


def pool_states(states, input_mask, poolings: Sequence[str],
                segment_length: int,
                summary: Optional[SequenceSummary] = None
                ) -> Dict[str, tf.Tensor]:
  """`states [B, K, T, D]`, `input_mask [B, T]` -> {pooling: `[B, K, D]`}
  (see the module doc)."""
  states = tf.convert_to_tensor(states)
  mask = tf.cast(input_mask, states.dtype)
  length = tf.shape(states)[2]
  window = tf.minimum(length, segment_length)
  last, last_mask = states[:, :, length - window:], mask[:, length - window:]
  out = {}
  for name in poolings:
    if name == "last":
      out[name] = last[:, :, -1]
    elif name == "first":
      first = tf.cast(tf.reduce_sum(last_mask, axis=1), tf.int32)  # pads
      out[name] = tf.gather(last, first, axis=2, batch_dims=1)
    elif name == "mean":
      out[name] = tf.reduce_mean(last, axis=2)
    elif name == "masked_mean":
      keep = (1.0 - mask)[:, None, :, None]
      count = tf.maximum(tf.reduce_sum(keep, axis=2), 1.0)
      out[name] = tf.reduce_sum(states * keep, axis=2) / count
    elif name == "attn":
      if summary is None:
        raise ValueError("pooling 'attn' needs a trained attn summary "
                         "(load_attn_summary)")
      out[name] = tf.stack([summary(last[:, k], input_mask=last_mask)
                            for k in range(states.shape[1])], axis=1)
    else:
      raise ValueError(f"unknown pooling {name!r}; use {', '.join(POOLINGS)}")
  return out


def check_attn_summary(path: str) -> str:
  """The checkpoint prefix at `path` if it holds a trained attn summary (the
  original layout: a checkpoint fine-tuned with summary_type=attn, e.g.
  `model_dir/original/`); else `UsageError` (one line). Reads the index
  only."""
  if is_hf_directory(path):
    raise UsageError(f"--pooling=attn: {path} is a HuggingFace directory, "
                     "which has no attn summary")
  prefix, reader = open_checkpoint(path)
  if SUMMARY_BIAS not in reader.get_variable_to_shape_map():
    raise UsageError(f"--pooling=attn: {prefix} has no trained attn summary "
                     f"({SUMMARY_BIAS}: a checkpoint fine-tuned with "
                     "summary_type=attn, in the original layout, has one)")
  return prefix


def load_attn_summary(path: str, config) -> SequenceSummary:
  """The attn `SequenceSummary` (no projection) of the checkpoint at `path`
  (`check_attn_summary`'s errors)."""
  summary = SequenceSummary(config, "attn", use_summ_proj=False)
  load_original_checkpoint(summary, check_attn_summary(path), strict=True)
  return summary


class Embedder:
  """Texts' token ids -> per-piece vectors and pooled vectors.

  Example:
    >>> from xlnet_tf.config import XLNetConfig
    >>> cfg = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=4,
    ...                   d_inner=16, n_token=40)
    >>> e = Embedder(XLNetModel(cfg), layers=[0, -1], max_seq_length=8)
    >>> vectors, pooled = e.embed_ids([[9, 10, 11]])[0]
    >>> vectors.shape, pooled["masked_mean"].shape
    ((3, 2, 8), (2, 8))
  """

  def __init__(self, encoder: XLNetModel, layers: Sequence[int] = (-1,),
               poolings: Sequence[str] = ("masked_mean",),
               max_seq_length: int = 128, mem_len: Optional[int] = None,
               summary: Optional[SequenceSummary] = None):
    poolings = pooling_names(poolings)
    if "attn" in poolings and summary is None:
      raise ValueError("pooling 'attn' needs a trained attn summary "
                       "(load_attn_summary)")
    if max_seq_length < 2 or (mem_len is not None and mem_len < 1):
      raise ValueError(f"max_seq_length {max_seq_length} must be >= 2 and "
                       f"mem_len {mem_len} >= 1")
    self.encoder, self.summary = encoder, summary
    # Built here: variables cannot be made inside the traced conditionals.
    build_once(*[x for x in (encoder, summary) if x is not None])
    self.layers = layer_indices(layers, encoder.config.n_layer)
    self.poolings = poolings
    self.max_seq_length = max_seq_length
    self.mem_len = mem_len or max_seq_length
    self.full_windows = "mean" in self.poolings
    spec = [tf.TensorSpec([None, None], tf.int32),
            tf.TensorSpec([None, None], tf.int32),
            tf.TensorSpec([None, None], tf.float32)]
    # Two graphs, each traced when first needed: one window, or segments.
    self._one = tf.function(lambda *f: self.forward(*f, segmented=False),
                            input_signature=spec)
    self._segments = tf.function(lambda *f: self.forward(*f, segmented=True),
                                 input_signature=spec)

  def forward(self, input_ids, segment_ids, input_mask, segmented=None):
    """Features `[B, T]` -> (states `[B, K, T, D]`, pooled). `segmented`:
    True for T > S (any T: the first window may be partial), False for
    T <= S, None to decide in the graph."""
    if segmented is None:
      states = encode_layers(self.encoder, input_ids, segment_ids,
                             input_mask, self.layers, self.max_seq_length,
                             self.mem_len)
    elif segmented:
      states = _segments(self.encoder, input_ids, segment_ids, input_mask,
                         self.layers, self.max_seq_length, self.mem_len)
    else:
      states = _one_pass(self.encoder, input_ids, segment_ids, input_mask,
                         self.layers)
    states = tf.cast(states, tf.float32)  # float32 out, whatever the policy
    return states, pool_states(states, input_mask, self.poolings,
                               self.max_seq_length, self.summary)

  def embed_ids(self, id_lists: Sequence[Sequence[int]]
                ) -> List[Tuple[np.ndarray, Dict[str, np.ndarray]]]:
    """One batch: per text, (vectors `[n, K, D]` of its n pieces, {pooling:
    `[K, D]`}) as float32 arrays."""
    counts = [len(ids) for ids in id_lists]
    length = layout_length(counts, self.max_seq_length, self.full_windows)
    f = window_features(id_lists, length)
    run = self._segments if length > self.max_seq_length else self._one
    states, pooled = run(f["input_ids"], f["segment_ids"], f["input_mask"])
    states = states.numpy()
    pooled = {k: v.numpy() for k, v in pooled.items()}
    out = []
    for b, n in enumerate(counts):
      start = length - n - 2
      vectors = np.transpose(states[b, :, start:start + n], [1, 0, 2])
      out.append((vectors, {k: v[b] for k, v in pooled.items()}))
    return out


def embed_pieces(embedder: Embedder, texts: Sequence[TextPieces],
                 batch_size: int, progress: Optional[Progress] = None,
                 chunk_batches: int = 32
                 ) -> Iterator[Tuple[int, np.ndarray, Dict[str, np.ndarray]]]:
  """Yields `(index, vectors [n, K, D], pooled {pooling: [K, D]})` for every
  text, in order. Texts are batched by length within chunks of
  `chunk_batches` batches (less padding, bounded memory)."""
  chunk = batch_size * chunk_batches
  for begin in range(0, len(texts), chunk):
    order = sorted(range(begin, min(begin + chunk, len(texts))),
                   key=lambda i: len(texts[i].ids))
    results = {}
    for b in range(0, len(order), batch_size):
      batch = order[b:b + batch_size]
      for i, result in zip(batch, embedder.embed_ids(
          [texts[i].ids for i in batch])):
        results[i] = result
      if progress is not None:
        progress.update(len(batch))
    for i in sorted(results):
      yield (i, *results[i])


def embed_texts(embedder: Embedder, tokenizer, texts: Sequence[str],
                batch_size: int = 8) -> List[dict]:
  """The Python API: per text {"pieces", "ids", "starts", "ends" (offsets
  into the text), "vectors" `[n, K, D]`, "pooled" {pooling: `[K, D]`}}.
  `tokenizer`: a `SentencePieceTokenizer`."""
  pieces = [text_pieces(tokenizer, t) for t in texts]
  return [dict(pieces[i]._asdict(), vectors=v, pooled=p)
          for i, v, p in embed_pieces(embedder, pieces, batch_size)]


def _left_pad(rows: tf.RaggedTensor, length, value) -> tf.Tensor:
  """Ragged `[B, (n)]` -> `[B, length]`, each row at the right end."""
  dense = rows.to_tensor(default_value=value)
  lengths = rows.row_lengths()
  source = (tf.range(tf.cast(length, tf.int64))[None]
            - (tf.cast(length, tf.int64) - lengths)[:, None])
  gathered = tf.gather(dense, tf.maximum(source, 0), batch_dims=1)
  return tf.where(source >= 0, gathered, tf.cast(value, dense.dtype))


def text_features(ids: tf.RaggedTensor, segment_length: int) -> dict:
  """In-graph `window_features` over whole windows: ragged ids `[B, (n)]`
  -> features `[B, N * S]`, N the windows the longest text needs."""
  ids = tf.cast(ids, tf.int32)
  batch = ids.nrows()

  def column(value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], value))
  tokens = tf.concat([ids, column(SEP_ID), column(CLS_ID)], axis=1)
  segs = tf.concat([tf.zeros_like(ids) + SEG_ID_A, column(SEG_ID_A),
                    column(SEG_ID_CLS)], axis=1)
  longest = tf.maximum(tf.reduce_max(tokens.row_lengths()), 1)
  length = (longest + segment_length - 1) // segment_length * segment_length
  real = _left_pad(tf.ones_like(tokens, tf.float32), length, 0.0)
  return {"input_ids": _left_pad(tokens, length, 0),
          "segment_ids": _left_pad(segs, length, SEG_ID_PAD),
          "input_mask": 1.0 - real}


def embed_text_signature(root: tf.Module, encoder: XLNetModel,
                         tokenizer: GraphTokenizer, max_seq_length: int):
  """The `embed_text` signature (a concrete function to register under that
  name), its encoder's weights, tokenizer and function attached to
  `root`.

  Input `text` tf.string `[B]`. Outputs (T = N * max_seq_length, N the
  windows the longest text needs; the last layer):
    input_ids int32 `[B, T]`, input_mask float32 `[B, T]` (1 = padding):
      `pieces <sep> <cls>` LEFT padded, as `window_features`;
    sequence_output float32 `[B, T, D]`: the content states;
    last, first, mean, masked_mean float32 `[B, D]`: `pool_states`.
  Texts longer than a window are read in segments with memory (M =
  max_seq_length), exactly as `Embedder`.
  """
  layers = (encoder.config.n_layer,)
  build_once(encoder)

  def embed_text(text):
    f = text_features(tokenizer.tokenize(text), max_seq_length)
    states = encode_layers(encoder, f["input_ids"], f["segment_ids"],
                           f["input_mask"], layers, max_seq_length,
                           max_seq_length)
    pooled = pool_states(states, f["input_mask"], SIGNATURE_POOLINGS,
                         max_seq_length)
    out = {"input_ids": f["input_ids"], "input_mask": f["input_mask"],
           "sequence_output": tf.cast(states[:, 0], tf.float32)}
    out.update({k: tf.cast(v[:, 0], tf.float32) for k, v in pooled.items()})
    return out

  # Without autograph (the loop is a tf.while_loop already; converting the
  # encoder's code was most of the export's trace time), and the encoder's
  # variables tracked rather than the layer (saving a Keras layer traces
  # each of its calls again).
  function = tf.function(embed_text, autograph=False, input_signature=[
      tf.TensorSpec([None], tf.string, "text")])
  root.embed_text_weights = list(encoder.weights)
  root.embed_text_tokenizer = tokenizer
  root.embed_text_function = function
  return function.get_concrete_function()
