"""SavedModel export of the language model: generation and embeddings on raw
text, the loop in the graph.

Signatures of an export (`export_language_model`; N = max_seq_length, the
prompt window; T = max_new_tokens; W the length of the rows given to the
ids signatures):
  generate_greedy  text string [B] -> the outputs below, each next token the
                   most probable one
  generate_sample  text string [B], temperature float32 [], top_k int32 []
                   (0 = all), top_p float32 [] (1 = all), seed int32 [2]
                   -> the outputs below, sampled (stateless: the same seed
                   gives the same tokens)
    outputs:       tokens int32 [B, T] (PAD_ID after a stop token),
                   log_probs float32 [B, T] (0 after a stop token),
                   lengths int32 [B] (generated tokens, a stop token
                   included), text string [B] (the text they add to the
                   prompt's, as `generation_search.continuation_text`:
                   special symbols dropped, a leading space when the first
                   starts a word), prompt_lengths int32 [B] (prompt pieces
                   used)
  embed_text       text string [B] -> the embeddings of
                   `embeddings.embed_text_signature`
  embed_ids        input_ids, segment_ids int32 [B, W], input_mask float32
                   [B, W] (1 = padding), layers int32 [K] (indices in [0,
                   n_layer]: 0 the embeddings, n_layer the last layer)
                   -> states float32 [B, K, W, D], and last, first, mean,
                   masked_mean float32 [B, K, D]: the features of
                   `embedding_files.window_features` (pieces <sep> <cls>,
                   LEFT padded), W <= N one window, any W > N in
                   ceil(W / N) windows aligned from the right (the first
                   holds the remainder) with a memory of N, as
                   `embeddings.Embedder` with max_seq_length N
                   (`encode_layers`, `pool_states`); a layer out of range
                   is an InvalidArgumentError naming it
  score_ids        input_ids int32 [B, W], target_order int32 [B, W],
                   input_mask float32 [B, W] -> log_probs float32 [B, P]:
                   `scoring.target_log_probs` on rows of `scoring.layout`
                   and `scoring.pad_left` (one pass, any W), what
                   `TextScorer` computes (P the most targets of a row)
A prompt is the `GraphTokenizer` ids of the text (those of
`SentencePieceTokenizer.encode_ids`), its LAST N pieces when it has more,
LEFT-padded to N (`prompt_features`); a text without pieces is an error
(InvalidArgumentError naming `text`), as in `generate`. Generation is
`generation.decode` on it (ids past the tokenizer's vocabulary never
chosen), so a loaded export answers what `decode` answers in Python for the
same ids. The TF Text ops must be registered before loading: `import
tensorflow_text` first. The export carries the SentencePiece model and the
marker's `batch` entry (`export.directory.save_atomically`; plus `n_layer`
and `partial_first_window`: true, embed_ids takes any W; exports without
it refuse a W past N that is no multiple of N), for a job that tokenizes
in Python and calls embed_ids / score_ids.
"""

from __future__ import annotations

import types
from typing import Optional, Sequence

import tensorflow as tf

from data_utils import paths
from data_utils.errors import UsageError, check_positive
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.tokenization import PAD_ID, SPECIAL_SYMBOLS
from xlnet_tf.export.directory import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs, string_spec
from xlnet_tf.tasks.language_model.embeddings import (SIGNATURE_POOLINGS,
                                                      embed_text_signature,
                                                      encode_layers,
                                                      pool_states)
from xlnet_tf.tasks.language_model.formats import EXPORT_KIND
from xlnet_tf.tasks.language_model.generation import decode
from xlnet_tf.tasks.language_model.model import XLNetPretrainer
from xlnet_tf.tasks.language_model.scoring import target_log_probs

GENERATION_OUTPUTS = ("tokens", "log_probs", "lengths", "text",
                      "prompt_lengths")


