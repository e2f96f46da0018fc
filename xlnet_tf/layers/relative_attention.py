"""Relative multi-head attention with XLNet's two streams sharing its weights.

Shapes (batch-major): B batch, L current length, M memory length, K = M + L
keys, R rows of the positional encoding, P predictions, N heads, H head size,
D model size. Scores are laid out `[B, N, I, J]` (query i, key j).

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
from xlnet_tf.positions import rel_shift


class RelativeAttention(MultiHeadBase):
  """One attention sub-layer (scope `rel_attn`): projections q, k, v, r, o of
  shape `[D, N, H]`, then residual and LayerNorm.

  Called with the content stream `h [B, L, D]` and optionally the query stream
  `g` (`[B, P, D]` with `target_mapping [B, P, L]`, else `[B, L, D]`); both
  streams use the same weights and the same keys/values (memory + content).
  Returns `(h_out, g_out)`, `g_out` None for one stream.
  """

  KERNELS = ("q", "k", "v", "r", "o")

  def _project(self, x, kernel):
    """`[B, T, D] -> [B, T, N, H]` (or `[T, D] -> [T, N, H]`)."""
    if len(x.shape) == 2:
      return tf.einsum("td,dnh->tnh", x, kernel)
    return tf.einsum("btd,dnh->btnh", x, kernel)

  def _attend(self, q_head, k_head, v_head, r_head, biases, seg_mat, mask,
              training, seed=None, positions=None, qlen=None):
    """The attention core: `q [B, I, N, H]` -> attention vector `[B, I, N, H]`.

    Query rows are the `qlen` positions of the segment, or with `positions
    [B, I]` (int) just those positions (the query stream's targets): their
    position scores are then gathered from the relative rows directly,
    `rel_shift`'s `x[i, j + qlen - pos_i]`, rather than computed for every
    position and thrown away.
    """
    r_w_bias, r_r_bias, r_s_bias, seg_embed = biases
    klen = tf.shape(k_head)[1]

    ac = tf.einsum("bind,bjnd->bnij", q_head + r_w_bias, k_head)
    if len(r_head.shape) == 3:  # one encoding shared by the batch
      bd = tf.einsum("bind,jnd->bnij", q_head + r_r_bias, r_head)
    else:
      bd = tf.einsum("bind,bjnd->bnij", q_head + r_r_bias, r_head)
    if positions is None:
      bd = rel_shift(bd, klen)
    else:
      index = (qlen - positions)[:, None, :, None] + tf.range(klen)
      # 'uni' has klen + 1 rows: indices past them are future keys, masked
      # (rel_shift reads another row's values there), so any row will do.
      index = tf.minimum(index, tf.shape(bd)[-1] - 1)
      bd = tf.gather(bd, tf.broadcast_to(index, tf.shape(ac)), batch_dims=3)
      if seg_mat is not None:
        seg_mat = tf.gather(seg_mat, positions, batch_dims=1)
      if mask is not None:
        full = tf.broadcast_to(mask, [tf.shape(seg_mat if seg_mat is not None
                                               else q_head)[0], qlen, klen])
        mask = tf.gather(full, positions, batch_dims=1)
    score = ac + bd
    if seg_mat is not None:
      ef = tf.einsum("bind,snd->bnis", q_head + r_s_bias, seg_embed)
      # Picks ef[same] or ef[different] per (i, j): the one-hot product of
      # the original, without a matmul over a dimension of 2.
      different = (seg_mat[..., 1] > 0)[:, None]
      score += tf.where(different, ef[..., 1:], ef[..., :1])

    prob = masked_softmax(score, self.scale,
                          None if mask is None else mask[:, None])
    prob = self.attn_dropout(tf.cast(prob, q_head.dtype), training=training,
                             seed=seed)
    return tf.einsum("bnij,bjnd->bind", prob, v_head)

  def _post_attention(self, residual, attn_vec, training, seed=None):
    out = tf.einsum("bind,hnd->bih", attn_vec, self.o_kernel)
    out = self.output_dropout(out, training=training, seed=seed)
    return self.layer_norm(out + residual)

  def call(self, h, pos_enc, biases, g=None, mems=None, seg_mat=None,
           content_mask=None, query_mask=None, target_mapping=None,
           training=False, seed=None):
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
      seed: int32 `[2]` for replayable dropout masks, or None.
    """
    dtype = self.compute_dtype
    h = tf.cast(h, dtype)
    biases = tuple(None if b is None else tf.cast(b, dtype) for b in biases)
    cat = h if mems is None else tf.concat([tf.cast(mems, dtype), h], axis=1)
    k_head = self._project(cat, self.k_kernel)
    v_head = self._project(cat, self.v_kernel)
    r_head = self._project(tf.cast(pos_enc, dtype), self.r_kernel)

    q_head_h = self._project(h, self.q_kernel)
    vec_h = self._attend(q_head_h, k_head, v_head, r_head, biases, seg_mat,
                         content_mask, training, sub_seed(seed, 0))
    h_out = self._post_attention(h, vec_h, training, sub_seed(seed, 1))
    if g is None:
      return h_out, None

    g = tf.cast(g, dtype)
    q_head_g = self._project(g, self.q_kernel)
    if target_mapping is not None:
      # Only the P target rows are computed; an all-zero (padding) row of
      # target_mapping gives a zero attention vector, as in the original.
      positions = tf.argmax(target_mapping, axis=-1, output_type=tf.int32)
      is_target = tf.reduce_sum(tf.cast(target_mapping, dtype), axis=-1)
      vec_g = self._attend(q_head_g, k_head, v_head, r_head, biases, seg_mat,
                           query_mask, training, sub_seed(seed, 2),
                           positions=positions,
                           qlen=tf.shape(h)[1])
      vec_g *= is_target[:, :, None, None]
    else:
      vec_g = self._attend(q_head_g, k_head, v_head, r_head, biases, seg_mat,
                           query_mask, training, sub_seed(seed, 2))
    g_out = self._post_attention(g, vec_g, training, sub_seed(seed, 3))
    return h_out, g_out
