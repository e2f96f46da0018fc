"""Seeded dropout from 16 random bits per element.

Why: each element's keep/drop decision reads 16 random bits, so one 32-bit
Philox output serves two elements, half the generator work of a float
uniform per element. The rate is realised to 1/65536 (0.1 -> 0.1000061) and
the survivors are scaled by the realised rate, so the expectation is exact.
The mask is a pure function of the seed: a layer recomputed in the backward
pass replays it. Reference: `layers/dropout.py`'s plain seeded dropout (a
float uniform per element; other draws, the same law).
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.kernels.fused import dropout_fused

_LEVELS = 1 << 16


def keep_mask(shape, rate: float, seed: tf.Tensor):
  """`(keep, realised_rate)`: a bool mask of `shape`, each element False with
  probability `realised_rate` = `round(rate * 65536) / 65536`, a pure function
  of `seed` (int32 `[2]`).

  Example:
    >>> keep, p = keep_mask([1000, 100], 0.1, tf.constant([7, 8]))
    >>> dropped = 1 - float(tf.reduce_mean(tf.cast(keep, tf.float32)))
    >>> round(p, 7), round(dropped, 2)
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


def keep_mask_for(inputs: tf.Tensor, rate: float, seed: tf.Tensor):
  """`keep_mask` of `inputs`' shape, drawn once `inputs` is computed: the mask
  depends on the seed alone, so the executor would otherwise draw every
  layer's masks at the start of the step and hold them until used."""
  with tf.control_dependencies([inputs]):
    return keep_mask(tf.shape(inputs), rate, seed)


def seeded_dropout(inputs: tf.Tensor, rate: float,
                   seed: tf.Tensor) -> tf.Tensor:
  """Dropout of `inputs` (any shape) by `keep_mask_for`, applied by the fused
  kernel.

  Example:
    >>> y = seeded_dropout(tf.ones([4, 6]), 0.5, tf.constant([3, 4]))
    >>> sorted(set(y.numpy().ravel().tolist()))
    [0.0, 2.0]
  """
  return dropout_fused(inputs, *keep_mask_for(inputs, rate, seed))
