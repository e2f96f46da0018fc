"""Multi-head attention without positions (scope `abs_attn`), as the original's
`multihead_attn`; used by the `attn` sequence summary."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_once
from xlnet_tf.initializers import fresh
from xlnet_tf.layers.layer_norm import LayerNorm
from xlnet_tf.layers.relative_attention import MASK_PENALTY


class AbsoluteAttention(keras.layers.Layer):
  """`q [B, I, D]` attends `k, v [B, J, D]` -> `[B, I, D]`.

  `mask` is `[B, J]` float, 1 = key is padding. The output is
  `LN(o(attn) + v)` with `residual=True` (the original adds the VALUE input,
  so it needs I == J), `LN(o(attn))` without (what the summary uses).
  """

  def __init__(self, d_model: int, n_head: int, d_head: int,
               dropout: float = 0.0, dropatt: float = 0.0, residual=True,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.dropout_rate = dropout
    self.dropatt_rate = dropatt
    self.residual = residual
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.attn_dropout = keras.layers.Dropout(dropatt, dtype=self.dtype_policy)
    self.output_dropout = keras.layers.Dropout(dropout,
                                               dtype=self.dtype_policy)
    self.layer_norm = LayerNorm(d_model, dtype=self.dtype_policy)

  def build(self, input_shape=None):
    shape = [self.d_model, self.n_head, self.d_head]
    for name in ("q", "k", "v", "o"):
      setattr(self, f"{name}_kernel", self.add_weight(
          f"{name}/kernel", shape=shape, initializer=fresh(self.kernel_initializer)))
    build_once(self.layer_norm)
    super().build(input_shape)

  def call(self, q, k, v, mask=None, training=False):
    dtype = self.compute_dtype
    q, k, v = (tf.cast(t, dtype) for t in (q, k, v))
    q_head = tf.einsum("bid,dnh->binh", q, self.q_kernel)
    k_head = tf.einsum("bjd,dnh->bjnh", k, self.k_kernel)
    v_head = tf.einsum("bjd,dnh->bjnh", v, self.v_kernel)
    score = tf.einsum("binh,bjnh->bnij", q_head, k_head)
    score = tf.cast(score, tf.float32) * (1.0 / (self.d_head ** 0.5))
    if mask is not None:
      score -= MASK_PENALTY * tf.cast(mask, tf.float32)[:, None, None, :]
    prob = tf.cast(tf.nn.softmax(score, axis=-1), dtype)
    prob = self.attn_dropout(prob, training=training)
    attn_vec = tf.einsum("bnij,bjnh->binh", prob, v_head)
    out = tf.einsum("binh,dnh->bid", attn_vec, self.o_kernel)
    out = self.output_dropout(out, training=training)
    if self.residual:
      out = out + v
    return self.layer_norm(out)

  def original_weights(self) -> dict:
    weights = {f"{n}/kernel": getattr(self, f"{n}_kernel")
               for n in ("q", "k", "v", "o")}
    weights.update(self.layer_norm.original_weights())
    return weights

  def get_config(self):
    config = super().get_config()
    config.update(
        d_model=self.d_model, n_head=self.n_head, d_head=self.d_head,
        dropout=self.dropout_rate, dropatt=self.dropatt_rate,
        residual=self.residual,
        kernel_initializer=keras.initializers.serialize(
            self.kernel_initializer))
    return config
