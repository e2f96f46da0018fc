"""SavedModel export of a classifier or regressor: the features signature
and the raw-text signatures with the in-graph tokenizer.

Signatures of an export (L the record length):
  serving_default  input_ids, segment_ids int32 [B, L], input_mask float32
                   [B, L] (1 = padding) -> logits [B, C], probabilities
                   [B, C], class_id int32 [B], label string [B]
                   (regression: score [B])
  serve_features   the same at any length T <= L ([B, T]): the features of
                   `convert_example` with some or all of their leading
                   padding columns cut (a batch of short texts costs T,
                   not L). Only for a model read in one window whose
                   summary reads no padding (summary_type last or attn:
                   `any_length`); the same answers as serving_default
  serve_text       text string [B] -> the same, tokenized in-graph
  serve_text_pair  text_a, text_b string [B] -> the same
The raw-text signatures build features exactly as
`data_utils.classification.features.convert_example` (A <sep> B <sep>
<cls>, longest-first truncation, LEFT padding) with the in-graph tokenizer
(`data_utils.graph_tokenizer`). Its TF Text ops must be registered before
loading: `import tensorflow_text` first, and use `xlnet-saved-model-cli`
where you would use `saved_model_cli`. An export given the SentencePiece
model without the raw-text signatures (`text_signatures=False`, the
features export) uses TensorFlow's own ops only; both carry the model file
and the marker's `batch` entry (`export.directory.save_atomically`).

A model read in segments (`model.segment_length` S, memory M =
`options.mem_len`, L = N * S) takes [B, L] features as above, read as N
segments with memory; with N > 1 the raw-text signatures build the
long-document layout (`classifier_features`). Two more signatures stream a
document of any length, one segment at a time:
  initial_memory   batch_size int32 [] -> mems float32 [n_layer, B, M, D]
                   (zeros), mems_mask float32 [B, M] (ones: 1 = a memory
                   position nobody attends)
  serve_segment    input_ids, segment_ids int32 [B, S], input_mask float32
                   [B, S], mems, mems_mask (as initial_memory's) -> the
                   outputs of serving_default for this segment, new_mems
                   [n_layer, B, M, D], new_mems_mask [B, M]
Feeding a document's segments in order, each with the previous call's
new_mems / new_mems_mask (the first with initial_memory's), gives after the
last segment the outputs serving_default gives on the whole document.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from data_utils import paths
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)
from xlnet_tf.export.directory import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs, signature, string_spec
from xlnet_tf.tasks.classification.formats import (CLASSIFIER_EXPORT_KIND,
                                                   REGRESSOR_EXPORT_KIND)


def _keep(ids: tf.RaggedTensor, n: tf.Tensor,
          from_end: bool = False) -> tf.RaggedTensor:
  """The first (`from_end`: the last) `n[b]` ids of each row."""
  lengths = tf.cast(ids.row_lengths(), n.dtype)
  positions = tf.ragged.range(lengths, dtype=n.dtype)
  if from_end:
    return tf.ragged.boolean_mask(ids, positions >= (lengths - n)[:, None])
  return tf.ragged.boolean_mask(ids, positions < n[:, None])


def truncation_lengths(len_a, len_b, budget):
  """In-graph `classification.features.truncate_pair` (int64 tensors)."""
  fits = len_a + len_b <= budget
  short_fits = 2 * tf.minimum(len_a, len_b) <= budget
  a_shorter = len_a < len_b
  keep_a = tf.where(fits, len_a, tf.where(
      short_fits, tf.where(a_shorter, len_a, budget - len_b),
      (budget + 1) // 2))
  keep_b = tf.where(fits, len_b, tf.where(
      short_fits, tf.where(a_shorter, budget - len_a, len_b), budget // 2))
  return keep_a, keep_b


def _left_pad(rows: tf.RaggedTensor, length: int, value) -> tf.Tensor:
  """Ragged `[B, (n)]` (n <= length) -> `[B, length]`, padding on the left."""
  dense = rows.to_tensor(default_value=value, shape=[None, length])
  n = tf.cast(rows.row_lengths(), tf.int32)
  j = tf.range(length)[None, :]
  shift = length - n[:, None]
  source = tf.maximum(j - shift, 0)
  gathered = tf.gather(dense, source, batch_dims=1)
  return tf.where(j >= shift, gathered, tf.cast(value, dense.dtype))


def segmented_lengths(len_a, len_b, record_length: int,
                      segment_length: int):
  """Pieces of A and B kept in the long-document layout (int64 tensors
  `[B]`): B its first `S - 3` at most, so that B, its `<sep>` and `<cls>`
  lie in the last segment, and A at most `L - 3 - kept B`; with an empty B,
  A at most `L - 2` (no B, as the original)."""
  keep_b = tf.minimum(len_b, segment_length - 3)
  keep_a = tf.where(len_b > 0,
                    tf.minimum(len_a, record_length - 3 - keep_b),
                    tf.minimum(len_a, record_length - 2))
  return keep_a, keep_b


def check_layout(max_seq_length: int, segment_length: Optional[int],
                 keep_end: bool) -> bool:
  """Whether records of `max_seq_length` hold more than one segment of
  `segment_length` (None: one window); ValueError when the length is no
  whole number of segments, or for `keep_end` without several segments
  (as `convert_document`)."""
  if segment_length and max_seq_length % segment_length:
    raise ValueError(f"max_seq_length {max_seq_length} is not a multiple of "
                     f"the model's segment_length {segment_length}")
  segmented = bool(segment_length) and segment_length < max_seq_length
  if keep_end and not segmented:
    raise ValueError("keep_end needs more than one segment (max_seq_length "
                     "a multiple > 1 of the model's segment_length)")
  return segmented


def any_length(model, max_seq_length: int) -> bool:
  """Whether `model` answers features of any length T <= `max_seq_length`
  (leading padding cut) as it answers them padded to L: read in one window
  (`segment_length` None or L), and a summary that reads no padding
  position ('first' reads position 0 and 'mean' averages all L, padding
  included, as the original: cutting padding would change both)."""
  one_window = model.segment_length in (None, max_seq_length)
  return one_window and model.summary_type in ("last", "attn")


def classifier_features(ids_a: tf.RaggedTensor,
                        ids_b: Optional[tf.RaggedTensor],
                        max_seq_length: int,
                        segment_length: Optional[int] = None,
                        keep_end: bool = False) -> dict:
  """Token ids (ragged `[B, (n)]`) -> model features `[B, max_seq_length]`
  (input_mask 1 = padding).

  Without `segment_length`, or with it equal to `max_seq_length` (one
  segment): as `convert_example`. With N = max_seq_length / S > 1 segments
  of `segment_length` S, the long-document layout of
  `data_utils.classification.features`: A truncated to its first L - 2
  pieces (its last with `keep_end`), or in a pair B to its first S - 3 and A
  to its first (last) L - 3 - len(B), `A <sep> [B <sep>] <cls>` LEFT padded
  to L.
  """
  segmented = check_layout(max_seq_length, segment_length, keep_end)
  ids_a = tf.cast(ids_a, tf.int64)
  batch = ids_a.nrows()
  len_a = ids_a.row_lengths()

  def column(value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.cast(
        value, tf.int64)))

  if ids_b is None:
    a = _keep(ids_a, tf.minimum(len_a, max_seq_length - 2), keep_end)
    tokens = tf.concat([a, column(SEP_ID), column(CLS_ID)], axis=1)
    segs = tf.concat([tf.zeros_like(a) + SEG_ID_A, column(SEG_ID_A),
                      column(SEG_ID_CLS)], axis=1)
  else:
    ids_b = tf.cast(ids_b, tf.int64)
    len_b = ids_b.row_lengths()
    if segmented:
      keep_a, keep_b = segmented_lengths(len_a, len_b, max_seq_length,
                                         segment_length)
    else:
      keep_a, keep_b = truncation_lengths(len_a, len_b,
                                          tf.constant(max_seq_length - 3,
                                                      tf.int64))
      # With an empty B the original truncates A alone, to L - 2.
      keep_a = tf.where(len_b > 0, keep_a,
                        tf.minimum(len_a, max_seq_length - 2))
    a, b = _keep(ids_a, keep_a, keep_end), _keep(ids_b, keep_b)
    has_b = keep_b > 0  # an empty B is no B, as the original
    b_sep = tf.ragged.boolean_mask(column(SEP_ID), has_b[:, None])
    tokens = tf.concat([a, column(SEP_ID), b, b_sep, column(CLS_ID)], axis=1)
    segs = tf.concat([tf.zeros_like(a) + SEG_ID_A, column(SEG_ID_A),
                      tf.zeros_like(b) + SEG_ID_B,
                      tf.zeros_like(b_sep) + SEG_ID_B, column(SEG_ID_CLS)],
                     axis=1)
  input_ids = _left_pad(tokens, max_seq_length, 0)
  segment_ids = _left_pad(segs, max_seq_length, SEG_ID_PAD)
  real = _left_pad(tf.ones_like(tokens), max_seq_length, 0)
  return {"input_ids": tf.cast(input_ids, tf.int32),
          "segment_ids": tf.cast(segment_ids, tf.int32),
          "input_mask": 1.0 - tf.cast(real, tf.float32)}


class ClassifierServer(tf.Module):
  """The exported object: the model, the tokenizer and the signatures."""

  def __init__(self, model, max_seq_length: int, regression: bool,
               labels: Optional[Sequence[str]] = None, tokenizer=None,
               keep_end: bool = False):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length
    self.regression = regression
    self.labels = tf.constant([str(x) for x in (labels or [])] or [""])
    self.tokenizer = tokenizer
    self.keep_end = keep_end
    self.segment_length = model.segment_length

  def _outputs(self, out):
    if self.regression:
      return {"score": out["score"]}
    class_id = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "class_id": class_id, "label": tf.gather(self.labels, class_id)}

  def _classify(self, features):
    return self._outputs(self.model(features, training=False))

  def _features(self, ids_a, ids_b):
    return classifier_features(ids_a, ids_b, self.max_seq_length,
                               self.segment_length, self.keep_end)

  def serve_features(self, input_ids, segment_ids, input_mask):
    return self._classify({"input_ids": input_ids, "segment_ids": segment_ids,
                           "input_mask": input_mask})

  def serve_any_length(self, input_ids, segment_ids, input_mask):
    """`serve_features` at `[B, T]`, T <= L. A one-segment model reads the
    segment after an empty memory, as its `call` does, without needing T
    to be L when traced."""
    features = {"input_ids": input_ids, "segment_ids": segment_ids,
                "input_mask": input_mask}
    if not self.segment_length:
      return self._classify(features)
    mems, mems_mask = self.model.initial_memory(tf.shape(input_ids)[0])
    return self._outputs(self.model.read_segment(features, mems, mems_mask,
                                                 training=False)[0])

  def serve_text(self, text):
    return self._classify(self._features(self.tokenizer.tokenize(text), None))

  def serve_text_pair(self, text_a, text_b):
    return self._classify(self._features(self.tokenizer.tokenize(text_a),
                                         self.tokenizer.tokenize(text_b)))

  def initial_memory(self, batch_size):
    mems, mems_mask = self.model.initial_memory(batch_size)
    return {"mems": tf.cast(tf.stack(mems), tf.float32),
            "mems_mask": tf.cast(mems_mask, tf.float32)}

  def serve_segment(self, input_ids, segment_ids, input_mask, mems,
                    mems_mask):
    # The signature's memory is float32 whatever the policy; the encoder
    # reads it in its compute dtype, as its own memory.
    dtype = self.model.encoder.compute_dtype
    layers = [tf.cast(m, dtype) for m in
              tf.unstack(mems, num=self.model.config.n_layer)]
    out, new_mems, new_mems_mask = self.model.read_segment(
        {"input_ids": input_ids, "segment_ids": segment_ids,
         "input_mask": input_mask}, layers, mems_mask, training=False)
    return dict(self._outputs(out),
                new_mems=tf.cast(tf.stack(new_mems), tf.float32),
                new_mems_mask=tf.cast(new_mems_mask, tf.float32))

  def signatures(self) -> dict:
    length = self.max_seq_length
    sigs = {"serving_default": signature(self.serve_features,
                                         *feature_specs([None, length]))}
    if any_length(self.model, length):
      sigs["serve_features"] = signature(self.serve_any_length,
                                         *feature_specs([None, None]))
    if self.tokenizer is not None:
      sigs["serve_text"] = signature(self.serve_text, string_spec("text"))
      sigs["serve_text_pair"] = signature(
          self.serve_text_pair, string_spec("text_a"), string_spec("text_b"))
    if self.segment_length:
      config, mem_len = self.model.config, self.model.options.mem_len
      mems = [config.n_layer, None, mem_len, config.d_model]
      sigs["initial_memory"] = signature(
          self.initial_memory, tf.TensorSpec([], tf.int32, "batch_size"))
      sigs["serve_segment"] = signature(
          self.serve_segment, *feature_specs([None, self.segment_length]),
          tf.TensorSpec(mems, tf.float32, "mems"),
          tf.TensorSpec([None, mem_len], tf.float32, "mems_mask"))
    return sigs


def export_classifier(model, export_dir: str, max_seq_length: int,
                      regression: bool, labels=None,
                      sp_model_path: Optional[str] = None,
                      lower: bool = False, keep_end: bool = False,
                      text_signatures: bool = True) -> str:
  """Exports a classifier/regressor through `export.directory.save_atomically`;
  `serve_features` where `any_length` holds; with `sp_model_path` (tokenized
  with `lower`) a copy of it and the marker's `batch` entry, and unless
  `text_signatures` is False the raw-text signatures too; for a model read
  in segments (`model.segment_length`) `initial_memory` and
  `serve_segment`. `max_seq_length` is the record length L (N segments: N *
  S); `keep_end` keeps the end of a text longer than L in the raw-text
  signatures (as `--keep_end`). Returns the export directory."""
  segmented = check_layout(max_seq_length, model.segment_length, keep_end)
  export_kind = REGRESSOR_EXPORT_KIND if regression else CLASSIFIER_EXPORT_KIND
  check_export_dir(export_dir, export_kind)
  tokenizer = None
  if sp_model_path and text_signatures:
    # TF's own reader knows no s3://: a model in a bucket is passed as bytes.
    tokenizer = GraphTokenizer(paths.read_bytes(sp_model_path) if
                               paths.is_remote(sp_model_path) else
                               sp_model_path, lower=lower)
  server = ClassifierServer(model, max_seq_length, regression, labels,
                            tokenizer, keep_end)
  batch = dict(lower=bool(lower), max_seq_length=max_seq_length,
               signature=("serve_features"
                          if any_length(model, max_seq_length)
                          else "serving_default"),
               labels=[] if regression else [str(x) for x in labels or []],
               regression=bool(regression))
  if segmented:
    batch.update(segment_length=model.segment_length, keep_end=keep_end)
  return save_atomically(server, server.signatures(), export_dir,
                         export_kind, sp_model_path, batch)
