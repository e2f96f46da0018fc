"""Beam search over the decoding cache of `generation`, and `generate`, the
text-level API (prompts in, continuations out) over `decode` and beam
search.

Beam search keeps `K = num_beams` hypotheses per prompt, each with its own
copy of the cache (rows `b * K + k`), reordered by parent after every step.
A hypothesis that produced a stop token is frozen: its only continuation is
PAD_ID at log-probability 0, so it competes with its final sum. The ranking
during search is the sum of log-probs; the final order divides it by
`length ** length_penalty`. With one beam this is exactly greedy decoding.

Shapes: `prompt_ids [B, n]` int32 LEFT-padded, `prompt_mask [B, n]` float;
`beam_search` returns `tokens [B, K, T]`, `log_probs [B, K, T]`,
`lengths [B, K]`, `scores [B, K]` (best first).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.errors import UserError
from data_utils.tokenization import PAD_ID
from xlnet_tf.tasks.language_model.generation import (decode, is_stop, prefill,
                                       prompt_length, restrict_vocab, step,
                                       step_constants, stop_tensor)
from xlnet_tf.tasks.language_model.model import XLNetPretrainer

STRATEGIES = ("greedy", "sample", "beam")


def _gather_beams(x, parent):
  """`x [B, K, ...]` rows picked by `parent [B, K]`."""
  return tf.gather(x, parent, batch_dims=1)


def beam_search(lm: XLNetPretrainer, prompt_ids, prompt_mask,
                max_new_tokens: int, num_beams: int, *,
                length_penalty: float = 1.0, stop_ids=None,
                vocab_size: Optional[int] = None) -> dict:
  """The `num_beams` best continuations of each prompt (see the module
  docstring). Returns `{"tokens", "log_probs", "lengths", "scores"}` sorted
  best first; `scores` = sum of log-probs / length ** length_penalty."""
  total, beams = int(max_new_tokens), int(num_beams)
  logits, cache = prefill(lm, prompt_ids, prompt_mask, total)
  constants = step_constants(lm, prompt_length(prompt_ids) + total)
  vocab = logits.shape[-1]
  if beams < 1 or beams > vocab:
    raise ValueError(f"num_beams={beams}: must be in 1..{vocab}")
  batch = tf.shape(logits)[0]
  stops = stop_tensor(stop_ids)
  first = tf.math.top_k(
      tf.nn.log_softmax(restrict_vocab(logits, vocab_size)), beams)
  here0 = tf.equal(tf.range(total), 0)[None, None, :]
  tokens = tf.where(here0, first.indices[..., None], PAD_ID)
  log_probs = tf.where(here0, first.values[..., None], 0.0)
  cache = tf.nest.map_structure(lambda x: tf.repeat(x, beams, axis=0), cache)
  # A frozen hypothesis extends only by PAD_ID, keeping its score.
  pad_only = tf.equal(tf.range(vocab), PAD_ID)[None, None, :]
  rows = tf.range(batch)[:, None] * beams

  def keep_going(t, last, cache, scores, tokens, log_probs, lengths, done):
    del last, cache, scores, tokens, log_probs, lengths
    return tf.logical_and(t < total, tf.logical_not(tf.reduce_all(done)))

  def one_step(t, last, cache, scores, tokens, log_probs, lengths, done):
    logits, cache = step(lm, tf.reshape(last, [-1]), cache, constants)
    log_p = tf.reshape(tf.nn.log_softmax(restrict_vocab(logits, vocab_size)),
                       [batch, beams, vocab])
    frozen = tf.where(pad_only, scores[..., None], float("-inf"))
    cand = tf.where(done[..., None], frozen, scores[..., None] + log_p)
    best = tf.math.top_k(tf.reshape(cand, [batch, beams * vocab]), beams)
    parent, token = best.indices // vocab, best.indices % vocab
    was_done = _gather_beams(done, parent)
    token_lp = tf.gather(tf.reshape(log_p, [batch, beams * vocab]),
                         best.indices, batch_dims=1)
    here = tf.equal(tf.range(total), t)[None, None, :]
    tokens = tf.where(here, tf.where(was_done, PAD_ID, token)[..., None],
                      _gather_beams(tokens, parent))
    log_probs = tf.where(here, tf.where(was_done, 0.0, token_lp)[..., None],
                         _gather_beams(log_probs, parent))
    lengths = _gather_beams(lengths, parent) + tf.cast(
        tf.logical_not(was_done), tf.int32)
    done = tf.logical_or(was_done, is_stop(token, stops))
    flat = tf.reshape(rows + parent, [-1])
    cache = tf.nest.map_structure(lambda x: tf.gather(x, flat), cache)
    return t + 1, token, cache, best.values, tokens, log_probs, lengths, done

  out = tf.while_loop(
      keep_going, one_step,
      (tf.constant(1), first.indices, cache, first.values, tokens, log_probs,
       tf.ones([batch, beams], tf.int32), is_stop(first.indices, stops)),
      maximum_iterations=max(total - 1, 0))
  sums, tokens, log_probs, lengths = out[3], out[4], out[5], out[6]
  scores = sums / tf.cast(lengths, tf.float32) ** length_penalty
  order = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
  return {"tokens": _gather_beams(tokens, order),
          "log_probs": _gather_beams(log_probs, order),
          "lengths": _gather_beams(lengths, order),
          "scores": _gather_beams(scores, order)}


def left_pad(rows: Sequence[Sequence[int]], multiple: int = 8):
  """Prompts of ids -> `(ids [B, n] int32, mask [B, n] float32)`, LEFT-padded
  with PAD_ID to the longest rounded up to `multiple` (fewer shapes to
  trace; padding changes no result).

  Example:
    >>> ids, mask = left_pad([[9, 10], [11]], multiple=1)
    >>> ids.tolist(), mask.tolist()
    ([[9, 10], [5, 11]], [[0.0, 0.0], [1.0, 0.0]])
  """
  longest = max(len(r) for r in rows)
  width = -(-longest // multiple) * multiple
  ids = np.full([len(rows), width], PAD_ID, np.int32)
  mask = np.ones([len(rows), width], np.float32)
  for i, row in enumerate(rows):
    if row:
      ids[i, width - len(row):] = row
      mask[i, width - len(row):] = 0.0
  return ids, mask


def continuation_text(tokenizer, prompt_ids: Sequence[int],
                      new_ids: Sequence[int]) -> str:
  """The text the new ids add after the prompt (a leading space when the
  first new piece starts a word)."""
  before = tokenizer.decode_ids(list(prompt_ids))
  after = tokenizer.decode_ids(list(prompt_ids) + list(new_ids))
  if after.startswith(before):
    return after[len(before):]
  return tokenizer.decode_ids(list(new_ids))


def cut_at_stop_string(tokenizer, prompt_ids, new_ids, stop_strings):
  """`(n, text)`: the first n new tokens whose text contains a stop string,
  and the text before it; `(None, None)` when none appears."""
  if not stop_strings:
    return None, None
  full = continuation_text(tokenizer, prompt_ids, new_ids)
  if not any(s in full for s in stop_strings):
    return None, None
  for n in range(1, len(new_ids) + 1):
    text = continuation_text(tokenizer, prompt_ids, new_ids[:n])
    found = [text.index(s) for s in stop_strings if s in text]
    if found:
      return n, text[:min(found)]
  return None, None


class Generator:
  """`generate` with the decoding function traced once per shape
  (`traced=False`: run eagerly, for a few short prompts). Settings are
  those of `generate`."""

  def __init__(self, lm: XLNetPretrainer, tokenizer, max_new_tokens: int,
               strategy: str = "greedy", *, num_beams: int = 4,
               length_penalty: float = 1.0, temperature: float = 1.0,
               top_k: int = 0, top_p: float = 1.0, seed: Optional[int] = None,
               stop_ids: Sequence[int] = (),
               stop_strings: Sequence[str] = (), traced: bool = True):
    if strategy not in STRATEGIES:
      raise ValueError(f"strategy={strategy!r}: use one of "
                       f"{', '.join(STRATEGIES)}")
    self.lm, self.tokenizer, self.strategy = lm, tokenizer, strategy
    self.total = int(max_new_tokens)
    self.seed = seed
    self.stop_strings = list(stop_strings)
    vocab = tokenizer.vocab_size
    stops = [int(i) for i in stop_ids]
    self.stops = set(stops)
    if strategy == "beam":
      def run(ids, mask, seed):
        del seed
        out = beam_search(lm, ids, mask, self.total, num_beams,
                          length_penalty=length_penalty, stop_ids=stops,
                          vocab_size=vocab)
        return {k: v[:, 0] for k, v in out.items()}
    else:
      def run(ids, mask, seed):
        return decode(lm, ids, mask, self.total,
                      greedy=strategy == "greedy", temperature=temperature,
                      top_k=top_k, top_p=top_p, seed=seed, stop_ids=stops,
                      vocab_size=vocab)
    # The loops are explicit (tf.while_loop, tf.cond): no autograph needed,
    # and tracing without it is about twice as fast.
    self._run = tf.function(run, autograph=False) if traced else run

  def batch(self, prompts: Sequence[str], index: int = 0) -> List[dict]:
    """Continuations of one batch (`index`: its number, which keys the
    sampling seed: seed `[seed, index]`)."""
    encoded = [self.tokenizer.encode_ids(p) for p in prompts]
    for i, ids in enumerate(encoded):
      if not ids:
        raise UserError(f"prompt {prompts[i]!r}: no tokens (a prompt needs "
                        "at least one)")
    ids, mask = left_pad(encoded)
    seed = None
    if self.strategy == "sample":
      seed = tf.constant([self.seed if self.seed is not None
                          else np.random.randint(2**31 - 1), index], tf.int32)
    out = {k: v.numpy() for k, v in self._run(ids, mask, seed).items()}
    return [self._result(prompt, encoded[i], out, i)
            for i, prompt in enumerate(prompts)]

  def _result(self, prompt, prompt_ids, out, i) -> dict:
    n = int(out["lengths"][i])
    new_ids = [int(t) for t in out["tokens"][i, :n]]
    log_probs = [float(x) for x in out["log_probs"][i, :n]]
    stop = "stop_id" if new_ids and new_ids[-1] in self.stops else "length"
    cut, text = cut_at_stop_string(self.tokenizer, prompt_ids, new_ids,
                                   self.stop_strings)
    if cut is not None:
      new_ids, log_probs, stop = new_ids[:cut], log_probs[:cut], "stop_string"
    else:
      text = continuation_text(self.tokenizer, prompt_ids, new_ids)
    result = {"prompt": prompt, "text": text, "tokens": new_ids,
              "pieces": [self.tokenizer.id_to_piece(t) for t in new_ids],
              "log_probs": log_probs,
              "sum_log_prob": float(np.sum(log_probs, dtype=np.float64)),
              "stop": stop}
    if "scores" in out:
      result["beam_score"] = float(out["scores"][i])
    return result

  def __call__(self, prompts: Sequence[str], batch_size: int = 8,
               progress: Optional[Callable[[int], None]] = None
               ) -> List[dict]:
    results: List[dict] = []
    for index, start in enumerate(range(0, len(prompts), batch_size)):
      chunk = prompts[start:start + batch_size]
      results.extend(self.batch(chunk, index))
      if progress is not None:
        progress(len(chunk))
    return results


def generate(lm: XLNetPretrainer, tokenizer, prompts: Sequence[str],
             max_new_tokens: int, strategy: str = "greedy", *,
             batch_size: int = 8, progress=None, **settings) -> List[dict]:
  """Continues each prompt. `strategy`: "greedy", "sample" (`temperature`,
  `top_k`, `top_p`, `seed`: batch i draws from seed `[seed, i]`, so a
  sample depends on the seed and on the batch it is in) or "beam"
  (`num_beams`, `length_penalty`; the best beam). `stop_ids` end a
  continuation (the id kept); `stop_strings` cut its text before the first
  one found (the tokens up to the one that completed it are kept).

  Returns one dict per prompt: `prompt`, `text` (the continuation),
  `tokens`, `pieces`, `log_probs` (the model's log p of each token),
  `sum_log_prob`, `stop` ("length", "stop_id" or "stop_string") and, for
  beams, `beam_score`. `progress(n)` is called after each batch.
  """
  runner = Generator(lm, tokenizer, max_new_tokens, strategy, **settings)
  return runner(list(prompts), batch_size, progress)