def prompt_features(ids: tf.RaggedTensor, length: int):
  """Ragged prompt ids `[B, (n)]` -> `(prompt_ids int32 [B, length],
  prompt_mask float32 [B, length], prompt_lengths int32 [B])`: the last
  `length` ids of each row, LEFT-padded with PAD_ID (mask 1 = padding).

  Example:
    >>> ids, mask, n = prompt_features(tf.ragged.constant([[11, 12, 13], []]), 2)
    >>> ids.numpy().tolist(), mask.numpy().tolist(), n.numpy().tolist()
    ([[12, 13], [5, 5]], [[0.0, 0.0], [1.0, 1.0]], [2, 0])
  """
  ids = tf.cast(ids, tf.int32)
  n = tf.cast(ids.row_lengths(), tf.int32)
  # One PAD column more, so that a batch of empty prompts gathers something.
  dense = tf.concat([ids.to_tensor(default_value=PAD_ID),
                     tf.fill([ids.nrows(), 1], PAD_ID)], axis=1)
  source = n[:, None] - length + tf.range(length)[None, :]
  taken = source >= 0
  picked = tf.gather(dense, tf.maximum(source, 0), batch_dims=1)
  prompt_ids = tf.where(taken, picked, PAD_ID)
  return (prompt_ids, 1.0 - tf.cast(taken, tf.float32),
          tf.minimum(n, length))


class LanguageModelServer(tf.Module):
  """The exported object: the LM, the tokenizer (which also decodes) and
  the signatures. `stop_ids` end a text's generation (None: none do)."""

  def __init__(self, lm: XLNetPretrainer, tokenizer: GraphTokenizer,
               max_seq_length: int,
               max_new_tokens: int,
               stop_ids: Optional[Sequence[int]] = None):
    super().__init__()
    # What is saved of the LM is its variables: saving its Keras layers
    # would add a trace of each layer's call (seconds, unused here), and the
    # model itself, never called as a whole, cannot be saved. Decoding
    # reaches the model through an untracked holder.
    self.lm_weights = list(lm.weights)
    self._held = types.SimpleNamespace(lm=lm)
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    self.max_new_tokens = max_new_tokens
    self.stop_ids = list(stop_ids) if stop_ids else None
    # Ids past the tokenizer's vocabulary have no text: never generated.
    self.vocab_size = tokenizer.vocab_size

  def _detokenize(self, ids, keep):
    """Text of the ids `[B, L]` where `keep`, special symbols dropped (as
    `decode_ids`)."""
    shown = keep & (ids >= len(SPECIAL_SYMBOLS))
    return self.tokenizer.decode(tf.ragged.boolean_mask(ids, shown))

  def _generate(self, text, **sampling):
    ids, mask, kept = prompt_features(self.tokenizer.tokenize(text),
                                      self.max_seq_length)
    check = tf.debugging.assert_positive(
        kept, message="text: a prompt without tokens (a prompt needs at "
        "least one)")
    with tf.control_dependencies([check]):
      ids = tf.identity(ids)
    out = decode(self._held.lm, ids, mask, self.max_new_tokens,
                 stop_ids=self.stop_ids, vocab_size=self.vocab_size,
                 **sampling)
    tokens, lengths = out["tokens"], out["lengths"]
    new = tf.range(tf.shape(tokens)[1])[None, :] < lengths[:, None]
    return {"tokens": tokens, "log_probs": out["log_probs"],
            "lengths": lengths, "prompt_lengths": kept,
            "text": self._continuation(ids, mask, tokens, new)}

  def _continuation(self, prompt_ids, prompt_mask, tokens, new):
    """`continuation_text` in the graph: the text the new tokens add to the
    prompt's (with a leading space when the first starts a word), or their
    own text when the prompt's text is no prefix of the whole."""
    real = prompt_mask < 0.5
    before = self._detokenize(prompt_ids, real)
    after = self._detokenize(tf.concat([prompt_ids, tokens], axis=1),
                             tf.concat([real, new], axis=1))
    n = tf.strings.length(before)
    prefix = tf.equal(tf.strings.substr(after, tf.zeros_like(n), n), before)
    rest = tf.strings.substr(after, n, tf.strings.length(after) - n)
    return tf.where(prefix, rest, self._detokenize(tokens, new))

  def generate_greedy(self, text):
    return self._generate(text, greedy=True)

  def generate_sample(self, text, temperature, top_k, top_p, seed):
    return self._generate(text, greedy=False, temperature=temperature,
                          top_k=top_k, top_p=top_p, seed=seed)

  def embed_ids(self, input_ids, segment_ids, input_mask, layers):
    window = self.max_seq_length
    n_layer = self._held.lm.encoder.config.n_layer
    # Out-of-range layers would gather zeros on some devices: refused by
    # name. Any length is read (a partial first window past one window).
    valid_layers = tf.reduce_all((layers >= 0) & (layers <= n_layer))
    checks = [
        tf.debugging.Assert(valid_layers, [
            f"layers: indices must be in [0, {n_layer}] (0 = the "
            f"embeddings, {n_layer} = the last layer), got", layers])]
    with tf.control_dependencies(checks):
      input_ids, layers = tf.identity(input_ids), tf.identity(layers)
    states = tf.cast(encode_layers(
        self._held.lm.encoder, input_ids, segment_ids, input_mask, layers,
        window, window), tf.float32)  # float32 out, whatever the policy
    out = pool_states(states, input_mask, SIGNATURE_POOLINGS, window)
    return dict(out, states=states)

  def score_ids(self, input_ids, target_order, input_mask):
    return {"log_probs": target_log_probs(self._held.lm, input_ids,
                                          target_order, input_mask)}

  def signatures(self) -> dict:
    text = string_spec("text")
    return {
        "generate_greedy": _traced(self.generate_greedy, text),
        "generate_sample": _traced(
            self.generate_sample, text,
            tf.TensorSpec([], tf.float32, "temperature"),
            tf.TensorSpec([], tf.int32, "top_k"),
            tf.TensorSpec([], tf.float32, "top_p"),
            tf.TensorSpec([2], tf.int32, "seed")),
        "embed_text": embed_text_signature(self, self._held.lm.encoder,
                                           self.tokenizer,
                                           self.max_seq_length),
        "embed_ids": _traced(self.embed_ids, *feature_specs([None, None]),
                             tf.TensorSpec([None], tf.int32, "layers")),
        "score_ids": _traced(
            self.score_ids, tf.TensorSpec([None, None], tf.int32, "input_ids"),
            tf.TensorSpec([None, None], tf.int32, "target_order"),
            tf.TensorSpec([None, None], tf.float32, "input_mask")),
    }


