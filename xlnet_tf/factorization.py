"""A factorization order written as data, and the two-stream inputs it implies,
as pure functions: what scoring, generation and infilling hand the encoder.

`target_order [B, L]` int32 says who predicts what:
  -1      context: a known token. Context tokens see each other (and only each
          other); they never see a target.
  k >= 0  the k-th target. It sees the context and the targets of a smaller
          order; targets of the same order do not see each other.
Padding (`input_mask` = 1) is seen by nobody.

This is the original's pretraining rule (non-targets see only non-targets,
targets see what comes before them in the permutation), with the order given
instead of sampled. Left to right over a text is `order = position`;
pseudo-log-likelihood is one target of order 0 per copy of the text.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

CONTEXT = -1


def factorization_perm_mask(target_order,
                            input_mask: Optional[tf.Tensor] = None
                            ) -> tf.Tensor:
  """`perm_mask [B, L, L]` float: `[b, i, j] = 1` when query i may not see key
  j. A target's row hides its own position (its query stream must not see
  its token; the encoder lets the content stream see itself anyway).

  Example:
    >>> order = tf.constant([[-1, 0, 1]])
    >>> factorization_perm_mask(order)[0].numpy().astype(int).tolist()
    [[0, 1, 1], [0, 1, 1], [0, 0, 1]]
    >>> factorization_perm_mask(order, tf.constant([[1., 0., 0.]]))[0, 2].numpy()
    array([1., 0., 1.], dtype=float32)
  """
  order = tf.cast(target_order, tf.int32)
  query = order[:, :, None]
  key = order[:, None, :]
  key_is_target = key >= 0
  # A context query sees no target; a target sees targets strictly before it.
  hidden = key_is_target & ((query < 0) | (key >= query))
  mask = tf.cast(hidden, tf.float32)
  if input_mask is not None:
    mask = tf.maximum(mask, tf.cast(input_mask, tf.float32)[:, None, :])
  return mask


def target_positions(target_order, num_predict: Optional[int] = None
                     ) -> tf.Tensor:
  """`[B, P]` int32: the positions of the targets sorted by order (ties by
  position), -1 filling rows with fewer than P targets. P defaults to the
  most targets of any row.

  Example:
    >>> target_positions(tf.constant([[1, -1, 0], [-1, 0, -1]])).numpy().tolist()
    [[2, 0], [1, -1]]
  """
  order = tf.cast(target_order, tf.int32)
  length = tf.shape(order)[1]
  positions = tf.range(length)[None, :]
  # Context sorts last; ties keep position order.
  big = tf.int32.max // 2
  key = tf.where(order >= 0, order * length + positions,
                 big + tf.zeros_like(order))
  sorted_key = tf.sort(key, axis=1)
  count = tf.reduce_sum(tf.cast(order >= 0, tf.int32), axis=1)
  if num_predict is None:
    num_predict = tf.reduce_max(count)
  sorted_key = sorted_key[:, :num_predict]
  return tf.where(sorted_key < big, sorted_key % length, -1)


def target_mapping(positions, length) -> tf.Tensor:
  """`[B, P, L]` float one-hot rows of `positions [B, P]` (-1 = an all-zero
  row, predicting nothing).

  Example:
    >>> target_mapping(tf.constant([[2, -1]]), 3).numpy().astype(int).tolist()
    [[[0, 0, 1], [0, 0, 0]]]
  """
  return tf.one_hot(tf.cast(positions, tf.int32), length, dtype=tf.float32)


def query_inputs(target_order) -> tf.Tensor:
  """`input_q [B, L]` float, 1 at targets (switches the query stream on).

  Example:
    >>> query_inputs(tf.constant([[-1, 0, 3]])).numpy().tolist()
    [[0.0, 1.0, 1.0]]
  """
  return tf.cast(tf.cast(target_order, tf.int32) >= 0, tf.float32)
