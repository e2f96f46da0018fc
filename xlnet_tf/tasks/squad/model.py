"""SQuAD span extraction: the span head (the original's `get_qa_outputs`,
top-level scopes `start_logits`, `end_logits`, `answer_class`), the model,
the original's loss, the training task and the SavedModel signature.

Features: `input_ids`, `segment_ids` `[B, L]` int32, `input_mask`, `p_mask`
`[B, L]` float (1 = padding / may NOT be an answer boundary), `cls_index
[B]`; for training also `start_positions`, `end_positions [B]` int32 and
`is_impossible [B]` float. Masked log-probabilities are about -1e30. How a
question and its context become those features: `data_utils/squad/`.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once, unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.initializers import fresh
from xlnet_tf.layers.dropout import SeededDropout
from xlnet_tf.layers.layer_norm import LayerNorm
from xlnet_tf.masks import MASK_PENALTY
from xlnet_tf.tasks.base import TaskModel, XLNetTask
from xlnet_tf.tasks.squad.formats import EXPORT_KIND


def _masked(logits, p_mask):
  """`logits * (1 - p_mask) - 1e30 * p_mask`, in float32."""
  p_mask = tf.cast(p_mask, tf.float32)
  return tf.cast(logits, tf.float32) * (1 - p_mask) - MASK_PENALTY * p_mask


@keras.utils.register_keras_serializable(package="xlnet_tf")
class SquadHead(keras.layers.Layer):
  """`sequence_output [B, L, D]` -> a dict of float32 tensors.

  With `start_positions [B]` (training): `start_log_probs [B, L]`,
  `end_log_probs [B, L]` (end conditioned on the gold start), `cls_logits [B]`.
  Without (inference, beam of `start_n_top` x `end_n_top`):
  `start_log_probs [B, L]`, `start_top_log_probs / start_top_index [B, S]`,
  `end_log_probs [B, S, L]`, `end_top_log_probs / end_top_index [B, S * E]`
  (entry `s * E + e` = the e-th best end for the s-th best start) and
  `cls_logits [B]`.
  """

  def __init__(self, d_model: int, start_n_top: int = 5, end_n_top: int = 5,
               dropout: float = 0.0, kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout
    init = keras.initializers.get(kernel_initializer)
    self.kernel_initializer = init
    policy = self.dtype_policy
    self.start_dense = keras.layers.Dense(1, kernel_initializer=fresh(init),
                                          name="dense", dtype=policy)
    self.end_dense_0 = keras.layers.Dense(d_model, activation="tanh",
                                          kernel_initializer=fresh(init),
                                          name="dense_0", dtype=policy)
    self.end_layer_norm = LayerNorm(d_model, dtype=policy)
    self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=fresh(init),
                                          name="dense_1", dtype=policy)
    self.cls_dense_0 = keras.layers.Dense(d_model, activation="tanh",
                                          kernel_initializer=fresh(init),
                                          name="dense_0", dtype=policy)
    self.cls_dense_1 = keras.layers.Dense(1, use_bias=False,
                                          kernel_initializer=fresh(init),
                                          name="dense_1", dtype=policy)
    # Seeded by the training step (`seeds`): resumes exactly.
    self.cls_dropout = SeededDropout(dropout, dtype=policy)

  def build(self, input_shape=None):
    d = self.d_model
    build_dense(self.start_dense, d)
    build_dense(self.end_dense_0, 2 * d)
    build_once(self.end_layer_norm)
    build_dense(self.end_dense_1, d)
    build_dense(self.cls_dense_0, 2 * d)
    build_dense(self.cls_dense_1, d)
    super().build(input_shape)

  def _end_log_probs(self, hidden, start_features, p_mask):
    """`hidden [B, L, D]`, `start_features [B, S, D]` -> `[B, S, L]`."""
    seq_len = tf.shape(hidden)[1]
    n_start = tf.shape(start_features)[1]
    end_input = tf.concat([
        tf.tile(hidden[:, None], [1, n_start, 1, 1]),
        tf.tile(start_features[:, :, None], [1, 1, seq_len, 1]),
    ], axis=-1)
    x = self.end_layer_norm(self.end_dense_0(end_input))
    end_logits = tf.squeeze(self.end_dense_1(x), -1)
    return tf.nn.log_softmax(_masked(end_logits, p_mask[:, None]), axis=-1)

  @unconverted
  def call(self, hidden, p_mask, cls_index, start_positions=None,
           training=False):
    hidden = tf.cast(hidden, self.compute_dtype)
    start_logits = tf.squeeze(self.start_dense(hidden), -1)
    start_logits_masked = _masked(start_logits, p_mask)
    start_log_probs = tf.nn.log_softmax(start_logits_masked, axis=-1)
    out = {"start_log_probs": start_log_probs}

    if start_positions is not None:
      start_features = tf.gather(hidden, start_positions, batch_dims=1)
      out["end_log_probs"] = self._end_log_probs(
          hidden, start_features[:, None], p_mask)[:, 0]
    else:
      top_lp, top_index = tf.math.top_k(start_log_probs, k=self.start_n_top)
      start_features = tf.gather(hidden, top_index, batch_dims=1)
      end_log_probs = self._end_log_probs(hidden, start_features, p_mask)
      end_top_lp, end_top_index = tf.math.top_k(end_log_probs,
                                                k=self.end_n_top)
      n_beam = self.start_n_top * self.end_n_top
      out.update(start_top_log_probs=top_lp, start_top_index=top_index,
                 end_log_probs=end_log_probs,
                 end_top_log_probs=tf.reshape(end_top_lp, [-1, n_beam]),
                 end_top_index=tf.reshape(end_top_index, [-1, n_beam]))

    # Answerability from the <cls> state and the expected start state; no end
    # dependency, so there is one score per example.
    cls_feature = tf.gather(hidden, tf.cast(cls_index, tf.int32), batch_dims=1)
    start_p = tf.cast(tf.nn.softmax(start_logits_masked, axis=-1),
                      hidden.dtype)
    start_feature = tf.einsum("blh,bl->bh", hidden, start_p)
    ans = self.cls_dense_0(tf.concat([start_feature, cls_feature], axis=-1))
    ans = self.cls_dropout(ans, training=training)
    out["cls_logits"] = tf.cast(tf.squeeze(self.cls_dense_1(ans), -1),
                                tf.float32)
    return out

  def original_weights(self) -> dict:
    weights = {}
    for scope, layer in (("start_logits/dense", self.start_dense),
                         ("end_logits/dense_0", self.end_dense_0),
                         ("end_logits/LayerNorm", self.end_layer_norm),
                         ("end_logits/dense_1", self.end_dense_1),
                         ("answer_class/dense_0", self.cls_dense_0),
                         ("answer_class/dense_1", self.cls_dense_1)):
      for var in layer.weights:  # kernel, bias / gamma, beta
        weights[f"{scope}/{var.name.split('/')[-1].split(':')[0]}"] = var
    return weights

  def get_config(self):
    initializer = keras.initializers.serialize(self.kernel_initializer)
    return dict(super().get_config(), d_model=self.d_model,
                start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                dropout=self.dropout_rate, kernel_initializer=initializer)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetForQuestionAnswering(TaskModel):
  """encoder -> `SquadHead`; returns the head's dict. The training path (end
  conditioned on the gold start) is taken when `start_positions` is among
  the features."""

  def __init__(self, network: XLNetModel, start_n_top: int = 5,
               end_n_top: int = 5, **kwargs):
    super().__init__(network, **kwargs)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.qa_head = SquadHead(self.config.d_model, start_n_top, end_n_top,
                             self.options.dropout, self.initializer,
                             name="qa_head", dtype=self.policy)
    self.heads = [self.qa_head]

  @unconverted
  def call(self, features, training=False):
    hidden = self.encode(features, training)
    return self.qa_head(hidden, features["p_mask"], features["cls_index"],
                        start_positions=features.get("start_positions"),
                        training=training)

  def head_config(self) -> dict:
    return {"start_n_top": self.start_n_top, "end_n_top": self.end_n_top}


def squad_loss(outputs, start_positions, end_positions, is_impossible=None):
  """The original: mean of start and end NLL, plus half the answerability
  sigmoid cross-entropy when `is_impossible` is given. Returns a scalar."""

  def nll(log_probs, positions):
    picked = tf.gather(log_probs, tf.cast(positions, tf.int32), batch_dims=1)
    return -tf.reduce_mean(picked)

  loss = 0.5 * (nll(outputs["start_log_probs"], start_positions) +
                nll(outputs["end_log_probs"], end_positions))
  if is_impossible is not None:
    loss += 0.5 * tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(is_impossible, tf.float32),
        logits=outputs["cls_logits"]))
  return loss


class SquadTask(XLNetTask):
  """`squad_loss` on `{..., start_positions, end_positions, is_impossible}`
  batches. The built model answers with a beam of `start_n_top` x
  `end_n_top` when no `start_positions` is given."""

  model_class = XLNetForQuestionAnswering
  export_kind = EXPORT_KIND

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions],
               start_n_top: int = 5, end_n_top: int = 5, seq_len: int = 0):
    super().__init__(config, options, seq_len, start_n_top=start_n_top,
                     end_n_top=end_n_top)

  def compute_loss(self, model, features, state, training):
    out = model(features, training=training)
    return squad_loss(out, features["start_positions"],
                      features["end_positions"],
                      features["is_impossible"]), None
