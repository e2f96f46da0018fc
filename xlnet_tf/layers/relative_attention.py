"""Relative multi-head attention with XLNet's two streams sharing its weights.

Shapes (batch-major): B batch, L current length, M memory length, K = M + L
keys, R rows of the positional encoding, P predictions, N heads, H head size,
D model size. Inside the core, heads lead (`[B, N, T, H]`), so every product
below is a batched matmul on contiguous blocks; scores are `[B, N, I, J]`
(query i, key j).

    score = (ac + bd + ef) / sqrt(H) - 1e30 * mask
    ac = (q + r_w_bias) . k          content
    bd = rel_shift((q + r_r_bias) . r) position
    ef = (q + r_s_bias) . seg_embed[s_ij]  segment (same / different)
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.layers.dropout import sub_seed
from xlnet_tf.layers.multi_head import MultiHeadBase
from xlnet_tf.masks import masked_softmax
from xlnet_tf.positions import rel_shift, shift_rows


@tf.custom_gradient
def add_head_bias(q_head, bias):
  """`q [B, N, I, H] + bias [N, H]` (one bias per head, shared by batch and
  positions).

  Its gradient sums over I, then B: TF's own gradient reduces both
  non-adjacent axes in one pass, ~3x slower on CPU.

  Example:
    >>> add_head_bias(tf.zeros([1, 2, 3, 1]), tf.constant([[1.], [2.]]))[
    ...     0, :, :, 0].numpy().tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
  """
  def grad(upstream):
    return upstream, tf.reduce_sum(tf.reduce_sum(upstream, axis=2), axis=0)
  return q_head + bias[:, None], grad


class RelativeAttention(MultiHeadBase):
  """One attention sub-layer (scope `rel_attn`): projections q, k, v, r, o of
  shape `[D, N, H]`, then residual and LayerNorm.

  Called with the content stream `h [B, L, D]` and optionally the query stream
  `g` (`[B, P, D]` with `target_mapping [B, P, L]`, else `[B, L, D]`); both
  streams use the same weights and the same keys/values (memory + content).
  Returns `(h_out, g_out)`, `g_out` None for one stream.
  """

  KERNELS = ("q", "k", "v", "r", "o")

  def _heads(self, x, kernel):
    """`[B, T, D] -> [B, N, T, H]` (or `[T, D] -> [N, T, H]`): one 2-D matmul,
    then heads to the front."""
    n, h = self.n_head, self.d_head
    flat = tf.matmul(tf.reshape(x, [-1, self.d_model]),
                     tf.reshape(kernel, [self.d_model, n * h]))
    if len(x.shape) == 2:
      return tf.transpose(tf.reshape(flat, [-1, n, h]), [1, 0, 2])
    shape = tf.shape(x)
    return tf.transpose(tf.reshape(flat, [shape[0], shape[1], n, h]),
                        [0, 2, 1, 3])

  def _attend(self, q_head, k_head, v_head, r_head, biases, seg_mat, mask,
              training, seed=None, positions=None, qlen=None):
    """The attention core: `q [B, N, I, H]`, `k, v [B, N, K, H]`, `r [B, N, R,
    H]` or `[N, R, H]` -> attention vector `[B, N, I, H]`.

    Query rows are the `qlen` positions of the segment, or with `positions
    [B, I]` (int) just those positions (the query stream's targets, or the
    rows a pooled model reads): their position scores are then gathered from
    the relative rows directly, `rel_shift`'s `x[i, j + qlen - pos_i]`, rather
    than computed for every position and thrown away.
    """
    r_w_bias, r_r_bias, r_s_bias, seg_embed = biases
    klen = tf.shape(k_head)[2]

    ac = tf.matmul(add_head_bias(q_head, r_w_bias), k_head, transpose_b=True)
    bd = tf.matmul(add_head_bias(q_head, r_r_bias), r_head, transpose_b=True)
    if positions is None:
      bd = rel_shift(bd, klen)
    else:
      bd = shift_rows(bd, qlen - positions, klen)
      if seg_mat is not None:
        seg_mat = tf.gather(seg_mat, positions, batch_dims=1)
      if mask is not None:
        full = tf.broadcast_to(mask, [tf.shape(positions)[0], qlen, klen])
        mask = tf.gather(full, positions, batch_dims=1)
    score = ac + bd
    if seg_mat is not None:
      ef = tf.einsum("bnid,snd->bnis", add_head_bias(q_head, r_s_bias),
                     seg_embed)
      # Picks ef[same] or ef[different] per (i, j): the one-hot product of
      # the original, without a matmul over a dimension of 2.
      different = (seg_mat[..., 1] > 0)[:, None]
      score += tf.where(different, ef[..., 1:], ef[..., :1])

    prob = masked_softmax(score, self.scale,
                          None if mask is None else mask[:, None])
    prob = self.attn_dropout(tf.cast(prob, q_head.dtype), training=training,
                             seed=seed)
    return tf.matmul(prob, v_head)

  def _post_attention(self, residual, attn_vec, training, seed=None):
    """`residual [B, I, D]`, `attn_vec [B, N, I, H]` -> `[B, I, D]`."""
    shape = tf.shape(residual)
    vec = tf.reshape(tf.transpose(attn_vec, [0, 2, 1, 3]),
                     [-1, self.n_head * self.d_head])
    out = tf.matmul(vec, tf.reshape(self.o_kernel, [self.d_model, -1]),
                    transpose_b=True)
    out = self.output_dropout(tf.reshape(out, shape), training=training,
                              seed=seed)
    return self.layer_norm(out + residual)

  def call(self, h, pos_enc, biases, g=None, mems=None, seg_mat=None,
           content_mask=None, query_mask=None, target_mapping=None,
           rows=None, training=False, seed=None):
    """Args:
      h: content stream `[B, L, D]`.
      pos_enc: `[R, D]` or `[B, R, D]` relative positional encoding.
      biases: `(r_w_bias, r_r_bias, r_s_bias, seg_embed)` of this layer,
        `[N, H]` x3 and `[2, N, H]` (the last two may be None without
        segments).
      g: query stream or None.
      mems: `[B, M, D]` memory or None.
      seg_mat: `[B, L, K, 2]` one-hot "different segment" or None.
      content_mask, query_mask: broadcastable to `[B, L, K]`, 1 = may not
        attend, or None.
      target_mapping: `[B, P, L]` one-hot rows of the P predictions, or None.
      rows: `[B, P]` int positions: the content stream is computed only
        there (keys and values still cover every position), `h_out` is
        `[B, P, D]`; None for all L.
      seed: int32 `[2]` for replayable dropout masks, or None.
    """
    dtype = self.compute_dtype
    h = tf.cast(h, dtype)
    biases = tuple(None if b is None else tf.cast(b, dtype) for b in biases)
    cat = h if mems is None else tf.concat([tf.cast(mems, dtype), h], axis=1)
    k_head = self._heads(cat, self.k_kernel)
    v_head = self._heads(cat, self.v_kernel)
    r_head = self._heads(tf.cast(pos_enc, dtype), self.r_kernel)
    qlen = tf.shape(h)[1]

    if rows is not None:
      h = tf.gather(h, rows, batch_dims=1)
    if g is None:
      vec_h = self._attend(self._heads(h, self.q_kernel), k_head, v_head,
                           r_head, biases, seg_mat, content_mask, training,
                           sub_seed(seed, 0), positions=rows, qlen=qlen)
      return self._post_attention(h, vec_h, training, sub_seed(seed, 1)), None

    # The streams share q and o: their rows go through them as one batch
    # (larger matmuls, one LayerNorm), each attending with its own mask.
    g = tf.cast(g, dtype)
    h_len = tf.shape(h)[1]
    both = tf.concat([h, g], axis=1)
    q_head_h, q_head_g = tf.split(self._heads(both, self.q_kernel),
                                  [h_len, -1], axis=2)
    vec_h = self._attend(q_head_h, k_head, v_head, r_head, biases, seg_mat,
                         content_mask, training, sub_seed(seed, 0),
                         positions=rows, qlen=qlen)
    if target_mapping is not None:
      # Only the P target rows are computed; an all-zero (padding) row of
      # target_mapping gives a zero attention vector, as in the original.
      positions = tf.argmax(target_mapping, axis=-1, output_type=tf.int32)
      is_target = tf.reduce_sum(tf.cast(target_mapping, dtype), axis=-1)
      vec_g = self._attend(q_head_g, k_head, v_head, r_head, biases, seg_mat,
                           query_mask, training, sub_seed(seed, 2),
                           positions=positions, qlen=qlen)
      vec_g *= is_target[:, None, :, None]
    else:
      vec_g = self._attend(q_head_g, k_head, v_head, r_head, biases, seg_mat,
                           query_mask, training, sub_seed(seed, 2))
    out = self._post_attention(both, tf.concat([vec_h, vec_g], axis=2),
                               training, sub_seed(seed, 1))
    h_out, g_out = tf.split(out, [h_len, -1], axis=1)
    return h_out, g_out
