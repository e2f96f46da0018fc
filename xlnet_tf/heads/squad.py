"""SQuAD span head (the original's `get_qa_outputs`): start / end / answer
class, with the original's top-level scopes `start_logits`, `end_logits`,
`answer_class`.

Masks: `p_mask [B, L]` float, 1 = may NOT be an answer boundary. Masked
log-probabilities are about -1e30.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once
from xlnet_tf.initializers import fresh
from xlnet_tf.layers.layer_norm import LayerNorm
from xlnet_tf.masks import MASK_PENALTY


def _masked(logits, p_mask):
  """`logits * (1 - p_mask) - 1e30 * p_mask`, in float32."""
  p_mask = tf.cast(p_mask, tf.float32)
  return tf.cast(logits, tf.float32) * (1 - p_mask) - MASK_PENALTY * p_mask


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
    self.cls_dropout = keras.layers.Dropout(dropout, dtype=policy)

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
    return {
        "start_logits/dense/kernel": self.start_dense.kernel,
        "start_logits/dense/bias": self.start_dense.bias,
        "end_logits/dense_0/kernel": self.end_dense_0.kernel,
        "end_logits/dense_0/bias": self.end_dense_0.bias,
        "end_logits/LayerNorm/gamma": self.end_layer_norm.gamma,
        "end_logits/LayerNorm/beta": self.end_layer_norm.beta,
        "end_logits/dense_1/kernel": self.end_dense_1.kernel,
        "end_logits/dense_1/bias": self.end_dense_1.bias,
        "answer_class/dense_0/kernel": self.cls_dense_0.kernel,
        "answer_class/dense_0/bias": self.cls_dense_0.bias,
        "answer_class/dense_1/kernel": self.cls_dense_1.kernel,
    }

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, start_n_top=self.start_n_top,
                  end_n_top=self.end_n_top, dropout=self.dropout_rate,
                  kernel_initializer=keras.initializers.serialize(
                      self.kernel_initializer))
    return config
