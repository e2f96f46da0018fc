"""Fast path of the pretraining record builder (the kernels of
`reference_examples`).

`host_step_records` yields, step for step, the serialized records that
`reference_examples.host_steps` followed by `records.example_bytes` make,
byte for byte, from the same generator: the same `rng.random`, `rng.integers` and
`rng.permutation` calls with the same arguments in the same order, and
for the reference's `rng.choice(ngrams, p=pvals)` the one `rng.random()`
that numpy makes inside it, so the generator ends in the same state
(tests/test_pretrain_fast.py checks records and state on the shared
corpus). A builder writes them as they come:

    for step in host_step_records(data, sent_ids, cfg, is_start, rng):
      yield from step

`reference_examples` stays the readable statement; what this module does
differently:

  - sentence boundaries and word starts come from numpy searches over the
    window at hand instead of per-token Python loops (never over the whole
    stream: it may be a memory map of many GB);
  - `rng.choice(ngrams, p=pvals)` is `rng.random()` and a bisection of the
    cdf numpy's `Generator.choice` searches (`pvals.cumsum()`, divided by
    its last entry; `side="right"`);
  - A/B trimming is closed-form instead of one token per iteration;
  - a host step's records are encoded together straight to
    `tf.train.Example` wire bytes (packed varints in numpy), with no
    protobuf objects and no `.tolist()`.
"""

from __future__ import annotations

import bisect
from typing import Iterator, List, Tuple

import numpy as np

from data_utils.example_wire import records_bytes
from data_utils.pretraining import examples
from data_utils.pretraining.examples import PretrainDataConfig
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEP_ID)

# First search window for a sentence boundary, in tokens; it grows 4x per
# miss, so a boundary d tokens away costs O(log d) numpy calls.
_FIRST_CHUNK = 64


# ---------------------------------------------------------------------------
# A/B split and spans (the draws of reference_examples.split_a_and_b and
# reference_examples.sample_span_mask)
# ---------------------------------------------------------------------------

def _next_change(sent_ids: np.ndarray, pos: int, limit: int) -> int:
  """The smallest `e` in `[pos, limit)` with `sent_ids[e] != sent_ids[e-1]`
  (`pos >= 1`), else `max(pos, limit)`."""
  chunk = _FIRST_CHUNK
  while pos < limit:
    hi = min(limit, pos + chunk)
    w = sent_ids[pos - 1:hi]
    hit = (w[1:] != w[:-1]).nonzero()[0]
    if len(hit):
      return pos + int(hit[0])
    pos = hi
    chunk *= 4
  return pos


def _sentence_start(sent_ids: np.ndarray, pos: int) -> int:
  """The largest `e <= pos` with `e == 0` or `sent_ids[e] != sent_ids[e-1]`."""
  chunk = _FIRST_CHUNK
  while pos > 0:
    lo = max(0, pos - chunk)
    w = sent_ids[lo:pos + 1]
    hit = (w[1:] != w[:-1]).nonzero()[0]
    if len(hit):
      return lo + 1 + int(hit[-1])
    pos = lo
    chunk *= 4
  return 0


def split_a_and_b(sent_ids: np.ndarray, begin: int, total_len: int,
                  rng: np.random.Generator):
  """`reference_examples.split_a_and_b`: the same arguments, draws and
  `(a_begin, a_end, b_begin, b_end, label)` (or None), without its
  per-token loops."""
  data_len = len(sent_ids)
  if begin + total_len >= data_len:
    return None
  w = sent_ids[begin:begin + total_len]
  # cut points (boundaries inside the window): begin + 1 + cuts
  cuts = (w[1:] != w[:-1]).nonzero()[0]
  n_cuts = len(cuts)
  if not n_cuts or rng.random() < 0.5:
    label = 0
    if n_cuts:
      a_end = begin + 1 + int(cuts[rng.integers(n_cuts)])
    else:
      a_end = _next_change(sent_ids, begin + total_len, data_len)
    b_len = max(1, total_len - (a_end - begin))
    b_begin = int(rng.integers(0, data_len - 1 - b_len + 1))
    b_end = _next_change(sent_ids, b_begin + b_len, data_len - 1)
    b_begin = _sentence_start(sent_ids, b_begin)
  else:
    label = 1
    a_end = begin + 1 + int(cuts[rng.integers(n_cuts)])
    b_begin = a_end
    b_end = _next_change(sent_ids, begin + total_len, data_len)

  # The reference trims one token at a time from the longer part (B on a
  # tie): the longer one down to the shorter, then both in turn, B first.
  a_len, b_len = a_end - begin, b_end - b_begin
  extra = a_len + b_len - total_len
  if extra > 0:
    if a_len > b_len:
      cut = min(extra, a_len - b_len)
      a_len, extra = a_len - cut, extra - cut
    elif b_len > a_len:
      cut = min(extra, b_len - a_len)
      b_len, extra = b_len - cut, extra - cut
    b_len -= (extra + 1) // 2
    a_len -= extra // 2
  a_end, b_end = begin + a_len, b_begin + b_len
  if a_end >= data_len or b_end >= data_len:
    return None
  return begin, a_end, b_begin, b_end, label


