"""The readable statement of the pretraining records (`examples.py`'s
schema): how the original draws A and B, the spans to predict and the
factorization order, one example at a time.

The builder runs `fast_examples.py`, which makes the same records byte for
byte from the same generator (tests/test_pretrain_fast.py); this module is
what it is checked against, and what tests and benchmarks call.
"""

from __future__ import annotations

from typing import List

import numpy as np

from data_utils.pretraining.examples import (PretrainDataConfig, line_ids,
                                             stream_layout)
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEP_ID)


def split_a_and_b(sent_ids: np.ndarray, begin: int, total_len: int,
                  rng: np.random.Generator):
  """Segments A and B for the next-sentence label, as the original.

  A starts at `begin` and ends at a sentence boundary; with probability 1/2
  (or when A's run has no boundary) B is a random span elsewhere (label 0),
  else the text right after A (label 1). Both are trimmed to `total_len`
  tokens (A from the right first when longer). Returns `(a_begin, a_end,
  b_begin, b_end, label)` into the stream (`sent_ids [data_len]`), or None
  when the stream has no room left.

  Example:
    >>> split_a_and_b(np.array([1, 1, 0, 0, 1, 1, 0]), 0, 4,
    ...               np.random.default_rng(1))
    (0, 2, 2, 4, 1)
  """
  data_len = len(sent_ids)
  if begin + total_len >= data_len:
    return None
  end = begin + 1
  cut_points = []
  while end < data_len:
    if sent_ids[end] != sent_ids[end - 1]:
      if end - begin >= total_len:
        break
      cut_points.append(end)
    end += 1

  a_begin = begin
  if not cut_points or rng.random() < 0.5:
    label = 0
    a_end = end if not cut_points else cut_points[rng.integers(len(cut_points))]
    b_len = max(1, total_len - (a_end - a_begin))
    # `data_len - 1` leaves room for the shifted LM target, as the original.
    b_begin = int(rng.integers(0, data_len - 1 - b_len + 1))
    b_end = b_begin + b_len
    while b_begin > 0 and sent_ids[b_begin - 1] == sent_ids[b_begin]:
      b_begin -= 1
    while b_end < data_len - 1 and sent_ids[b_end - 1] == sent_ids[b_end]:
      b_end += 1
  else:
    label = 1
    a_end = cut_points[rng.integers(len(cut_points))]
    b_begin, b_end = a_end, end

  while a_end - a_begin + b_end - b_begin > total_len:
    if a_end - a_begin > b_end - b_begin:
      a_end -= 1
    else:
      b_end -= 1
  if a_end >= data_len or b_end >= data_len:
    return None
  return a_begin, a_end, b_begin, b_end, label


def sample_span_mask(tokens: np.ndarray, goal: int, cfg: PretrainDataConfig,
                     is_start: np.ndarray, rng: np.random.Generator,
                     reverse: bool = False) -> np.ndarray:
  """Selects exactly `goal` positions to predict, in n-gram spans.

  Span lengths n are drawn with p(n) ∝ 1/n, n <= max_gram; each span sits in
  a context of `n * mask_alpha / mask_beta` tokens and starts on a word
  start. An n-gram covers n whole words (or n pieces with
  `original_ngram_count`). Random single positions top up to `goal`.
  """
  seg_len = len(tokens)
  mask = np.zeros(seg_len, dtype=bool)
  if reverse:
    tokens = tokens[::-1]
  starts = is_start[tokens]
  ngrams = np.arange(1, cfg.max_gram + 1)
  pvals = 1.0 / ngrams
  pvals /= pvals.sum()

  num_predict = 0
  cur = 0
  while cur < seg_len and num_predict < goal:
    n = min(int(rng.choice(ngrams, p=pvals)), goal - num_predict)
    ctx_size = (n * cfg.mask_alpha) // cfg.mask_beta
    l_ctx = int(rng.integers(ctx_size))
    r_ctx = ctx_size - l_ctx
    beg = cur + l_ctx
    while beg < seg_len and not starts[beg]:
      beg += 1
    if beg >= seg_len:
      break
    end = beg + 1
    words = 1
    while end < seg_len:
      # The original tests `beg` here (always a start): it counts pieces.
      if starts[beg if cfg.original_ngram_count else end]:
        words += 1
        if words > n:
          break
      end += 1
    if end >= seg_len:
      break
    # Whole words can hold more pieces than the budget has left: cut the
    # last span so that exactly `goal` positions are chosen.
    end = min(end, beg + goal - num_predict)
    mask[beg:end] = True
    num_predict += end - beg
    cur = end + r_ctx

  while num_predict < goal:
    i = int(rng.integers(seg_len))
    if not mask[i]:
      mask[i] = True
      num_predict += 1
  return mask[::-1] if reverse else mask


