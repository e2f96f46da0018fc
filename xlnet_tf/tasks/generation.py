"""Cached left-to-right generation from a prompt with a pretrained
`XLNetPretrainer`: the decoding cache, token choice (greedy, or sampling
with temperature / top-k / top-p from a stateless seed) and `decode`, the
in-graph loop (a `tf.while_loop` of fixed shapes, fit for a tf.function or
a SavedModel signature). Beam search is in `generation_search`.

The factorization: the prompt is context (its tokens see each other, never
a generated one); generated token k is the k-th target, seeing the prompt
and the tokens generated before it. Nothing computed ever changes, so each
layer's content states are Transformer-XL memory of fixed capacity
`M = n + T` (prompt length n, T new tokens), right-aligned (relative
distances are then those of the full sequence) with a mask hiding empty
slots and prompt padding. Relative attention projects memory to keys and
values without positions, so the cache keeps those projections (not the
states): a step projects only the new token. A step is the segment
`[last token, slot]` against the cache: the content stream of the last
token (whose key and value then enter the cache) and the query stream at
the slot, which predicts the next token. The uncached equivalent is one
`two_stream_pass` over `prompt + generated` with target order -1 (prompt),
k (generated k); the tests hold the two equal.

Shapes: `prompt_ids [B, n]` int32 LEFT-padded, `prompt_mask [B, n]` float
(1 = padding); cache: per layer keys and values `[B, N, M, H]` (heads N of
size H) and the mask `[B, M]` (1 = hidden);
`decode` returns `tokens [B, T]` int32, `log_probs [B, T]` float32 (the
model's own log p of each token, before temperature or filtering) and
`lengths [B]` int32.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import tensorflow as tf

from data_utils.tokenization import MASK_ID, PAD_ID
from xlnet_tf.kernels.attention import (AttentionParts, post_attention,
                                        project_heads)
from xlnet_tf.masks import masked_softmax, memory_mask
from xlnet_tf.positions import relative_distances, sinusoid_encoding
from xlnet_tf.tasks.language_model import two_stream_pass
from xlnet_tf.tasks.pretraining import XLNetPretrainer

# The id fed at the position being predicted; nobody ever sees it.
SLOT_ID = MASK_ID

# Per layer `[B, N, M, H]` keys and values, and the `[B, M]` mask.
Cache = Tuple[List[tf.Tensor], List[tf.Tensor], tf.Tensor]


def prompt_length(prompt_ids) -> int:
  """The static prompt length n (the cache capacity depends on it)."""
  n = prompt_ids.shape[1]
  if n is None:
    raise ValueError("prompt_ids: the length must be static (pad prompts to "
                     "a fixed length)")
  if n < 1:
    raise ValueError("prompt_ids: at least one prompt position is needed")
  return int(n)


def _check_lm(lm: XLNetPretrainer, max_new_tokens: int) -> None:
  if max_new_tokens < 1:
    raise ValueError(f"max_new_tokens={max_new_tokens}: must be at least 1")
  options = lm.encoder.options
  if options.same_length or options.bi_data:
    raise ValueError("same_length / bi_data attention: what a query sees "
                     "would depend on the memory length or the batch half, "
                     "so a cache cannot reproduce it")


def _attention_parts(attn) -> AttentionParts:
  return AttentionParts(attn.q_kernel, attn.k_kernel, attn.v_kernel,
                        attn.r_kernel, attn.o_kernel, attn.scale,
                        attn.attn_dropout, attn.output_dropout,
                        attn.layer_norm)


def _layer_bias(encoder, bias, i: int):
  return tf.cast(bias[i] if encoder.config.untie_r else bias,
                 encoder.compute_dtype)


def prefill(lm: XLNetPretrainer, prompt_ids, prompt_mask,
            max_new_tokens: int) -> Tuple[tf.Tensor, Cache]:
  """One pass over `prompt + [slot]`: the logits `[B, V]` of the first new
  token and the cache: each layer's keys and values of the prompt's content
  states (the memory, projected), right-aligned in capacity
  `M = n + max_new_tokens`, and their mask."""
  _check_lm(lm, max_new_tokens)
  n = prompt_length(prompt_ids)
  capacity = n + max_new_tokens
  prompt_ids = tf.cast(prompt_ids, tf.int32)
  batch = tf.shape(prompt_ids)[0]
  ids = tf.concat([prompt_ids, tf.fill([batch, 1], SLOT_ID)], axis=1)
  mask = tf.concat([tf.cast(prompt_mask, tf.float32),
                    tf.zeros([batch, 1], tf.float32)], axis=1)
  order = tf.concat([tf.fill([batch, n], -1), tf.zeros([batch, 1], tf.int32)],
                    axis=1)
  out = two_stream_pass(lm, ids, order, input_mask=mask, mem_len=capacity,
                        reuse_len=n)
  # The memory of a first call holds only the n prompt states: left-pad.
  empty = [[0, 0], [0, 0], [capacity - n, 0], [0, 0]]
  keys, values = [], []
  for block, memory in zip(lm.encoder.blocks, out["new_mems"]):
    keys.append(tf.pad(project_heads(memory, block.rel_attn.k_kernel), empty))
    values.append(tf.pad(project_heads(memory, block.rel_attn.v_kernel),
                         empty))
  mems_mask = memory_mask(None, mask, capacity, reuse_len=n)
  return out["logits"][:, 0], (keys, values, mems_mask)


class StepConstants(NamedTuple):
  """What every step of one decode shares: per layer the projected
  encoding `[N, M + 2, H]` of the distances M + 1 .. 0 (a step's keys are
  the M slots and the last token at M; the slot predicted sits at M + 1),
  and the LM softmax weight laid out `[D, V]` (a `[V, D]` table used
  transposed makes each step's product several times slower on CPU)."""
  positions: List[tf.Tensor]
  softmax_w: tf.Tensor


def step_constants(lm: XLNetPretrainer, capacity: int) -> StepConstants:
  """The `StepConstants` of a cache of capacity M, computed once."""
  encoder = lm.encoder
  options = encoder.options
  # Rows 1 .. M + 2 of a [last token, slot] segment's encoding.
  distances = relative_distances(2, capacity + 2, options.attn_type,
                                 options.clamp_len)[1:capacity + 3]
  encoding = tf.cast(sinusoid_encoding(distances, encoder.config.d_model),
                     encoder.compute_dtype)
  head = lm.lm_head
  table = encoder.embedding_table if head.tie_weight else head.weight
  return StepConstants(
      [project_heads(encoding, block.rel_attn.r_kernel)
       for block in encoder.blocks],
      tf.transpose(tf.cast(table, encoder.compute_dtype)))


def step(lm: XLNetPretrainer, last_ids, cache: Cache,
         constants: Optional[StepConstants] = None
         ) -> Tuple[tf.Tensor, Cache]:
  """Feeds `last_ids [B]` (the newest token) and predicts the next:
  `(logits [B, V], cache with last_ids' keys and values appended)`.

  Per layer: the content stream of the last token and the query stream of
  the slot after it attend to the cache and the last token (the slot's own
  content is seen by nobody, so it is not computed); the last token's key
  and value enter the cache, the oldest (empty) slot leaves. `constants`:
  `step_constants(lm, M)`, computed once per decode.
  """
  keys, values, mems_mask = cache
  encoder = lm.encoder
  dtype = encoder.compute_dtype
  batch = tf.shape(mems_mask)[0]
  if constants is None:
    constants = step_constants(lm, mems_mask.shape[1])
  positions = constants.positions
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
        tf.einsum("bnih,njh->bnij", q_r[:, :, :1], positions[i][:, 1:]),
        tf.einsum("bnih,njh->bnij", q_r[:, :, 1:], positions[i][:, :-1])],
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
  return logits + tf.cast(lm.lm_head.bias, tf.float32), (new_keys, new_values,
                                                         new_mask)