class _SpanSampler:
  """`reference_examples.sample_span_mask` on word-start positions, writing
  into a record's mask (a bytearray, 1 = chosen) instead of returning one."""

  def __init__(self, cfg: PretrainDataConfig):
    ngrams = np.arange(1, cfg.max_gram + 1)
    pvals = 1.0 / ngrams
    pvals /= pvals.sum()
    # What Generator.choice(ngrams, p=pvals) searches: n = index + 1.
    cdf = pvals.cumsum()
    cdf /= cdf[-1]
    self.cdf = cdf.tolist()
    # context tokens of an n-gram, by n
    self.ctx_size = [(n * cfg.mask_alpha) // cfg.mask_beta
                     for n in range(cfg.max_gram + 1)]
    self.count_pieces = cfg.original_ngram_count

  def __call__(self, mask: bytearray, offset: int, seg_len: int,
               starts: List[int], goal: int, rng: np.random.Generator,
               reverse: bool) -> None:
    """Marks exactly `goal` positions of `mask[offset:offset + seg_len]`.

    `starts`: ascending word-start positions of the segment as it is read
    (reversed for a reversed stream: position r is `seg_len - 1 - r`)."""
    cdf, ctx_of, count_pieces = self.cdf, self.ctx_size, self.count_pieces
    random, integers = rng.random, rng.integers
    bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right
    n_starts = len(starts)
    num_predict = 0
    cur = 0
    while cur < seg_len and num_predict < goal:
      left = goal - num_predict
      n = bisect_right(cdf, random()) + 1
      if n > left:
        n = left
      ctx_size = ctx_of[n]
      l_ctx = int(integers(ctx_size))
      k = bisect_left(starts, cur + l_ctx)
      if k == n_starts:
        break
      beg = starts[k]
      if count_pieces:
        end = beg + n
        if end >= seg_len:
          break
      else:
        # n words: the span ends at the n-th word start after beg
        if k + n >= n_starts:
          break
        end = starts[k + n]
        if end - beg > left:
          end = beg + left
      if reverse:
        mask[offset + seg_len - end:offset + seg_len - beg] = b"\x01" * (
            end - beg)
      else:
        mask[offset + beg:offset + end] = b"\x01" * (end - beg)
      num_predict += end - beg
      cur = end + ctx_size - l_ctx

    last = offset + seg_len - 1
    while num_predict < goal:
      i = int(integers(seg_len))
      j = last - i if reverse else offset + i
      if not mask[j]:
        mask[j] = 1
        num_predict += 1


def _start_lists(is_start_row: np.ndarray, reuse_len: int, reverse: bool
                 ) -> Tuple[List[int], List[int]]:
  """Word-start positions of the two segments of a record (`[seq_len]`
  bools), each as read (reversed when `reverse`)."""
  seq_len = len(is_start_row)
  if reverse:
    is_start_row = is_start_row[::-1]
    # reversed, the rest comes first
    cut = seq_len - reuse_len
    pos = is_start_row.nonzero()[0]
    k = int(pos.searchsorted(cut))
    return (pos[k:] - cut).tolist(), pos[:k].tolist()
  pos = is_start_row.nonzero()[0]
  k = int(pos.searchsorted(reuse_len))
  return pos[:k].tolist(), (pos[k:] - reuse_len).tolist()


# ---------------------------------------------------------------------------
# Host steps
# ---------------------------------------------------------------------------

