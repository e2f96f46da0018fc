"""Relative positional encoding: distances, sinusoids and `rel_shift`.

Row `k` of the encoding stands for the relative distance `beg - k` between a
query and a key, with `beg = klen` (the original's convention). For 'bi'
attention the rows run from `klen` down to `-qlen + 1` (klen + qlen rows), for
'uni' from `klen` down to `1` (klen + 1 rows). After `rel_shift`, the score of
query `i` (absolute position `mlen + i`) and key `j` is read from the row of
distance `mlen + i - j`.
"""

from __future__ import annotations

import tensorflow as tf


def relative_distances(qlen, klen, attn_type: str, clamp_len: int = -1,
                       backward: bool = False) -> tf.Tensor:
  """Float32 distances `[R]`, one per row of the positional encoding.

  Example:
    >>> relative_distances(2, 3, "bi").numpy().tolist()
    [3.0, 2.0, 1.0, 0.0, -1.0]
    >>> relative_distances(2, 3, "uni", clamp_len=2).numpy().tolist()
    [2.0, 2.0, 1.0, 0.0]
    >>> relative_distances(2, 3, "bi", backward=True).numpy().tolist()
    [-3.0, -2.0, -1.0, 0.0, 1.0]
  """
  if attn_type == "bi":
    beg, end = klen, -qlen
  elif attn_type == "uni":
    beg, end = klen, -1
  else:
    raise ValueError(f"attn_type must be 'bi' or 'uni', got {attn_type!r}")
  beg = tf.cast(beg, tf.float32)
  end = tf.cast(end, tf.float32)
  if backward:  # the reversed stream of bi_data sees mirrored distances
    pos = tf.range(-beg, -end, 1.0)
  else:
    pos = tf.range(beg, end, -1.0)
  if clamp_len > 0:
    pos = tf.clip_by_value(pos, -float(clamp_len), float(clamp_len))
  return pos


def sinusoid_encoding(distances: tf.Tensor, d_model: int) -> tf.Tensor:
  """`[R] -> [R, d_model]`: `[sin(d * f) ; cos(d * f)]`, f = 1 / 10000^(2k/D).

  Computed in float32 whatever the model's compute dtype.

  Example:
    >>> sinusoid_encoding(tf.constant([0.0]), 4).numpy().tolist()
    [[0.0, 0.0, 1.0, 1.0]]
  """
  freq_seq = tf.range(0, d_model, 2.0)
  inv_freq = 1.0 / (10000.0 ** (freq_seq / d_model))
  angles = tf.einsum("i,d->id", tf.cast(distances, tf.float32), inv_freq)
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def relative_positional_encoding(qlen, klen, d_model: int, attn_type: str,
                                 clamp_len: int = -1, bi_data: bool = False,
                                 batch_size=None) -> tf.Tensor:
  """The encoding `r` fed to every layer.

  Returns `[R, D]` when the batch shares one encoding, or `[B, R, D]` with
  `bi_data` (first half of the batch forward, second half backward distances).

  Example:
    >>> relative_positional_encoding(2, 3, 4, "bi").shape
    TensorShape([5, 4])
    >>> relative_positional_encoding(2, 3, 4, "bi", bi_data=True,
    ...                              batch_size=4).shape
    TensorShape([4, 5, 4])
  """
  fwd = sinusoid_encoding(
      relative_distances(qlen, klen, attn_type, clamp_len), d_model)
  if not bi_data:
    return fwd
  if batch_size is None:
    raise ValueError("bi_data needs the batch size")
  bwd = sinusoid_encoding(
      relative_distances(qlen, klen, attn_type, clamp_len, backward=True),
      d_model)
  static = tf.get_static_value(batch_size)
  if static is not None and static % 2:
    raise ValueError(f"bi_data needs an even batch (forward and backward "
                     f"halves), got batch size {static}")
  half = batch_size // 2
  return tf.concat([tf.tile(fwd[None], [half, 1, 1]),
                    tf.tile(bwd[None], [half, 1, 1])], axis=0)


def rel_shift(x: tf.Tensor, klen) -> tf.Tensor:
  """Aligns position scores `[..., I, R]` to keys: `[..., I, klen]`.

  `out[..., i, j] = x[..., i, j + I - i]`: with row r of the encoding standing
  for distance `klen - r`, query i (absolute position `mlen + i`) and key j get
  the row of distance `mlen + i - j`. Done the original way, without a gather:
  view `[I, R]` as `[R, I]`, drop the first row, view as `[I, R - 1]`, keep
  the first `klen` columns.

  Example (I = 2 queries, no memory, klen = 2, rows = distances [2, 1, 0, -1]):
    >>> x = tf.constant([[[20., 21., 22., 23.], [30., 31., 32., 33.]]])
    >>> rel_shift(x, klen=2).numpy().tolist()
    [[[22.0, 23.0], [31.0, 32.0]]]

  Query 0 reads distances [0, -1] for keys 0, 1; query 1 reads [1, 0].
  """
  shape = tf.shape(x)
  rank = len(x.shape)
  lead = shape[:rank - 2]
  qlen, rlen = shape[rank - 2], shape[rank - 1]
  # tf.slice rather than `x[..., 1:, :]`: slice's gradient is a pad, much
  # cheaper on CPU than a strided slice's, and this runs in every layer.
  lead_zeros = [0] * (rank - 2)
  x = tf.reshape(x, tf.concat([lead, [rlen, qlen]], 0))
  x = tf.slice(x, lead_zeros + [1, 0], [-1] * rank)
  x = tf.reshape(x, tf.concat([lead, [qlen, rlen - 1]], 0))
  return tf.slice(x, lead_zeros + [0, 0], [-1] * (rank - 1) + [klen])