def restrict_vocab(logits, vocab_size: Optional[int] = None) -> tf.Tensor:
  """`logits [B, ..., V]` with ids >= `vocab_size` set to -inf (a tokenizer
  smaller than the model's vocabulary has no piece for them).

  Example:
    >>> restrict_vocab(tf.constant([[1.0, 2.0, 3.0]]), 2).numpy().tolist()
    [[1.0, 2.0, -inf]]
  """
  logits = tf.convert_to_tensor(logits, tf.float32)
  if vocab_size is None or vocab_size >= logits.shape[-1]:
    return logits
  keep = tf.range(tf.shape(logits)[-1]) < vocab_size
  return tf.where(keep, logits, float("-inf"))


def top_k_filter(logits, top_k) -> tf.Tensor:
  """Keeps the `top_k` largest logits of each row `[B, V]` (ties with the
  k-th kept too), -inf elsewhere; 0 keeps all. `top_k` may be a tensor.

  Example:
    >>> top_k_filter(tf.constant([[1.0, 3.0, 2.0]]), 2).numpy().tolist()
    [[-inf, 3.0, 2.0]]
  """
  if isinstance(top_k, int) and top_k <= 0:
    return logits
  k = tf.minimum(tf.cast(top_k, tf.int32), tf.shape(logits)[-1])

  def keep_top():
    kth = tf.math.top_k(logits, tf.maximum(k, 1)).values[:, -1:]
    return tf.where(logits < kth, float("-inf"), logits)
  return tf.cond(k > 0, keep_top, lambda: logits)


