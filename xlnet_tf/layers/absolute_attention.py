"""Multi-head attention without positions (scope `abs_attn`), as the original's
`multihead_attn`; used by the `attn` sequence summary."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.layers.multi_head import MultiHeadBase
from xlnet_tf.masks import masked_softmax


@keras.utils.register_keras_serializable(package="xlnet_tf")
class AbsoluteAttention(MultiHeadBase):
  """`q [B, I, D]` attends `k, v [B, J, D]` -> `[B, I, D]`.

  `mask` is `[B, J]` float, 1 = key is padding. The output is
  `LN(o(attn) + v)` with `residual=True` (the original adds the VALUE input,
  so it needs I == J), `LN(o(attn))` without (what the summary uses).
  """

  KERNELS = ("q", "k", "v", "o")

  def __init__(self, *args, residual: bool = True, **kwargs):
    super().__init__(*args, **kwargs)
    self.residual = residual

  @unconverted
  def call(self, q, k, v, mask=None, training=False):
    dtype = self.compute_dtype
    q, k, v = (tf.cast(t, dtype) for t in (q, k, v))
    q_head = tf.einsum("bid,dnh->binh", q, self.q_kernel)
    k_head = tf.einsum("bjd,dnh->bjnh", k, self.k_kernel)
    v_head = tf.einsum("bjd,dnh->bjnh", v, self.v_kernel)
    score = tf.einsum("binh,bjnh->bnij", q_head, k_head)
    prob = masked_softmax(score, self.scale,
                          None if mask is None else mask[:, None, None, :])
    prob = self.attn_dropout(tf.cast(prob, dtype), training=training)
    attn_vec = tf.einsum("bnij,bjnh->binh", prob, v_head)
    out = tf.einsum("binh,dnh->bid", attn_vec, self.o_kernel)
    out = self.output_dropout(out, training=training)
    if self.residual:
      out = out + v
    return self.layer_norm(out)

  def get_config(self):
    config = super().get_config()
    config["residual"] = self.residual
    return config
