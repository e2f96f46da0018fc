"""What both sub-layers of a block share: each is `LayerNorm(x + dropout(f(x)))`
with its kernels `[D, ...]` drawn by one initializer, so each holds the model
size, the dropout rate, the path (`fast_kernels`) and that LayerNorm."""

from __future__ import annotations

import tf_keras as keras

from xlnet_tf.building import build_once
from xlnet_tf.layers.dropout import SeededDropout
from xlnet_tf.layers.layer_norm import LayerNorm


class Sublayer(keras.layers.Layer):
  """Base of the attention and feed-forward sub-layers: `d_model`,
  `dropout_rate`, `kernel_initializer`, `fast_kernels` (given to its
  dropouts and LayerNorm; subclasses pick their own path by it) and
  `layer_norm`."""

  def __init__(self, d_model: int, dropout: float = 0.0,
               kernel_initializer="glorot_uniform", fast_kernels: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.dropout_rate = dropout
    self.fast_kernels = fast_kernels
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.layer_norm = LayerNorm(d_model, fast_kernels=fast_kernels,
                                dtype=self.dtype_policy)

  def seeded_dropout(self, rate: float) -> SeededDropout:
    """A dropout layer on this layer's path and dtype policy."""
    return SeededDropout(rate, self.fast_kernels, dtype=self.dtype_policy)

  def build(self, input_shape=None):
    build_once(self.layer_norm)
    super().build(input_shape)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, dropout=self.dropout_rate,
                  fast_kernels=self.fast_kernels,
                  kernel_initializer=keras.initializers.serialize(
                      self.kernel_initializer))
    return config