def top_p_filter(logits, top_p) -> tf.Tensor:
  """Nucleus filtering of `[B, V]`: keeps the most probable tokens until
  their probability reaches `top_p` (the token that crosses it included,
  so at least one), -inf elsewhere; 1.0 keeps all. May be a tensor.

  Example:
    >>> logits = tf.math.log([[0.5, 0.2, 0.3]])
    >>> top_p_filter(logits, 0.7).numpy().tolist()[0][1]
    -inf
  """
  if isinstance(top_p, (int, float)) and top_p >= 1.0:
    return logits
  top_p = tf.cast(top_p, tf.float32)

  def nucleus():
    ranked = tf.sort(logits, axis=-1, direction="DESCENDING")
    before = tf.math.cumsum(tf.nn.softmax(ranked, axis=-1), axis=-1,
                            exclusive=True)
    kept = tf.where(before < top_p, ranked, float("inf"))
    smallest = tf.reduce_min(kept, axis=-1, keepdims=True)
    return tf.where(logits < smallest, float("-inf"), logits)
  return tf.cond(top_p < 1.0, nucleus, lambda: logits)


def step_seed(seed, index) -> tf.Tensor:
  """The int32 `[2]` seed of draw `index` (a step) from a decode's seed."""
  return tf.random.experimental.stateless_fold_in(
      tf.cast(seed, tf.int32), tf.cast(index, tf.int32))


def choose_tokens(logits, *, greedy: bool = True, temperature=1.0, top_k=0,
                  top_p=1.0, seed=None) -> tf.Tensor:
  """`[B]` int32 from `logits [B, V]`: the argmax (`greedy`), else one draw
  from softmax(logits / temperature) after top-k then top-p filtering,
  stateless from `seed` (int32 `[2]`, required when sampling)."""
  if greedy:
    return tf.argmax(logits, axis=-1, output_type=tf.int32)
  scaled = logits / tf.cast(temperature, tf.float32)
  scaled = top_p_filter(top_k_filter(scaled, top_k), top_p)
  return tf.random.stateless_categorical(scaled, 1, seed=seed,
                                         dtype=tf.int32)[:, 0]


