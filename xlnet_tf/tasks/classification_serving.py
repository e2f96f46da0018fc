"""SavedModel export of a classifier or regressor: the features signature
and the raw-text signatures with the in-graph tokenizer.

Signatures of an export:
  serving_default  input_ids, segment_ids int32 [B, L], input_mask float32
                   [B, L] (1 = padding) -> logits [B, C], probabilities
                   [B, C], class_id int32 [B], label string [B]
                   (regression: score [B])
  serve_text       text string [B] -> the same, tokenized in-graph
  serve_text_pair  text_a, text_b string [B] -> the same
The raw-text signatures build features exactly as
`data_utils.classification.features.convert_example` (A <sep> B <sep>
<cls>, longest-first truncation, LEFT padding) with the in-graph tokenizer
(`data_utils.graph_tokenizer`). Its TF Text ops must be registered before
loading: `import tensorflow_text` first, and use `xlnet-saved-model-cli`
where you would use `saved_model_cli`.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)
from xlnet_tf.export_dir import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs


def _keep(ids: tf.RaggedTensor, n: tf.Tensor) -> tf.RaggedTensor:
  """The first `n[b]` ids of each row."""
  positions = tf.ragged.range(ids.row_lengths(), dtype=n.dtype)
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


def classifier_features(ids_a: tf.RaggedTensor,
                        ids_b: Optional[tf.RaggedTensor],
                        max_seq_length: int) -> dict:
  """Token ids (ragged) -> model features, as `convert_example`."""
  ids_a = tf.cast(ids_a, tf.int64)
  batch = ids_a.nrows()
  len_a = ids_a.row_lengths()

  def column(value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.cast(
        value, tf.int64)))

  if ids_b is None:
    a = _keep(ids_a, tf.minimum(len_a, max_seq_length - 2))
    tokens = tf.concat([a, column(SEP_ID), column(CLS_ID)], axis=1)
    segs = tf.concat([tf.zeros_like(a) + SEG_ID_A, column(SEG_ID_A),
                      column(SEG_ID_CLS)], axis=1)
  else:
    ids_b = tf.cast(ids_b, tf.int64)
    len_b = ids_b.row_lengths()
    keep_a, keep_b = truncation_lengths(len_a, len_b,
                                        tf.constant(max_seq_length - 3,
                                                    tf.int64))
    # With an empty B the original truncates A alone, to L - 2.
    keep_a = tf.where(len_b > 0, keep_a,
                      tf.minimum(len_a, max_seq_length - 2))
    a, b = _keep(ids_a, keep_a), _keep(ids_b, keep_b)
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
               labels: Optional[Sequence[str]] = None, tokenizer=None):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length
    self.regression = regression
    self.labels = tf.constant([str(x) for x in (labels or [])] or [""])
    self.tokenizer = tokenizer

  def _outputs(self, features):
    out = self.model(features, training=False)
    if self.regression:
      return {"score": out["score"]}
    class_id = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "class_id": class_id, "label": tf.gather(self.labels, class_id)}

  def serve_features(self, input_ids, segment_ids, input_mask):
    return self._outputs({"input_ids": input_ids, "segment_ids": segment_ids,
                          "input_mask": input_mask})

  def serve_text(self, text):
    ids = self.tokenizer.tokenize(text)
    return self._outputs(classifier_features(ids, None, self.max_seq_length))

  def serve_text_pair(self, text_a, text_b):
    return self._outputs(classifier_features(
        self.tokenizer.tokenize(text_a), self.tokenizer.tokenize(text_b),
        self.max_seq_length))

  def signatures(self) -> dict:
    length = self.max_seq_length
    sigs = {"serving_default": tf.function(
        self.serve_features).get_concrete_function(
            *feature_specs([None, length]))}
    if self.tokenizer is not None:
      sigs["serve_text"] = tf.function(self.serve_text).get_concrete_function(
          tf.TensorSpec([None], tf.string, "text"))
      sigs["serve_text_pair"] = tf.function(
          self.serve_text_pair).get_concrete_function(
              tf.TensorSpec([None], tf.string, "text_a"),
              tf.TensorSpec([None], tf.string, "text_b"))
    return sigs


def export_classifier(model, export_dir: str, max_seq_length: int,
                      regression: bool, labels=None,
                      sp_model_path: Optional[str] = None,
                      lower: bool = False) -> str:
  """Exports a classifier/regressor through `export_dir.save_atomically`;
  with `sp_model_path` the raw-text signatures too. Returns the export
  directory."""
  kind = "regressor" if regression else "classifier"
  check_export_dir(export_dir, kind)
  tokenizer = (GraphTokenizer(sp_model_path, lower=lower) if sp_model_path
               else None)
  server = ClassifierServer(model, max_seq_length, regression, labels,
                            tokenizer)
  return save_atomically(server, server.signatures(), export_dir, kind)