def host_step_records(data: np.ndarray, sent_ids: np.ndarray,
                      cfg: PretrainDataConfig, is_start: np.ndarray,
                      rng: np.random.Generator) -> Iterator[List[bytes]]:
  """`reference_examples.host_steps` with each example serialized: yields one
  list of `bsz_per_host` record bytes per step, in stream order, equal to
  `records.example_bytes` of the reference's features (see the module
  docstring), drawing the same numbers from `rng` in the same order.

  `data [N]` token ids and `sent_ids [N]` as for
  `reference_examples.host_steps`; `is_start [vocab]` bool from
  `examples.start_piece_table`."""
  if examples.max_host_steps(len(data), cfg) == 0:
    return  # no step: skip the per-stream tables (bsz_per_host=10**9: GBs)
  rows, row_ids = examples.stream_layout(data, sent_ids, cfg)
  bsz, seq_len, reuse_len = cfg.bsz_per_host, cfg.seq_len, cfg.reuse_len
  per_core = bsz // cfg.num_core_per_host
  tot_len = seq_len - reuse_len - 3
  goal_1 = cfg.num_predict // 2
  goal_0 = cfg.num_predict - goal_1
  spans = _SpanSampler(cfg)
  reverse = [cfg.bi_data and (s // (per_core // 2)) % 2 == 1
             for s in range(bsz)]
  # Row views (no copies); plain ndarrays index faster than memmaps.
  row_list = [np.asarray(rows[s]) for s in range(bsz)]
  id_list = [np.asarray(row_ids[s]) for s in range(bsz)]
  sep = np.array([SEP_ID], np.int64)
  sep_cls = np.array([SEP_ID, CLS_ID], np.int64)
  perm_size = cfg.perm_size
  blocks_0 = np.arange(reuse_len // perm_size) * perm_size
  blocks_1 = np.arange((seq_len - reuse_len) // perm_size) * perm_size
  cols = np.arange(seq_len)

  i = 0
  while i + seq_len <= rows.shape[1]:
    tokens = np.empty((bsz, seq_len), np.int64)
    a_lens = np.empty(bsz, np.int64)
    labels = np.empty((bsz, 1), np.int64)
    sigma_0 = np.empty((bsz, perm_size), np.int64)
    sigma_1 = np.empty((bsz, perm_size), np.int64)
    mask = bytearray(bsz * seq_len)
    for s in range(bsz):
      parts = split_a_and_b(id_list[s], i + reuse_len, tot_len, rng)
      if parts is None:
        return
      a_begin, a_end, b_begin, b_end, labels[s, 0] = parts
      row = row_list[s]
      # A and B always hold tot_len tokens together: seq_len in all.
      np.concatenate([row[i:i + reuse_len], row[a_begin:a_end], sep,
                      row[b_begin:b_end], sep_cls], out=tokens[s])
      a_lens[s] = a_end - a_begin
      starts_0, starts_1 = _start_lists(is_start[tokens[s]], reuse_len,
                                        reverse[s])
      spans(mask, s * seq_len, reuse_len, starts_0, goal_0, rng, reverse[s])
      spans(mask, s * seq_len + reuse_len, seq_len - reuse_len, starts_1,
            goal_1, rng, reverse[s])
      sigma_0[s] = rng.permutation(perm_size)
      sigma_1[s] = rng.permutation(perm_size)
    yield _step_records(tokens, a_lens, labels, sigma_0, sigma_1, mask, cfg,
                        blocks_0, blocks_1, cols)
    i += reuse_len


def _step_records(tokens, a_lens, labels, sigma_0, sigma_1, mask, cfg,
                  blocks_0, blocks_1, cols) -> List[bytes]:
  """The records of one host step from its per-stream parts (`[bsz, ...]`;
  `mask` bsz * seq_len bytes, 1 = chosen)."""
  bsz, seq_len = tokens.shape
  num_predict = cfg.num_predict
  segment_ids = np.where(cols < (cfg.reuse_len + a_lens + 1)[:, None],
                         SEG_ID_A, SEG_ID_B).astype(np.int64)
  segment_ids[:, -1] = SEG_ID_CLS
  chosen = np.frombuffer(mask, np.bool_).reshape(bsz, seq_len)
  hit = chosen & (tokens != SEP_ID) & (tokens != CLS_ID)
  rec, pos = np.nonzero(hit)           # ascending within each record
  counts = np.bincount(rec, minlength=bsz)
  rank = np.arange(len(rec)) - (np.cumsum(counts) - counts)[rec]
  target_pos = np.zeros((bsz, num_predict), np.int64)
  target_pos[rec, rank] = pos
  target_id = np.zeros((bsz, num_predict), np.int64)
  target_id[rec, rank] = tokens[rec, pos]
  target_mask = np.zeros((bsz, num_predict), np.float32)
  target_mask[rec, rank] = 1.0
  order = np.concatenate([
      (blocks_0[None, :, None] + sigma_0[:, None, :]).reshape(bsz, -1),
      (blocks_1[None, :, None] + sigma_1[:, None, :]).reshape(bsz, -1)],
      axis=1)
  return records_bytes({
      "input": tokens, "seg_id": segment_ids, "label": labels,
      "perm_order": order, "target_pos": target_pos, "target_id": target_id,
      "target_mask": target_mask})
