"""Layer normalization over the last axis, for tensors of any rank, computed
as the original's `tf.contrib.layers.layer_norm` (epsilon 1e-12), in float32."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.kernels import normalize

LAYER_NORM_EPSILON = 1e-12


def plain_normalize(x: tf.Tensor, epsilon: float = LAYER_NORM_EPSILON):
  """The reference: `(x - mean) / sqrt(var + eps)` over the last axis.

  Example:
    >>> plain_normalize(tf.constant([[1.0, 3.0]])).numpy().round(4).tolist()
    [[-1.0, 1.0]]
  """
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  return (x - mean) * tf.math.rsqrt(variance + epsilon)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class LayerNorm(keras.layers.Layer):
  """`x [..., D] -> gamma * (x - mean) / sqrt(var + eps) + beta`; the fast
  path normalizes with `kernels.normalize` (closed-form gradient).

  Example:
    >>> ln = LayerNorm(2)
    >>> ln(tf.constant([[1.0, 3.0]])).numpy().round(4).tolist()
    [[-1.0, 1.0]]
  """

  def __init__(self, d_model: int, epsilon: float = LAYER_NORM_EPSILON,
               fast_kernels: bool = True, **kwargs):
    kwargs.setdefault("name", "LayerNorm")
    super().__init__(**kwargs)
    self.d_model = d_model
    self.epsilon = epsilon
    self.fast_kernels = fast_kernels

  def build(self, input_shape=None):
    self.gamma = self.add_weight("gamma", [self.d_model], initializer="ones")
    self.beta = self.add_weight("beta", [self.d_model], initializer="zeros")
    super().build(input_shape)

  @unconverted
  def call(self, x):
    dtype = x.dtype
    norm = normalize if self.fast_kernels else plain_normalize
    y = norm(tf.cast(x, tf.float32), self.epsilon)
    return tf.cast(y * tf.cast(self.gamma, tf.float32) +
                   tf.cast(self.beta, tf.float32), dtype)

  def original_weights(self) -> dict:
    return {"LayerNorm/gamma": self.gamma, "LayerNorm/beta": self.beta}

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, epsilon=self.epsilon,
                  fast_kernels=self.fast_kernels)
    return config
