"""Cached decoding: one generation step of the two streams against a cache
of projected keys and values (the speed trick behind `tasks/generation`).

Relative attention projects memory to keys and values without positions, so
a decoding cache can keep those projections instead of the content states:
a step then projects only the newest token. A step is the segment
`[last token, slot]` against the cache: the content stream of the last token
and the query stream at the slot (which predicts the next token). The
slot's own content is seen by nobody and not computed. What it computes is
what the encoder computes for that segment with the cached states as memory
(`two_stream_pass`); tests/test_lm_generation.py holds them equal.

Shapes: cache per layer keys and values `[B, N, M, H]` (heads N of size H,
capacity M, right-aligned) and the mask `[B, M]` (1 = hidden); `last_ids
[B]`; logits `[B, V]` float32. No segment ids (one segment everywhere adds
the same score to every key).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import tensorflow as tf

from xlnet_tf.kernels.attention import (AttentionParts, post_attention,
                                        project_heads)
from xlnet_tf.masks import masked_softmax
from xlnet_tf.positions import relative_distances, sinusoid_encoding

# Per layer `[B, N, M, H]` keys and values, and the `[B, M]` mask.
Cache = Tuple[List[tf.Tensor], List[tf.Tensor], tf.Tensor]


def _attention_parts(attn) -> AttentionParts:
  return AttentionParts(attn.q_kernel, attn.k_kernel, attn.v_kernel,
                        attn.r_kernel, attn.o_kernel, attn.scale,
                        attn.attn_dropout, attn.output_dropout,
                        attn.layer_norm)


def _layer_bias(encoder, bias, i: int):
  return tf.cast(bias[i] if encoder.config.untie_r else bias,
                 encoder.compute_dtype)


def project_memory(encoder, mems, capacity: int) -> Tuple[list, list]:
  """Per layer the keys and values `[B, N, capacity, H]` of memory states
  `[B, m, D]` (`m <= capacity`), left-padded to `capacity`."""
  keys, values = [], []
  for block, memory in zip(encoder.blocks, mems):
    empty = [[0, 0], [0, 0], [capacity - memory.shape[1], 0], [0, 0]]
    keys.append(tf.pad(project_heads(memory, block.rel_attn.k_kernel), empty))
    values.append(tf.pad(project_heads(memory, block.rel_attn.v_kernel),
                         empty))
  return keys, values


class StepConstants(NamedTuple):
  """What every step of one decode shares: `r_heads`, per layer the
  projected encoding `r_head [N, M + 2, H]` of the distances M + 1 .. 0 (a
  step's keys are the M slots and the last token at M; the slot predicted
  sits at M + 1), and the LM softmax weight laid out `[D, V]` (a `[V, D]`
  table used transposed makes each step's product several times slower on
  CPU)."""
  r_heads: List[tf.Tensor]
  softmax_w: tf.Tensor


def step_constants(encoder, lm_head, capacity: int) -> StepConstants:
  """The `StepConstants` of a cache of capacity M for an `XLNetModel` and
  its `LMHead`, computed once."""
  options = encoder.options
  # Rows 1 .. M + 2 of a [last token, slot] segment's encoding.
  distances = relative_distances(2, capacity + 2, options.attn_type,
                                 options.clamp_len)[1:capacity + 3]
  encoding = tf.cast(sinusoid_encoding(distances, encoder.config.d_model),
                     encoder.compute_dtype)
  head = lm_head
  table = encoder.embedding_table if head.tie_weight else head.weight
  return StepConstants(
      [project_heads(encoding, block.rel_attn.r_kernel)
       for block in encoder.blocks],
      tf.transpose(tf.cast(table, encoder.compute_dtype)))


def cached_step(encoder, lm_head, last_ids, cache: Cache,
                constants: Optional[StepConstants] = None
                ) -> Tuple[tf.Tensor, Cache]:
  """Feeds `last_ids [B]` (the newest token) and predicts the next:
  `(logits [B, V], cache with last_ids' keys and values appended)`.

  Per layer: the content stream of the last token and the query stream of
  the slot after it attend to the cache and the last token (the slot's own
  content is seen by nobody, so it is not computed); the last token's key
  and value enter the cache, the oldest (empty) slot leaves. `constants`:
  `step_constants(encoder, lm_head, M)`, computed once per decode.
  """
  keys, values, mems_mask = cache
  dtype = encoder.compute_dtype
  batch = tf.shape(mems_mask)[0]
  if constants is None:
    constants = step_constants(encoder, lm_head, mems_mask.shape[1])
  r_heads = constants.r_heads
  h = tf.cast(tf.gather(encoder.word_embedding,
                        tf.cast(last_ids, tf.int32)), dtype)[:, None]
  g = tf.tile(tf.cast(encoder.mask_emb, dtype), [batch, 1, 1])
  # Both queries see the unmasked memory and the last token.
  hidden = tf.concat([mems_mask, tf.zeros([batch, 1], tf.float32)],
                     axis=1)[:, None, None, :]
  new_keys, new_values = [], []
  for i, block in enumerate(encoder.blocks):
    attn = block.rel_attn
    both = tf.concat([h, g], axis=1)
    key = project_heads(h, attn.k_kernel)
    value = project_heads(h, attn.v_kernel)
    q_head = project_heads(both, attn.q_kernel)
    ac = tf.matmul(q_head + _layer_bias(encoder, encoder.r_w_bias, i)[:, None],
                   tf.concat([keys[i], key], axis=2), transpose_b=True)
    # Content query at M: distances M .. 0; query stream at M + 1: M + 1 .. 1.
    q_r = q_head + _layer_bias(encoder, encoder.r_r_bias, i)[:, None]
    bd = tf.concat([
        tf.einsum("bnih,njh->bnij", q_r[:, :, :1], r_heads[i][:, 1:]),
        tf.einsum("bnih,njh->bnij", q_r[:, :, 1:], r_heads[i][:, :-1])],
                   axis=2)
    prob = tf.cast(masked_softmax(ac + bd, attn.scale, hidden), dtype)
    vec = tf.matmul(prob, tf.concat([values[i], value], axis=2))
    out = post_attention(_attention_parts(attn), both, vec, training=False)
    h, g = tf.split(block.ff(out, training=False), 2, axis=1)
    new_keys.append(tf.concat([keys[i][:, :, 1:], key], axis=2))
    new_values.append(tf.concat([values[i][:, :, 1:], value], axis=2))
  new_mask = tf.concat([mems_mask[:, 1:], tf.zeros([batch, 1], tf.float32)],
                       axis=1)
  # The LM head (`lm_logits`) with the weight laid out for a fast product.
  logits = tf.cast(tf.matmul(g[:, 0], constants.softmax_w), tf.float32)
  return logits + tf.cast(lm_head.bias, tf.float32), (new_keys, new_values,
                                                      new_mask)
