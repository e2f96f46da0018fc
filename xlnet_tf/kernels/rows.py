"""Attention computed only at chosen query rows, `output_positions [B, P]`
int32 (the query stream's targets, or the one position a pooled head reads).

Why: the reference computes every row of the `[B, N, L, K]` scores and then
keeps a few (the original's target-mapping einsum); here only those rows are
computed, and their position scores are gathered straight from the relative
rows. Reference: `positions.rel_shift` over all rows, then the rows picked
(tests/test_kernels_attention.py).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf


def shift_rows(x: tf.Tensor, offsets: tf.Tensor, klen) -> tf.Tensor:
  """`rel_shift` for chosen rows: `x [B, N, P, R]`, `offsets [B, P]` int ->
  `[B, N, P, klen]`, `out[b, n, p, j] = x[b, n, p, offsets[b, p] + j]`.

  Query row p at position `pos_p` reads `offsets = qlen - pos_p`. Indices
  past the last row are clamped to it: they belong to keys the mask hides
  ('uni' attention's future), whose gradient is exactly zero. The gradient
  is a gather too (each output column comes from its own input column)
  instead of TensorFlow's scatter-add for a gather, which is much slower on
  CPU.

  Example:
    >>> x = tf.constant([[[[20., 21., 22., 23.], [30., 31., 32., 33.]]]])
    >>> shift_rows(x, tf.constant([[2, 1]]), klen=2).numpy().tolist()
    [[[[22.0, 23.0], [31.0, 32.0]]]]
  """
  return _shift_rows(x, tf.cast(offsets, tf.int32), klen)


@tf.custom_gradient
def _shift_rows(x, offsets, klen):
  rlen = tf.shape(x)[-1]  # R
  target = tf.shape(x)[:3]
  index = tf.minimum(offsets[:, None, :, None] + tf.range(klen), rlen - 1)
  out = tf.gather(x, tf.broadcast_to(index, tf.concat([target, [klen]], 0)),
                  batch_dims=3)

  def grad(upstream):
    # Input column r took output column r - offset, if inside [0, klen);
    # other columns get the zero appended at index klen.
    column = tf.range(rlen) - offsets[:, None, :, None]
    column = tf.where((column >= 0) & (column < klen), column, klen)
    padded = tf.pad(upstream, [[0, 0], [0, 0], [0, 0], [0, 1]])
    return tf.gather(padded, tf.broadcast_to(
        column, tf.concat([target, [rlen]], 0)), batch_dims=3), None, None
  return out, grad


def rows_of(output_positions: tf.Tensor, qlen, klen,
            seg_mat: Optional[tf.Tensor], mask: Optional[tf.Tensor]):
  """The rows at `output_positions [B, P]` (int32) of `seg_mat [B, L, K, 2]`
  and of `mask` (broadcastable to `[B, L, K]`): `([B, P, K, 2], [B, P, K])`,
  None stays None.

  Example:
    >>> mask = tf.constant([[[0., 1.], [1., 0.]]])
    >>> rows_of(tf.constant([[1]]), 2, 2, None, mask)[1].numpy().tolist()
    [[[1.0, 0.0]]]
  """
  if seg_mat is not None:
    seg_mat = tf.gather(seg_mat, output_positions, batch_dims=1)
  if mask is not None:
    full = tf.broadcast_to(mask, [tf.shape(output_positions)[0], qlen, klen])
    mask = tf.gather(full, output_positions, batch_dims=1)
  return seg_mat, mask
