"""A dense logit layer under an original scope: `<scope>/<name>/{kernel,bias}`.

Serves classification (`model/classification_<task>/logit`, n_class units),
regression (`model/regression_<task>/logit`, 1 unit, squeezed) and RACE
(`logits/dense`, 1 unit per choice).
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense
from xlnet_tf.initializers import fresh


class LogitHead(keras.layers.Layer):
  """`[B, D] -> [B, units]` (or `[B]` with `squeeze`)."""

  def __init__(self, units: int, original_scope: str, d_model: int,
               squeeze: bool = False, kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.original_scope = original_scope
    self.d_model = d_model
    self.squeeze = squeeze
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.dense = keras.layers.Dense(
        units, kernel_initializer=fresh(self.kernel_initializer),
        name=original_scope.rsplit("/", 1)[-1], dtype=self.dtype_policy)

  def build(self, input_shape=None):
    build_dense(self.dense, self.d_model)
    super().build(input_shape)

  def call(self, hidden):
    logits = tf.cast(self.dense(hidden), tf.float32)
    return tf.squeeze(logits, -1) if self.squeeze else logits

  def original_weights(self) -> dict:
    return {f"{self.original_scope}/kernel": self.dense.kernel,
            f"{self.original_scope}/bias": self.dense.bias}

  def get_config(self):
    config = super().get_config()
    config.update(units=self.units, original_scope=self.original_scope,
                  d_model=self.d_model, squeeze=self.squeeze,
                  kernel_initializer=keras.initializers.serialize(
                      self.kernel_initializer))
    return config