def is_stop(tokens, stop_ids) -> tf.Tensor:
  """`[...]` bool: which of `tokens` are in `stop_ids [S]` (S may be 0)."""
  stop_ids = tf.reshape(tf.cast(stop_ids, tf.int32), [-1])
  return tf.reduce_any(tf.equal(tokens[..., None], stop_ids), axis=-1)


def stop_tensor(stop_ids) -> tf.Tensor:
  """`[S]` int32 from a list of ids, a tensor or None (no stop)."""
  if stop_ids is None:
    return tf.zeros([0], tf.int32)
  return tf.reshape(tf.cast(stop_ids, tf.int32), [-1])


def decode(lm: XLNetPretrainer, prompt_ids, prompt_mask, max_new_tokens: int,
           *, greedy: bool = True, temperature=1.0, top_k=0, top_p=1.0,
           seed=None, stop_ids=None, vocab_size: Optional[int] = None
           ) -> dict:
  """Generates up to `max_new_tokens` after each LEFT-padded prompt.

  Args:
    prompt_ids: `[B, n]` int32 (n static), prompt_mask: `[B, n]` float, 1 =
      padding.
    greedy: argmax (True) or sampling with `temperature`, `top_k` (0 =
      off), `top_p` (1.0 = off) — scalars or tensors.
    seed: int32 `[2]` for stateless sampling (draw t uses
      `step_seed(seed, t)`); None draws one.
    stop_ids: ids that end a row (kept as its last token).
    vocab_size: ids >= it are never chosen (a smaller tokenizer).
  Returns:
    `{"tokens": [B, T] int32 (PAD_ID after a stop), "log_probs": [B, T]
    float32 (0 after a stop), "lengths": [B] int32 (stop token included)}`.
    The loop ends early once every row has stopped.
  """
  total = int(max_new_tokens)
  logits, cache = prefill(lm, prompt_ids, prompt_mask, total)
  batch = tf.shape(logits)[0]
  stops = stop_tensor(stop_ids)
  if not greedy and seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  constants = step_constants(lm, prompt_length(prompt_ids) + total)

  def record(t, logits, tokens, log_probs, lengths, done):
    logits = restrict_vocab(logits, vocab_size)
    chosen = choose_tokens(
        logits, greedy=greedy, temperature=temperature, top_k=top_k,
        top_p=top_p, seed=None if greedy else step_seed(seed, t))
    log_p = tf.gather(tf.nn.log_softmax(logits, axis=-1), chosen,
                      batch_dims=1)
    live = tf.logical_not(done)
    here = tf.equal(tf.range(total), t)[None, :]
    tokens = tf.where(here, tf.where(live, chosen, PAD_ID)[:, None], tokens)
    log_probs = tf.where(here, tf.where(live, log_p, 0.0)[:, None],
                         log_probs)
    lengths += tf.cast(live, tf.int32)
    done = tf.logical_or(done, tf.logical_and(live, is_stop(chosen, stops)))
    return chosen, tokens, log_probs, lengths, done

  state = record(0, logits, tf.fill([batch, total], PAD_ID),
                 tf.zeros([batch, total], tf.float32),
                 tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool))

  def keep_going(t, last, cache, tokens, log_probs, lengths, done):
    del last, cache, tokens, log_probs, lengths
    return tf.logical_and(t < total,
                          tf.logical_not(tf.reduce_all(done)))

  def one_step(t, last, cache, tokens, log_probs, lengths, done):
    logits, cache = step(lm, last, cache, constants)
    last, tokens, log_probs, lengths, done = record(
        t, logits, tokens, log_probs, lengths, done)
    return t + 1, last, cache, tokens, log_probs, lengths, done

  last, tokens, log_probs, lengths, done = state
  out = tf.while_loop(
      keep_going, one_step,
      (tf.constant(1), last, cache, tokens, log_probs, lengths, done),
      maximum_iterations=max(total - 1, 0))
  return {"tokens": out[3], "log_probs": out[4], "lengths": out[5]}
