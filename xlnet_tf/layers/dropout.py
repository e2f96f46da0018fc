"""Dropout that can replay its mask: given a `seed` (int32 `[2]`), the mask is a
pure function of the seed (stateless RNG), so a layer recomputed in the
backward pass (`RunOptions.recompute`) drops exactly what the forward pass
dropped. Without a seed it is Keras's ordinary (stateful) dropout.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.layers.fused import dropout_fused

# Each element's keep/drop decision reads 16 random bits: one 32-bit Philox
# output serves two elements, half the generator work of a float uniform per
# element (the RNG was ~6% of a fine-tuning step). The rate is realised to
# 1/65536 (0.1 -> 0.1000061) and the survivors are scaled by the realised rate,
# so the expectation is exact.
_LEVELS = 1 << 16


def sub_seed(seed: Optional[tf.Tensor], site: int) -> Optional[tf.Tensor]:
  """The seed of dropout site `site` under `seed` (None stays None): distinct
  sites get independent masks.

  Example:
    >>> a = sub_seed(tf.constant([1, 2]), 0)
    >>> b = sub_seed(tf.constant([1, 2]), 1)
    >>> a.shape, bool(tf.reduce_all(a == b))
    (TensorShape([2]), False)
    >>> sub_seed(None, 3) is None
    True
  """
  if seed is None:
    return None
  return tf.random.experimental.stateless_fold_in(seed, site)


def keep_mask(shape, rate: float, seed: tf.Tensor):
  """`(keep, realised_rate)`: a bool mask of `shape`, each element False with
  probability `realised_rate` = `round(rate * 65536) / 65536`, a pure function
  of `seed` (int32 `[2]`).

  Example:
    >>> keep, p = keep_mask([1000, 100], 0.1, tf.constant([7, 8]))
    >>> round(p, 7), round(1 - float(tf.reduce_mean(tf.cast(keep, tf.float32))), 2)
    (0.1000061, 0.1)
    >>> bool(tf.reduce_all(keep == keep_mask([1000, 100], 0.1,
    ...                                      tf.constant([7, 8]))[0]))
    True
  """
  threshold = min(int(round(rate * _LEVELS)), _LEVELS - 1)
  size = tf.reduce_prod(shape)
  bits = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None,
                                     maxval=None, dtype=tf.uint32)
  halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
  keep = tf.reshape(halves, shape) >= tf.constant(threshold, tf.uint16)
  return keep, threshold / _LEVELS


class SeededDropout(keras.layers.Dropout):
  """`keras.layers.Dropout` plus an optional `seed` argument to `call`.

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

  def call(self, inputs, training=None, seed=None):
    mask = self.mask(inputs, training, seed)
    if mask is None:
      return super().call(inputs, training=training)
    return dropout_fused(inputs, *mask)

  def mask(self, inputs, training=None, seed=None):
    """`(keep, realised_rate)` for `inputs` (see `keep_mask`), for a caller
    that fuses the dropout into its own kernel; None where this layer would
    not draw a seeded mask (no seed, not training, or rate 0)."""
    if seed is None or not training or self.rate == 0:
      return None
    # The mask depends on the seed alone, so the executor would draw every
    # layer's masks at the start of the step and hold them until used; the
    # control dependency draws each when its input is ready.
    with tf.control_dependencies([inputs]):
      return keep_mask(tf.shape(inputs), self.rate, seed)
