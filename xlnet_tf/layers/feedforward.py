"""Position-wise feed-forward network: `LN(x + W2 drop(act(W1 x)))`."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once
from xlnet_tf.initializers import fresh, get_activation
from xlnet_tf.layers.dropout import SeededDropout, sub_seed
from xlnet_tf.layers.fused import gelu_tanh_fused
from xlnet_tf.layers.layer_norm import LayerNorm


class PositionwiseFFN(keras.layers.Layer):
  """`[..., D] -> [..., D]`; weights named as the original's `ff/` scope
  (`layer_1`, `layer_2`, `LayerNorm`)."""

  def __init__(self, d_model: int, d_inner: int, activation: str = "relu",
               dropout: float = 0.0, kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.d_inner = d_inner
    self.activation = activation
    self.dropout_rate = dropout
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    # The activation is applied in `call`: training takes the fused kernel.
    self.act = get_activation(activation)
    self.layer_1 = keras.layers.Dense(
        d_inner, kernel_initializer=fresh(self.kernel_initializer), name="layer_1",
        dtype=self.dtype_policy)
    self.layer_2 = keras.layers.Dense(
        d_model, kernel_initializer=fresh(self.kernel_initializer), name="layer_2",
        dtype=self.dtype_policy)
    self.drop_1 = SeededDropout(dropout, dtype=self.dtype_policy)
    self.drop_2 = SeededDropout(dropout, dtype=self.dtype_policy)
    self.layer_norm = LayerNorm(d_model, dtype=self.dtype_policy)

  def build(self, input_shape=None):
    build_dense(self.layer_1, self.d_model)
    build_dense(self.layer_2, self.d_inner)
    build_once(self.layer_norm)
    super().build(input_shape)

  def call(self, x, training=False, seed=None):
    """`seed`: int32 `[2]` for replayable dropout masks, or None."""
    # On `[B * L, D]` the dense layers are plain matmuls whose bias add fuses
    # into them (a 3-D input would go through tensordot's reshapes).
    shape = tf.shape(x)
    x = tf.reshape(x, [-1, self.d_model])
    y = self.layer_1(x)
    seed_1 = sub_seed(seed, 0)
    fused = training and self.activation == "gelu"
    mask = self.drop_1.mask(y, training, seed_1) if fused else None
    if mask is not None:
      y = gelu_tanh_fused(y, *mask)  # GELU and its dropout: one kernel
    else:
      y = gelu_tanh_fused(y) if fused else self.act(y)
      y = self.drop_1(y, training=training, seed=seed_1)
    y = self.drop_2(self.layer_2(y), training=training,
                    seed=sub_seed(seed, 1))
    return tf.reshape(self.layer_norm(y + x), shape)

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
    config.update(
        d_model=self.d_model, d_inner=self.d_inner, activation=self.activation,
        dropout=self.dropout_rate,
        kernel_initializer=keras.initializers.serialize(
            self.kernel_initializer))
    return config
