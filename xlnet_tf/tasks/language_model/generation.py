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
slots and prompt padding. The cache keeps each layer's keys and values of
those states, and a step (`kernels/decoding.py`) feeds `[last token, slot]`
against it: the content stream of the last token (whose key and value then
enter the cache) and the query stream at the slot, which predicts the next
token. The uncached equivalent is one
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

import math
from typing import NamedTuple, Optional, Tuple

import tensorflow as tf

from data_utils.errors import UsageError
from data_utils.tokenization import MASK_ID, PAD_ID
from xlnet_tf.kernels import decoding
from xlnet_tf.kernels.decoding import Cache, StepConstants
from xlnet_tf.masks import memory_mask
from xlnet_tf.tasks.language_model.passes import two_stream_pass
from xlnet_tf.tasks.language_model.model import XLNetPretrainer

# The id fed at the position being predicted; nobody ever sees it.
SLOT_ID = MASK_ID
# Relative distances are float32 (`positions.relative_distances`): whole
# numbers are exact only up to 2**24, past which a range of them comes out
# with the wrong length. A step's distances run over the cache (prompt +
# new tokens) and 2 more.
MAX_POSITIONS = 2 ** 24
STEP_POSITIONS = 2
FLOAT_BYTES = 4


class Limit(NamedTuple):
  """The most new tokens a decode can take, and why (a phrase)."""
  tokens: int
  reason: str


def new_token_limit(config, prompt_length: int, rows: int = 1,
                    memory_bytes: Optional[int] = None) -> Limit:
  """The most new tokens after prompts of `prompt_length` pieces, decoding
  `rows` rows at once (prompts x beams) with `config` (an XLNetConfig):
  the positions (`MAX_POSITIONS`) and, given `memory_bytes`, the memory:
  per position of the cache, each layer keeps keys and values
  `[rows, n_head * d_head]` (twice: a step writes the new cache beside the
  old) and the projected encoding `[n_head * d_head]`, plus the encoding
  `[d_model]` and the outputs `[rows]` x 2. (A lower bound: the weights and
  a step's own tensors come on top.)

  Example:
    >>> from xlnet_tf.config import XLNetConfig
    >>> config = XLNetConfig(2, 16, 2, 8, 32, n_token=100)
    >>> new_token_limit(config, 10).tokens  # 2**24 - 10 - 2
    16777204
    >>> new_token_limit(config, 10, rows=4, memory_bytes=2 ** 20).tokens
    451
  """
  width = config.n_head * config.d_head
  limit = Limit(MAX_POSITIONS - STEP_POSITIONS - prompt_length,
                f"relative positions are float32, whole numbers exact up to "
                f"2**24 = {MAX_POSITIONS}, and a step spans the longest "
                f"prompt ({_count(prompt_length, 'piece')}), the new tokens "
                f"and {STEP_POSITIONS} more")
  if memory_bytes is None:
    return limit
  per = FLOAT_BYTES * (config.n_layer * (2 * 2 * rows + 1) * width +
                       config.d_model + 2 * rows)
  positions = memory_bytes // per
  if positions - prompt_length >= limit.tokens:
    return limit
  return Limit(
      positions - prompt_length,
      f"the decoding cache takes {per} bytes a position (keys and values "
      f"of {_count(config.n_layer, 'layer')} x {_count(rows, 'row')} x "
      f"{width} floats, twice while a step writes the next, and the "
      f"positions), and {_size(memory_bytes)} of memory holds {positions} "
      f"positions: the longest prompt ({_count(prompt_length, 'piece')}) "
      "and the new tokens")


def _count(n: int, noun: str) -> str:
  return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _size(n: int) -> str:
  for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20)):
    if n >= scale:
      return f"{n / scale:.1f} {unit}"
  return f"{n} bytes"


def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
  """UsageError (named as the flags) for sampling settings that cannot
  work: temperature a finite number above 0, top_k 0 (off) or more, top_p
  in (0, 1].

  Example:
    >>> check_sampling(float("nan"), 0, 1.0)
    Traceback (most recent call last):
    ...
    data_utils.errors.UsageError: --temperature=nan: must be a finite number above 0
  """
  if not (math.isfinite(temperature) and temperature > 0):
    raise UsageError(f"--temperature={temperature}: must be a finite number "
                    "above 0")
  if top_k < 0:
    raise UsageError(f"--top_k={top_k}: must be 0 (off) or more")
  if not 0 < top_p <= 1:
    raise UsageError(f"--top_p={top_p}: must be in (0, 1]")


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


def prefill(lm: XLNetPretrainer, prompt_ids, prompt_mask,
            max_new_tokens: int) -> Tuple[tf.Tensor, Cache]:
  """One pass over `prompt + [slot]`: the logits `[B, V]` of the first new
  token and the cache: each layer's keys and values of the prompt's content
  states (the memory, projected), right-aligned in capacity
  `M = n + max_new_tokens`, and their mask."""
  _check_lm(lm, max_new_tokens)
  n = prompt_length(prompt_ids)
  limit = new_token_limit(lm.config, n)
  if max_new_tokens > limit.tokens:
    raise ValueError(f"max_new_tokens={max_new_tokens}: at most "
                     f"{limit.tokens} ({limit.reason})")
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
  keys, values = decoding.project_memory(lm.encoder, out["new_mems"],
                                         capacity)
  mems_mask = memory_mask(None, mask, capacity, reuse_len=n)
  return out["logits"][:, 0], (keys, values, mems_mask)


def step_constants(lm: XLNetPretrainer, capacity: int) -> StepConstants:
  """What every step of a decode with a cache of capacity M shares."""
  return decoding.step_constants(lm.encoder, lm.lm_head, capacity)


def step(lm: XLNetPretrainer, last_ids, cache: Cache,
         constants: Optional[StepConstants] = None
         ) -> Tuple[tf.Tensor, Cache]:
  """Feeds `last_ids [B]` (the newest token) and predicts the next:
  `(logits [B, V], cache with last_ids' keys and values appended)`
  (`kernels.decoding.cached_step`)."""
  return decoding.cached_step(lm.encoder, lm.lm_head, last_ids, cache,
                              constants)


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
  # The best at 0 before dividing: a small temperature then sends the
  # others to -inf, never the whole row to inf (inf - inf is NaN).
  scaled = (logits - tf.reduce_max(logits, axis=-1, keepdims=True)) / tf.cast(
      temperature, tf.float32)
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
