"""Dropout that can replay its mask: given a `seed` (int32 `[2]`), the mask is
a pure function of the seed (stateless RNG), so a layer recomputed in the
backward pass (`RunOptions.recompute`) drops exactly what the forward pass
dropped. Called without a seed it draws one from the training step's
`seeds.dropout_seeds` scope (so a resumed run drops what the uninterrupted
one did); outside such a scope it is Keras's ordinary (stateful) dropout.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.kernels import seeded_dropout
from xlnet_tf.seeds import next_seed


def plain_seeded_dropout(inputs: tf.Tensor, rate: float,
                         seed: tf.Tensor) -> tf.Tensor:
  """The reference: each element kept when a uniform draw from `seed` is at
  least `rate`, survivors scaled by `1 / (1 - rate)`.

  Example:
    >>> y = plain_seeded_dropout(tf.ones([4, 6]), 0.5, tf.constant([3, 4]))
    >>> sorted(set(y.numpy().ravel().tolist()))
    [0.0, 2.0]
  """
  keep = tf.random.stateless_uniform(tf.shape(inputs), seed) >= rate
  return inputs * tf.cast(keep, inputs.dtype) / tf.cast(1.0 - rate,
                                                       inputs.dtype)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class SeededDropout(keras.layers.Dropout):
  """`keras.layers.Dropout` plus an optional `seed` argument to `call`
  (default: `seeds.next_seed()`, inside a training step's scope);
  `fast_kernels` picks `kernels.seeded_dropout` (16-bit masks, fused) or
  `plain_seeded_dropout` for seeded masks.

  Example:
    >>> drop = SeededDropout(0.5)
    >>> x = tf.ones([2, 6])
    >>> seed = tf.constant([3, 4])
    >>> a = drop(x, training=True, seed=seed)
    >>> bool(tf.reduce_all(a == drop(x, training=True, seed=seed)))
    True
    >>> sorted(set(a.numpy().ravel().tolist())) == [0.0, 2.0]
    True
    >>> bool(tf.reduce_all(drop(x, training=False, seed=seed) == x))
    True
  """

  def __init__(self, rate, fast_kernels: bool = True, **kwargs):
    super().__init__(rate, **kwargs)
    self.fast_kernels = fast_kernels

  @unconverted
  def call(self, inputs, training=None, seed=None):
    if seed is None and training is True and self.rate > 0:
      seed = next_seed()  # None outside a training step's scope
    if seed is None or not training or self.rate == 0:
      return super().call(inputs, training=training)
    if self.fast_kernels:
      return seeded_dropout(inputs, self.rate, seed)
    return plain_seeded_dropout(inputs, self.rate, seed)

  def get_config(self):
    config = super().get_config()
    config["fast_kernels"] = self.fast_kernels
    return config
