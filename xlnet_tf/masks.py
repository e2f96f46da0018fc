"""Attention masks, the segment matrix and the masked softmax, batch-major,
as pure functions.

Convention (the original's): a mask is float32 and 1.0 means the query may NOT
attend to the key. Key axes are `K = M + L`: the M memory positions come first
and are visible to every query unless `mems_mask [B, M]` (1 = nobody may
attend) hides some, as the segment recurrence does for memory that holds
padding or nothing yet.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

# Subtracted from masked scores, as the original; only safe in float32.
MASK_PENALTY = 1e30


def causal_mask(qlen, mlen, same_length: bool = False) -> tf.Tensor:
  """`[I, M + I]` mask for 'uni' attention: query i sees memory and keys <= i.

  With `same_length`, query i additionally loses the keys that lie more than
  `mlen` positions behind it, so every query sees exactly `mlen + 1` keys.

  Example:
    >>> causal_mask(3, 1).numpy().astype(int).tolist()
    [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    >>> causal_mask(3, 1, same_length=True).numpy().astype(int).tolist()
    [[0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]]
  """
  ones = tf.ones([qlen, qlen], tf.float32)
  strictly_upper = tf.linalg.band_part(ones, 0, -1) - tf.linalg.band_part(
      ones, 0, 0)
  mask = tf.concat([tf.zeros([qlen, mlen], tf.float32), strictly_upper], 1)
  if same_length:
    strictly_lower = tf.linalg.band_part(ones, -1, 0) - tf.linalg.band_part(
        ones, 0, 0)
    # The original adds the band to the first `qlen` key columns (which start
    # with the memory), not to the last `qlen`.
    mask = tf.concat([mask[:, :qlen] + strictly_lower, mask[:, qlen:]], 1)
  return mask


def attention_masks(qlen, mlen, attn_type: str = "bi",
                    same_length: bool = False,
                    input_mask: Optional[tf.Tensor] = None,
                    perm_mask: Optional[tf.Tensor] = None,
                    mems_mask: Optional[tf.Tensor] = None
                    ) -> Tuple[Optional[tf.Tensor], Optional[tf.Tensor]]:
  """Masks for the content stream and the query stream.

  Args:
    qlen, mlen: current and memory lengths.
    input_mask: `[B, L]` float, 1 = padding (a key nobody may attend to).
    perm_mask: `[B, L, L]` float, `perm_mask[b, i, j] = 1`: query i may not
      attend key j (the factorization order).
    mems_mask: `[B, M]` float, 1 = a memory position nobody may attend to
      (padding or empty memory); None = all memory visible.

  Returns:
    `(content_mask, query_mask)`, float32, each broadcastable to
    `[B, L, M + L]` (the query mask is `[B, 1, K]` when only padding is
    masked, `[1, L, K]` for a bare causal mask), or both None when nothing is
    masked ('bi' without masks). The query stream sees
    what the data and causal masks allow; the content stream additionally
    always sees its own position.

  Example:
    >>> h, g = attention_masks(2, 1, "uni")
    >>> g.numpy().astype(int).tolist()
    [[[0, 0, 1], [0, 0, 0]]]
    >>> h.numpy().astype(int).tolist()
    [[[0, 0, 1], [0, 0, 0]]]
    >>> h, g = attention_masks(2, 0, perm_mask=tf.ones([1, 2, 2]))
    >>> g.numpy().astype(int).tolist(), h.numpy().astype(int).tolist()
    ([[[1, 1], [1, 1]]], [[[0, 1], [1, 0]]])
    >>> h, g = attention_masks(1, 2, mems_mask=tf.constant([[1.0, 0.0]]))
    >>> h.numpy().astype(int).tolist()
    [[[1, 0, 0]]]
  """
  mask = None
  if attn_type == "uni":
    mask = causal_mask(qlen, mlen, same_length)[None]
  elif attn_type != "bi":
    raise ValueError(f"attn_type must be 'bi' or 'uni', got {attn_type!r}")

  data_mask = None
  if input_mask is not None:
    data_mask = tf.cast(input_mask, tf.float32)[:, None, :]
  if perm_mask is not None:
    perm_mask = tf.cast(perm_mask, tf.float32)
    data_mask = perm_mask if data_mask is None else data_mask + perm_mask
  if mems_mask is not None and data_mask is None:
    data_mask = tf.zeros([tf.shape(mems_mask)[0], 1, qlen], tf.float32)
  if data_mask is not None:
    shape = tf.shape(data_mask)
    if mems_mask is None:
      memory = tf.zeros([shape[0], shape[1], mlen], tf.float32)
    else:
      memory = tf.broadcast_to(tf.cast(mems_mask, tf.float32)[:, None, :],
                               [shape[0], shape[1], mlen])
    data_mask = tf.concat([memory, data_mask], axis=2)
    mask = data_mask if mask is None else mask + data_mask

  if mask is None:
    return None, None
  query_mask = tf.cast(mask > 0, tf.float32)
  sees_itself = tf.concat([tf.zeros([qlen, mlen], tf.float32),
                           tf.eye(qlen, dtype=tf.float32)], axis=1)
  content_mask = tf.cast(query_mask - sees_itself[None] > 0, tf.float32)
  return content_mask, query_mask


def memory_mask(mems_mask: Optional[tf.Tensor], input_mask: tf.Tensor,
                mem_len: int, reuse_len: int = 0) -> tf.Tensor:
  """The mask `[B, mem_len]` of the memory a segment leaves (`new_mems` of a
  call with the same `reuse_len`, 0 = all of it): the last `mem_len`
  positions of `concat(mems_mask, input_mask[:, :reuse_len])`, 1 where they
  were padding or hidden
  memory, and 1 where there was nothing (a first segment shorter than
  `mem_len`, `mems_mask` None meaning no memory before it).

  `mems_mask [B, M]` float or None, `input_mask [B, L]` float (1 = padding).

  Example:
    >>> memory_mask(tf.constant([[1., 0.]]), tf.constant([[1., 0., 0.]]),
    ...             4).numpy().tolist()
    [[0.0, 1.0, 0.0, 0.0]]
    >>> memory_mask(None, tf.constant([[0., 0.]]), 3).numpy().tolist()
    [[1.0, 0.0, 0.0]]
    >>> memory_mask(tf.constant([[1., 0.]]), tf.constant([[0., 1.]]), 2,
    ...             reuse_len=1).numpy().tolist()
    [[0.0, 0.0]]
  """
  input_mask = tf.cast(input_mask, tf.float32)
  if reuse_len > 0:
    input_mask = input_mask[:, :reuse_len]
  if mem_len <= 0:  # `[:, -0:]` would keep everything
    return tf.zeros([tf.shape(input_mask)[0], 0], tf.float32)
  # Ones in front cover memory that never existed: never attended.
  parts = [tf.ones([tf.shape(input_mask)[0], mem_len], tf.float32)]
  if mems_mask is not None:
    parts.append(tf.cast(mems_mask, tf.float32))
  parts.append(input_mask)
  return tf.concat(parts, axis=1)[:, -mem_len:]


def segment_matrix(segment_ids: tf.Tensor, mlen) -> tf.Tensor:
  """`[B, L] -> [B, L, M + L, 2]` one-hot of "query and key differ in segment".

  Memory positions count as segment 0.

  Example:
    >>> m = segment_matrix(tf.constant([[0, 1]]), mlen=1)
    >>> m[..., 1].numpy().astype(int).tolist()
    [[[0, 0, 1], [1, 1, 0]]]
  """
  segment_ids = tf.cast(segment_ids, tf.int32)
  batch = tf.shape(segment_ids)[0]
  key_ids = tf.concat([tf.zeros([batch, mlen], tf.int32), segment_ids], axis=1)
  differ = tf.cast(tf.not_equal(segment_ids[:, :, None], key_ids[:, None, :]),
                   tf.int32)
  return tf.one_hot(differ, 2, dtype=tf.float32)


def masked_softmax(score: tf.Tensor, scale: float,
                   mask: Optional[tf.Tensor] = None) -> tf.Tensor:
  """`softmax(score * scale - 1e30 * mask)` over the last axis, in float32
  (1e30 overflows 16-bit floats); `mask` broadcasts against `score`.

  Example:
    >>> p = masked_softmax(tf.constant([[1.0, 1.0, 5.0]]), 1.0,
    ...                    tf.constant([[0.0, 0.0, 1.0]]))
    >>> p.numpy().tolist()
    [[0.5, 0.5, 0.0]]
  """
  score = tf.cast(score, tf.float32) * scale
  if mask is not None:
    score -= MASK_PENALTY * tf.cast(mask, tf.float32)
  return tf.nn.softmax(score, axis=-1)


def attention_probs(score: tf.Tensor, scale: float, mask: Optional[tf.Tensor],
                    dropout, dtype, training=False, seed=None) -> tf.Tensor:
  """Attention probabilities `[B, N, I, J]` from scores `[B, N, I, J]`:
  `masked_softmax` over the keys with `mask` broadcastable to `[B, I, J]` (1 =
  may not attend; None = none), cast to `dtype`, then `dropout(p,
  training=, seed=)` (a `SeededDropout`).

  Example:
    >>> p = attention_probs(tf.zeros([1, 1, 1, 2]), 1.0,
    ...                     tf.constant([[[0.0, 1.0]]]),
    ...                     lambda p, training, seed: p, tf.float32)
    >>> p.numpy().tolist()
    [[[[1.0, 0.0]]]]
  """
  prob = masked_softmax(score, scale, None if mask is None else mask[:, None])
  return dropout(tf.cast(prob, dtype), training=training, seed=seed)
