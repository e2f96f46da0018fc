"""Relative multi-head attention with XLNet's two streams sharing its weights:
the reference path, one function per equation (the original's
`rel_attn_core`, `post_attention` and `two_stream_rel_attn`). The fast path,
`kernels.relative_attention`, computes the same values
(`RunOptions.fast_kernels`).

Shapes (batch-major): B batch, I queries, J = K = M + L keys (M memory, L
current), R rows of the positional encoding, N heads, H head size, D model
size. Heads are `[B, T, N, H]`, scores `[B, N, I, J]` (query i, key j).

    score = (ac + bd + ef) / sqrt(H) - 1e30 * mask
    ac = (q_i + r_w_bias) . k_j                    content_score
    bd = rel_shift((q_i + r_r_bias) . r)_ij        position_score
    ef = (q_i + r_s_bias) . seg_embed[s_ij]        segment_score
    attn_vec_i = sum_j softmax_j(score)_ij v_j      attention_vector
    out = LayerNorm(x + dropout(o(attn_vec)))      post_attention
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.kernels import AttentionParts, relative_attention
from xlnet_tf.layers.multi_head import MultiHeadBase
from xlnet_tf.masks import attention_probs
from xlnet_tf.positions import rel_shift
from xlnet_tf.seeds import sub_seed


def project(x, kernel):
  """`x [B, T, D]` (or `[T, D]`) by `kernel [D, N, H]` -> `[B, T, N, H]` (or
  `[T, N, H]`)."""
  return tf.einsum("...d,dnh->...nh", x, kernel)


def content_score(q_head, k_head, r_w_bias):
  """`ac[b, n, i, j] = (q_i + r_w_bias) . k_j`: `q [B, I, N, H]`, `k [B, J, N,
  H]`, `r_w_bias [N, H]` -> `[B, N, I, J]`."""
  return tf.einsum("bind,bjnd->bnij", q_head + r_w_bias, k_head)


def position_score(q_head, r_head, r_r_bias, klen):
  """`bd[b, n, i, j] = (q_i + r_r_bias) . r_d`, `r_d` the encoding row of
  distance `d = mlen + i - j`:
  `r [R, N, H]` (or `[B, R, N, H]` with `bi_data`) -> `[B, N, I, klen]`,
  scored against every row then aligned to the keys by `rel_shift`."""
  equation = "bind,rnd->bnir" if len(r_head.shape) == 3 else "bind,brnd->bnir"
  return rel_shift(tf.einsum(equation, q_head + r_r_bias, r_head), klen)


def segment_score(q_head, seg_mat, r_s_bias, seg_embed):
  """`ef[b, n, i, j] = (q_i + r_s_bias) . seg_embed[s_ij]`, `s_ij` = 1 where
  query i and key j are in different segments: `seg_mat [B, I, J, 2]`
  one-hot of `s_ij`, `seg_embed [2, N, H]` -> `[B, N, I, J]`. The segment
  term of attention: a change here goes to the fast path's twin too,
  `kernels/attention.py: segment_score`.

  Example (one query, keys in the same and in a different segment):
    >>> seg_mat = tf.constant([[[[1., 0.], [0., 1.]]]])
    >>> segment_score(tf.zeros([1, 1, 1, 1]), seg_mat, tf.constant([[1.]]),
    ...               tf.constant([[[2.]], [[3.]]])).numpy().tolist()
    [[[[2.0, 3.0]]]]
  """
  ef = tf.einsum("bind,snd->bnis", q_head + r_s_bias, seg_embed)
  return tf.einsum("bijs,bnis->bnij", tf.cast(seg_mat, ef.dtype), ef)


def attention_vector(prob, v_head):
  """`sum_j prob[b, n, i, j] v_j`: `[B, N, I, J]`, `[B, J, N, H]` -> `[B, I,
  N, H]`."""
  return tf.einsum("bnij,bjnd->bind", prob, v_head)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class RelativeAttention(MultiHeadBase):
  """One attention sub-layer (scope `rel_attn`): projections q, k, v, r, o of
  shape `[D, N, H]`, then residual and LayerNorm.

  Called with the content stream `h [B, L, D]` and optionally the query stream
  `g` (`[B, P, D]` with `target_mapping [B, P, L]`, else `[B, L, D]`); both
  streams use the same weights and the same keys/values (memory + content).
  Returns `(h_out, g_out)`, `g_out` None for one stream.
  """

  KERNELS = ("q", "k", "v", "r", "o")

  @unconverted
  def call(self, h, pos_enc, biases, g=None, mems=None, seg_mat=None,
           content_mask=None, query_mask=None, target_mapping=None,
           output_positions=None, training=False, seed=None):
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
      output_positions: `[B, P]` int32: `h_out` is the content stream at
        those positions only, `[B, P, D]`; None for all L.
      seed: int32 `[2]` for replayable dropout masks, or None.
    """
    dtype = self.compute_dtype
    h = tf.cast(h, dtype)
    g = None if g is None else tf.cast(g, dtype)
    mems = None if mems is None else tf.cast(mems, dtype)
    pos_enc = tf.cast(pos_enc, dtype)
    biases = tuple(None if b is None else tf.cast(b, dtype) for b in biases)
    args = (h, pos_enc, biases, g, mems, seg_mat, content_mask, query_mask,
            target_mapping, output_positions, training, seed)
    if self.fast_kernels:
      parts = AttentionParts(self.q_kernel, self.k_kernel, self.v_kernel,
                             self.r_kernel, self.o_kernel, self.scale,
                             self.attn_dropout, self.output_dropout,
                             self.layer_norm)
      return relative_attention(parts, *args)
    return self.two_stream(*args)

  def rel_attn_core(self, q_head, k_head, v_head, r_head, biases, seg_mat,
                    mask, training=False, seed=None):
    """The attention of queries `q [B, I, N, H]` over keys and values `[B, J,
    N, H]` -> attention vector `[B, I, N, H]`.

    `biases`: `(r_w_bias, r_r_bias, r_s_bias, seg_embed)`; `seg_mat [B, I, J,
    2]` or None (no segment term); `mask` broadcastable to `[B, I, J]`, 1 =
    may not attend, or None.
    """
    r_w_bias, r_r_bias, r_s_bias, seg_embed = biases
    klen = tf.shape(k_head)[1]
    score = (content_score(q_head, k_head, r_w_bias)
             + position_score(q_head, r_head, r_r_bias, klen))
    if seg_mat is not None:
      score += segment_score(q_head, seg_mat, r_s_bias, seg_embed)
    prob = attention_probs(score, self.scale, mask, self.attn_dropout,
                           q_head.dtype, training, seed)
    return attention_vector(prob, v_head)

  def post_attention(self, x, attn_vec, training=False, seed=None):
    """`LayerNorm(x + dropout(o(attn_vec)))`: `x [B, I, D]`, `attn_vec [B, I,
    N, H]` -> `[B, I, D]`."""
    out = tf.einsum("bind,hnd->bih", attn_vec, self.o_kernel)
    out = self.output_dropout(out, training=training, seed=seed)
    return self.layer_norm(x + out)

  def two_stream(self, h, pos_enc, biases, g, mems, seg_mat, content_mask,
                 query_mask, target_mapping, output_positions, training,
                 seed):
    """The reference path: the content stream h attends with content_mask
    (it sees itself), the query stream g with query_mask, both to the same
    keys and values, with every weight shared."""
    cat = h if mems is None else tf.concat([mems, h], axis=1)
    k_head = project(cat, self.k_kernel)
    v_head = project(cat, self.v_kernel)
    r_head = project(pos_enc, self.r_kernel)

    q_head_h = project(h, self.q_kernel)
    vec_h = self.rel_attn_core(q_head_h, k_head, v_head, r_head, biases,
                               seg_mat, content_mask, training,
                               sub_seed(seed, 0))
    h_out = self.post_attention(h, vec_h, training, sub_seed(seed, 1))
    if output_positions is not None:
      h_out = tf.gather(h_out, output_positions, batch_dims=1)
    if g is None:
      return h_out, None

    q_head_g = project(g, self.q_kernel)
    if target_mapping is not None:
      # The P predictions' queries placed at their positions, [B, L, N, H].
      mapping = tf.cast(target_mapping, g.dtype)
      q_head_g = tf.einsum("bpnd,bpl->blnd", q_head_g, mapping)
    vec_g = self.rel_attn_core(q_head_g, k_head, v_head, r_head, biases,
                               seg_mat, query_mask, training,
                               sub_seed(seed, 2))
    if target_mapping is not None:
      vec_g = tf.einsum("blnd,bpl->bpnd", vec_g, mapping)
    g_out = self.post_attention(g, vec_g, training, sub_seed(seed, 3))
    return h_out, g_out
