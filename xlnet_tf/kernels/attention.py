"""The fast path of relative attention (`RunOptions.fast_kernels=True`).

Same equations as `layers/relative_attention.py` (the reference path), laid
out for speed:
- heads lead (`[B, N, T, H]`), so every product is a batched matmul on
  contiguous blocks, and the projections are 2-D matmuls;
- `add_head_bias`: the per-head bias add with a cheaper gradient;
- the two streams share q, o and the LayerNorm, so their rows go through
  them as one batch (larger matmuls, one LayerNorm);
- the query stream, and the content stream where `output_positions` is
  given, are computed only at their P positions (`rows.py`);
- the segment term picks `ef[same]`/`ef[different]` instead of a one-hot
  product over a dimension of 2.
tests/test_kernels_attention.py checks values and gradients against the
reference path.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import tensorflow as tf

from xlnet_tf.kernels.rows import rows_of, shift_rows
from xlnet_tf.masks import attention_probs
from xlnet_tf.positions import rel_shift
from xlnet_tf.seeds import sub_seed


class AttentionParts(NamedTuple):
  """What the kernels use of a `RelativeAttention` layer: its projections
  `[D, N, H]`, the softmax scale, and its dropouts and LayerNorm as
  callables `(x, training=, seed=)` / `(x)`."""
  q: tf.Tensor
  k: tf.Tensor
  v: tf.Tensor
  r: tf.Tensor
  o: tf.Tensor
  scale: float
  attn_dropout: Callable
  output_dropout: Callable
  layer_norm: Callable


@tf.custom_gradient
def add_head_bias(q_head, bias):
  """`q [B, N, I, H] + bias [N, H]` (one bias per head, shared by batch and
  positions).

  Why: its gradient sums over I, then B; TensorFlow's own reduces both
  non-adjacent axes in one pass, which is slower on CPU.

  Example:
    >>> add_head_bias(tf.zeros([1, 2, 3, 1]), tf.constant([[1.], [2.]]))[
    ...     0, :, :, 0].numpy().tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
  """
  def grad(upstream):
    return upstream, tf.reduce_sum(tf.reduce_sum(upstream, axis=2), axis=0)
  return q_head + bias[:, None], grad


def project_heads(x, kernel):
  """`[B, T, D] -> [B, N, T, H]` (or `[T, D] -> [N, T, H]`) by `kernel [D, N,
  H]`: one 2-D matmul, then heads to the front.

  Example:
    >>> project_heads(tf.ones([2, 3, 4]), tf.ones([4, 5, 6])).shape
    TensorShape([2, 5, 3, 6])
  """
  d_model, n, h = kernel.shape
  flat = tf.matmul(tf.reshape(x, [-1, d_model]),
                   tf.reshape(kernel, [d_model, n * h]))
  if len(x.shape) == 2:
    return tf.transpose(tf.reshape(flat, [-1, n, h]), [1, 0, 2])
  shape = tf.shape(x)
  return tf.transpose(tf.reshape(flat, [shape[0], shape[1], n, h]),
                      [0, 2, 1, 3])


def segment_score(q_head, seg_mat, r_s_bias, seg_embed):
  """`ef[b, n, i, j] = (q_i + r_s_bias) . seg_embed[s_ij]` with heads leading:
  `q [B, N, I, H]`, `seg_mat [B, I, J, 2]` -> `[B, N, I, J]`. Picks
  `ef[same]` or `ef[different]` per (i, j) instead of the reference's one-hot
  product over a dimension of 2."""
  ef = tf.einsum("bnid,snd->bnis", add_head_bias(q_head, r_s_bias),
                 seg_embed)
  different = (seg_mat[..., 1] > 0)[:, None]
  return tf.where(different, ef[..., 1:], ef[..., :1])


def attend(parts: AttentionParts, q_head, k_head, v_head, r_head, biases,
           seg_mat, mask, training, seed=None, output_positions=None,
           qlen=None):
  """The attention core: `q [B, N, I, H]`, `k, v [B, N, K, H]`, `r [B, N, R,
  H]` or `[N, R, H]` -> attention vector `[B, N, I, H]`.

  Query rows are the `qlen` positions of the segment, or with
  `output_positions [B, I]` (int32) just those positions: their position
  scores are then gathered from the relative rows directly (`shift_rows`),
  rather than computed for every position and thrown away.
  """
  r_w_bias, r_r_bias, r_s_bias, seg_embed = biases
  klen = tf.shape(k_head)[2]

  ac = tf.matmul(add_head_bias(q_head, r_w_bias), k_head, transpose_b=True)
  bd = tf.matmul(add_head_bias(q_head, r_r_bias), r_head, transpose_b=True)
  if output_positions is None:
    bd = rel_shift(bd, klen)
  else:
    bd = shift_rows(bd, qlen - output_positions, klen)
    seg_mat, mask = rows_of(output_positions, qlen, klen, seg_mat, mask)
  score = ac + bd
  if seg_mat is not None:
    score += segment_score(q_head, seg_mat, r_s_bias, seg_embed)
  prob = attention_probs(score, parts.scale, mask, parts.attn_dropout,
                         q_head.dtype, training, seed)
  return tf.matmul(prob, v_head)


def post_attention(parts: AttentionParts, residual, attn_vec, training,
                   seed=None):
  """`residual [B, I, D]`, `attn_vec [B, N, I, H]` -> `LN(residual +
  drop(o(attn_vec)))`, `[B, I, D]`."""
  d_model = parts.o.shape[0]
  shape = tf.shape(residual)
  vec = tf.reshape(tf.transpose(attn_vec, [0, 2, 1, 3]),
                   [-1, parts.o.shape[1] * parts.o.shape[2]])
  out = tf.matmul(vec, tf.reshape(parts.o, [d_model, -1]), transpose_b=True)
  out = parts.output_dropout(tf.reshape(out, shape), training=training,
                             seed=seed)
  return parts.layer_norm(out + residual)


def relative_attention(parts: AttentionParts, h, pos_enc, biases, g=None,
                       mems=None, seg_mat=None, content_mask=None,
                       query_mask=None, target_mapping=None,
                       output_positions=None, training=False, seed=None):
  """`RelativeAttention.call` on the fast path: the same arguments (already
  in the compute dtype), the same `(h_out, g_out)`."""
  dtype = h.dtype
  cat = h if mems is None else tf.concat([mems, h], axis=1)
  k_head = project_heads(cat, parts.k)
  v_head = project_heads(cat, parts.v)
  r_head = project_heads(pos_enc, parts.r)
  qlen = tf.shape(h)[1]

  if output_positions is not None:
    h = tf.gather(h, output_positions, batch_dims=1)
  if g is None:
    vec_h = attend(parts, project_heads(h, parts.q), k_head, v_head, r_head,
                   biases, seg_mat, content_mask, training,
                   sub_seed(seed, 0), output_positions=output_positions,
                   qlen=qlen)
    return post_attention(parts, h, vec_h, training, sub_seed(seed, 1)), None

  h_len = tf.shape(h)[1]
  both = tf.concat([h, g], axis=1)
  q_head_h, q_head_g = tf.split(project_heads(both, parts.q), [h_len, -1],
                                axis=2)
  vec_h = attend(parts, q_head_h, k_head, v_head, r_head, biases, seg_mat,
                 content_mask, training, sub_seed(seed, 0),
                 output_positions=output_positions, qlen=qlen)
  if target_mapping is not None:
    # An all-zero (padding) row of target_mapping gives a zero attention
    # vector, as in the original.
    target_positions = tf.argmax(target_mapping, axis=-1,
                                 output_type=tf.int32)
    is_target = tf.reduce_sum(tf.cast(target_mapping, dtype), axis=-1)
    vec_g = attend(parts, q_head_g, k_head, v_head, r_head, biases, seg_mat,
                   query_mask, training, sub_seed(seed, 2),
                   output_positions=target_positions, qlen=qlen)
    vec_g *= is_target[:, None, :, None]
  else:
    vec_g = attend(parts, q_head_g, k_head, v_head, r_head, biases, seg_mat,
                   query_mask, training, sub_seed(seed, 2))
  out = post_attention(parts, both, tf.concat([vec_h, vec_g], axis=2),
                       training, sub_seed(seed, 1))
  h_out, g_out = tf.split(out, [h_len, -1], axis=1)
  return h_out, g_out