def block_permutation(length: int, perm_size: int,
                      rng: np.random.Generator) -> np.ndarray:
  """The original `_local_perm` order: one random permutation of
  `perm_size` applied to every block of `perm_size` positions.

  Example:
    >>> order = block_permutation(6, 3, np.random.default_rng(0))
    >>> sorted(order[:3].tolist()), sorted(order[3:].tolist())
    ([0, 1, 2], [3, 4, 5])
    >>> (order[3:] - order[:3]).tolist()
    [3, 3, 3]
  """
  sigma = rng.permutation(perm_size)
  blocks = np.arange(length // perm_size)[:, None] * perm_size
  return (blocks + sigma[None, :]).reshape(-1)


def make_example(inp: np.ndarray, a: np.ndarray, b: np.ndarray, label: int,
                 cfg: PretrainDataConfig, is_start: np.ndarray,
                 rng: np.random.Generator, reverse: bool) -> dict:
  """One record (see the module docstring) as a dict of numpy arrays."""
  sep, cls = np.array([SEP_ID]), np.array([CLS_ID])
  tail = np.concatenate([a, sep, b, sep, cls])
  tokens = np.concatenate([inp, tail]).astype(np.int64)
  segment_ids = np.array([SEG_ID_A] * (cfg.reuse_len + len(a) + 1)
                         + [SEG_ID_B] * (len(b) + 1) + [SEG_ID_CLS],
                         dtype=np.int64)
  goal_1 = cfg.num_predict // 2
  goal_0 = cfg.num_predict - goal_1
  is_masked = np.concatenate([
      sample_span_mask(inp, goal_0, cfg, is_start, rng, reverse),
      sample_span_mask(tail, goal_1, cfg, is_start, rng, reverse)])
  functional = (tokens == SEP_ID) | (tokens == CLS_ID)
  target_pos = np.flatnonzero(is_masked & ~functional)
  pad = cfg.num_predict - len(target_pos)
  order = np.concatenate([
      block_permutation(cfg.reuse_len, cfg.perm_size, rng),
      block_permutation(cfg.seq_len - cfg.reuse_len, cfg.perm_size, rng)])
  return {
      "input": tokens,
      "seg_id": segment_ids,   # the original's record key
      "label": np.array([label], np.int64),
      "perm_order": order.astype(np.int64),
      "target_pos": np.concatenate([target_pos, np.zeros(pad, np.int64)]),
      "target_id": np.concatenate([tokens[target_pos],
                                   np.zeros(pad, np.int64)]),
      "target_mask": np.concatenate([np.ones(len(target_pos), np.float32),
                                     np.zeros(pad, np.float32)]),
  }


def host_steps(data: np.ndarray, sent_ids: np.ndarray,
               cfg: PretrainDataConfig, is_start: np.ndarray,
               rng: np.random.Generator):
  """Yields one list of `bsz_per_host` examples per step, in stream order,
  advancing every stream by `reuse_len` tokens per step."""
  rows, row_ids = stream_layout(data, sent_ids, cfg)
  per_core = cfg.bsz_per_host // cfg.num_core_per_host
  tot_len = cfg.seq_len - cfg.reuse_len - 3
  i = 0
  while i + cfg.seq_len <= rows.shape[1]:
    step = []
    for s in range(cfg.bsz_per_host):
      parts = split_a_and_b(row_ids[s], i + cfg.reuse_len, tot_len, rng)
      if parts is None:
        return
      a_begin, a_end, b_begin, b_end, label = parts
      row = rows[s]
      reverse = cfg.bi_data and (s // (per_core // 2)) % 2 == 1
      step.append(make_example(rows[s, i:i + cfg.reuse_len],
                               row[a_begin:a_end], row[b_begin:b_end], label,
                               cfg, is_start, rng, reverse))
    yield step
    i += cfg.reuse_len



def lines_to_ids(lines, encode, use_eod: bool):
  """`(ids int64 [N], sent_ids bool [N])` of `line_ids`, in memory."""
  ids: List[int] = []
  sent_ids: List[bool] = []
  for cur, sent_id in line_ids(lines, encode, use_eod):
    ids.extend(cur)
    sent_ids.extend([sent_id] * len(cur))
  return np.array(ids, np.int64), np.array(sent_ids, bool)
