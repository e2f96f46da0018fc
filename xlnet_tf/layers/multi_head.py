"""What both attention layers share: head projections `[D, N, H]` named as the
original (`q/kernel`, ...), dropout on probabilities and output, LayerNorm."""

from __future__ import annotations

import tf_keras as keras

from xlnet_tf.building import build_once
from xlnet_tf.initializers import fresh
from xlnet_tf.layers.dropout import SeededDropout
from xlnet_tf.layers.layer_norm import LayerNorm


class MultiHeadBase(keras.layers.Layer):
  """Subclasses set `KERNELS`, the projections they own, and implement call.
  `fast_kernels` goes to the dropouts and the LayerNorm (and selects the
  subclass's own path)."""

  KERNELS = ("q", "k", "v", "o")

  def __init__(self, d_model: int, n_head: int, d_head: int,
               dropout: float = 0.0, dropatt: float = 0.0,
               kernel_initializer="glorot_uniform", fast_kernels: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.dropout_rate = dropout
    self.dropatt_rate = dropatt
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.fast_kernels = fast_kernels
    self.scale = 1.0 / (d_head ** 0.5)
    self.attn_dropout = SeededDropout(dropatt, fast_kernels,
                                      dtype=self.dtype_policy)
    self.output_dropout = SeededDropout(dropout, fast_kernels,
                                        dtype=self.dtype_policy)
    self.layer_norm = LayerNorm(d_model, fast_kernels=fast_kernels,
                                dtype=self.dtype_policy)

  def build(self, input_shape=None):
    shape = [self.d_model, self.n_head, self.d_head]
    for name in self.KERNELS:
      setattr(self, f"{name}_kernel", self.add_weight(
          f"{name}/kernel", shape=shape,
          initializer=fresh(self.kernel_initializer)))
    build_once(self.layer_norm)
    super().build(input_shape)

  def original_weights(self) -> dict:
    """Relative original names -> variables."""
    weights = {f"{n}/kernel": getattr(self, f"{n}_kernel")
               for n in self.KERNELS}
    weights.update(self.layer_norm.original_weights())
    return weights

  def get_config(self):
    config = super().get_config()
    config.update(
        d_model=self.d_model, n_head=self.n_head, d_head=self.d_head,
        dropout=self.dropout_rate, dropatt=self.dropatt_rate,
        fast_kernels=self.fast_kernels,
        kernel_initializer=keras.initializers.serialize(
            self.kernel_initializer))
    return config
