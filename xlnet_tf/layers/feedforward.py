"""Position-wise feed-forward network: `LN(x + W2 drop(act(W1 x)))` (with
dropout on the second projection too)."""

from __future__ import annotations

import tf_keras as keras

from xlnet_tf.building import build_dense, unconverted
from xlnet_tf.activations import get_activation
from xlnet_tf.initializers import fresh
from xlnet_tf.kernels import FeedForwardParts, feedforward
from xlnet_tf.layers.sublayer import Sublayer
from xlnet_tf.seeds import sub_seed


@keras.utils.register_keras_serializable(package="xlnet_tf")
class PositionwiseFFN(Sublayer):
  """`[..., D] -> [..., D]`; weights named as the original's `ff/` scope
  (`layer_1`, `layer_2`, `LayerNorm`). `fast_kernels` selects
  `kernels.feedforward` (2-D matmuls, GELU fused with its dropout) or the
  formula as written in `call`."""

  def __init__(self, d_model: int, d_inner: int, activation: str = "relu",
               dropout: float = 0.0, kernel_initializer="glorot_uniform",
               fast_kernels: bool = True, **kwargs):
    super().__init__(d_model, dropout, kernel_initializer, fast_kernels,
                     **kwargs)
    self.d_inner = d_inner
    self.activation = activation
    self.act = get_activation(activation)
    self.layer_1 = keras.layers.Dense(
        d_inner, kernel_initializer=fresh(self.kernel_initializer),
        name="layer_1", dtype=self.dtype_policy)
    self.layer_2 = keras.layers.Dense(
        d_model, kernel_initializer=fresh(self.kernel_initializer),
        name="layer_2", dtype=self.dtype_policy)
    self.drop_1 = self.seeded_dropout(dropout)
    self.drop_2 = self.seeded_dropout(dropout)

  def build(self, input_shape=None):
    build_dense(self.layer_1, self.d_model)
    build_dense(self.layer_2, self.d_inner)
    super().build(input_shape)

  @unconverted
  def call(self, x, training=False, seed=None):
    """`seed`: int32 `[2]` for replayable dropout masks, or None."""
    if self.fast_kernels:
      parts = FeedForwardParts(self.layer_1, self.layer_2, self.drop_1,
                               self.drop_2, self.layer_norm, self.activation,
                               self.act, self.dropout_rate, self.d_model)
      return feedforward(parts, x, training, seed)
    y = self.drop_1(self.act(self.layer_1(x)), training=training,
                    seed=sub_seed(seed, 0))
    y = self.drop_2(self.layer_2(y), training=training, seed=sub_seed(seed, 1))
    return self.layer_norm(x + y)

  def original_weights(self) -> dict:
    """Relative original names -> variables."""
    return {
        "layer_1/kernel": self.layer_1.kernel,
        "layer_1/bias": self.layer_1.bias,
        "layer_2/kernel": self.layer_2.kernel,
        "layer_2/bias": self.layer_2.bias,
        **self.layer_norm.original_weights(),
    }

  def get_config(self):
    config = super().get_config()
    config.update(d_inner=self.d_inner, activation=self.activation)
    return config