def _traced(fn, *specs):
  """`fn` traced for `specs` without autograph: the loop is a
  `tf.while_loop` already, and converting the encoder's code takes most of
  the trace time (about 8 s of 9 for a 2-layer model)."""
  return tf.function(fn, autograph=False).get_concrete_function(*specs)


def export_language_model(lm: XLNetPretrainer, spiece_model_file: str,
                          export_dir: str, max_seq_length: int,
                          max_new_tokens: int, uncased: bool = False,
                          stop_ids: Optional[Sequence[int]] = None) -> str:
  """Writes the export of `lm` (an `XLNetPretrainer`, e.g. from
  `load_language_model`) through `export.directory.save_atomically`: prompts of
  at most `max_seq_length` pieces (longer ones keep their end),
  `max_new_tokens` generated per text, `stop_ids` ending a text early.
  Arguments are checked before anything is built (one-line UsageError
  naming the flag of the same name). Returns the export directory."""
  check_positive(max_seq_length, "max_seq_length")
  check_positive(max_new_tokens, "max_new_tokens")
  for token in stop_ids or ():
    if not 0 <= int(token) < lm.encoder.config.n_token:
      raise UsageError(f"--stop_ids: {token} is not a token id of the model "
                       f"(0..{lm.encoder.config.n_token - 1})")
  check_export_dir(export_dir, EXPORT_KIND)
  try:
    with paths.open_file(spiece_model_file, "rb"):
      pass  # readable: one line naming the flag, not the tokenizer's words
  except OSError as e:
    raise UsageError(f"--spiece_model_file={spiece_model_file}: "
                     f"{e.strerror or e}") from None
  tokenizer = GraphTokenizer(spiece_model_file, lower=uncased)
  server = LanguageModelServer(lm, tokenizer, max_seq_length,
                               max_new_tokens, stop_ids)
  # partial_first_window: embed_ids takes any length (the batch kind pads
  # to the longest row, not to whole windows; older exports refuse that).
  batch = dict(lower=bool(uncased), max_seq_length=max_seq_length,
               n_layer=lm.encoder.config.n_layer, partial_first_window=True)
  return save_atomically(server, server.signatures(), export_dir,
                         EXPORT_KIND, spiece_model_file, batch)
