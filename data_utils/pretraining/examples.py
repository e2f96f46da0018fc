"""Pretraining examples with a precomputed factorization order.

Builds what the original's `data_utils.create_tfrecords` wrote, plus, per
example and pass, the permutation the original's reader drew on the fly
(`_local_perm`) and the packed target mapping, so that a run is reproducible
from its records alone and the reader only expands indices into masks.

Record schema (one `tf.train.Example` per stream per step; `L = seq_len`,
`P = num_predict`; all int64 unless said):
  input        [L]  `[reuse] A <sep> B <sep> <cls>` token ids
  seg_id       [L]  segment ids (the original's key; read back as
                    `segment_ids`): 0 for reuse + A + its <sep>, 1 for B +
                    its <sep>, 2 <cls>
  label        [1]  1 when B really follows A, else 0
  perm_order   [L]  factorization-order rank of each position, local to its
                    part: positions `[0, reuse_len)` rank in `[0, reuse_len)`,
                    the rest in `[0, L - reuse_len)`
  target_pos   [P]  positions predicted, ascending; 0 on padding
  target_id    [P]  their token ids; 0 on padding
  target_mask  [P]  float, 1 = real target, 0 = padding

Records of one host step are consecutive: record `step * bsz_per_host + s`
continues stream `s`. With `bi_data`, each core's slice of a step holds its
forward streams, then the same streams reversed.

This module holds what the builder and the reference share (the settings,
the stream layout, the ids of the lines); how an example is drawn is stated
readably in `reference_examples.py` and run by `fast_examples.py`.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from data_utils.errors import UserError
from data_utils.tokenization import EOD_ID

# Pieces that start a word besides "▁..." and "<...>": ASCII punctuation.
_PUNCTUATION = set('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')


class DataError(UserError):
  """The input or the settings cannot make pretraining data; says why."""


# `--perm_size` of the builder and of run_pretrain: 0 = reuse_len, so that
# the two agree on the records without the user repeating the value.
PERM_SIZE_FLAG_DEFAULT = 0


def flag_perm_size(value: int, reuse_len: int) -> int:
  """The perm_size a `--perm_size` value means (0 or None: reuse_len).

    >>> flag_perm_size(PERM_SIZE_FLAG_DEFAULT, 256), flag_perm_size(64, 256)
    (256, 64)
  """
  return value or reuse_len


@dataclasses.dataclass(frozen=True)
class PretrainDataConfig:
  """Every setting that shapes the records (stored in each record-info)."""
  seq_len: int = 512
  reuse_len: int = 256
  bsz_per_host: int = 32
  num_core_per_host: int = 1
  bi_data: bool = True
  mask_alpha: int = 6
  mask_beta: int = 1
  num_predict: int = 85
  perm_size: int = 256
  uncased: bool = False
  use_eod: bool = True
  max_gram: int = 5
  # The original counts sub-word pieces where it means words when it sizes
  # an n-gram span; True reproduces that.
  original_ngram_count: bool = False

  def validate(self) -> None:
    """Raises `DataError` with a one-line reason."""
    if self.seq_len <= 0 or self.reuse_len <= 0:
      raise DataError(f"seq_len ({self.seq_len}) and reuse_len "
                      f"({self.reuse_len}) must be positive: the stream "
                      "advances by reuse_len tokens per step")
    if self.reuse_len >= self.seq_len - 3:
      raise DataError(f"reuse_len ({self.reuse_len}) must be < seq_len - 3 "
                      f"({self.seq_len - 3}): A, B, two <sep> and <cls> need "
                      "room")
    if min(self.bsz_per_host, self.num_core_per_host) <= 0 or \
        self.bsz_per_host % self.num_core_per_host:
      raise DataError(f"bsz_per_host ({self.bsz_per_host}) must be a positive "
                      f"multiple of num_core_per_host "
                      f"({self.num_core_per_host} > 0)")
    if self.bi_data and self.bsz_per_host % (2 * self.num_core_per_host):
      raise DataError(f"bi_data needs bsz_per_host ({self.bsz_per_host}) "
                      f"divisible by 2 x num_core_per_host "
                      f"({2 * self.num_core_per_host}): each core holds "
                      "forward and reversed streams in halves")
    non_reuse = self.seq_len - self.reuse_len
    if (self.perm_size <= 0 or self.reuse_len % self.perm_size
        or non_reuse % self.perm_size):
      raise DataError(f"perm_size ({self.perm_size}) must divide reuse_len "
                      f"({self.reuse_len}) and seq_len - reuse_len "
                      f"({non_reuse})")
    if not 0 < self.num_predict <= self.seq_len:
      raise DataError(f"num_predict ({self.num_predict}) must be in "
                      f"[1, seq_len]")
    if self.mask_beta <= 0 or self.mask_alpha < self.mask_beta:
      raise DataError(f"need mask_alpha >= mask_beta > 0 (a span of n tokens "
                      f"sits in n * alpha / beta), got {self.mask_alpha}, "
                      f"{self.mask_beta}")

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def start_piece_table(pieces: List[str]) -> np.ndarray:
  """`[vocab] bool`: does the piece start a word (the original's rule)?

    >>> start_piece_table(["<unk>", "\u2581the", "ing", ","]).tolist()
    [True, True, False, True]
  """
  return np.array([p.startswith("\u2581") or p.startswith("<")
                   or p in _PUNCTUATION for p in pieces], dtype=bool)


class StreamRows:
  """A `[rows, row_len]` view of a 1-D stream (maybe a memory map), no
  copy: row r is slice `slices[r]` of `row_len` tokens, reversed when
  `reversed_rows[r]`; `rows[r]` and `rows[r, a:b]` index it as 2-D."""

  def __init__(self, stream: np.ndarray, row_len: int, slices, reversed_rows):
    self._stream = stream
    self._rows = [(int(k), bool(rev)) for k, rev in zip(slices, reversed_rows)]
    self.shape = (len(self._rows), row_len)

  def __len__(self) -> int:  # a sequence of rows: np.asarray(rows) works
    return self.shape[0]

  def __getitem__(self, key):
    if isinstance(key, tuple):
      r, cols = key
      return self[r][cols]
    k, rev = self._rows[key]
    row = self._stream[k * self.shape[1]:(k + 1) * self.shape[1]]
    return row[::-1] if rev else row


def stream_layout(data: np.ndarray, sent_ids: np.ndarray,
                  cfg: PretrainDataConfig) -> Tuple[StreamRows, StreamRows]:
  """Cuts the token stream into `bsz_per_host` rows (streams), as views:
  row s is the s-th contiguous slice; with bi_data, `bsz_per_host / 2`
  slices, each core's rows its forward slices then the same reversed.

  Example:
    >>> cfg = PretrainDataConfig(bsz_per_host=4, num_core_per_host=1,
    ...                          bi_data=True)
    >>> rows, _ = stream_layout(np.arange(8), np.zeros(8, bool), cfg)
    >>> [rows[r].tolist() for r in range(4)], rows[2, 1:3].tolist()
    ([[0, 1, 2, 3], [4, 5, 6, 7], [3, 2, 1, 0], [7, 6, 5, 4]], [2, 1])
  """
  if not cfg.bi_data:
    n = cfg.bsz_per_host
    slices, rev = range(n), [False] * n
  else:
    cores = cfg.num_core_per_host
    half = cfg.bsz_per_host // cores // 2
    n = cfg.bsz_per_host // 2
    # row (core c, direction d, h) reads slice c * half + h
    slices = [c * half + h for c in range(cores) for _ in (0, 1)
              for h in range(half)]
    rev = [d == 1 for _ in range(cores) for d in (0, 1) for _ in range(half)]
  row_len = len(data) // n
  return (StreamRows(data, row_len, slices, rev),
          StreamRows(sent_ids, row_len, slices, rev))


def max_host_steps(num_tokens: int, cfg: PretrainDataConfig) -> int:
  """An upper bound on the steps `host_steps` yields (for progress/ETA)."""
  n_rows = cfg.bsz_per_host // 2 if cfg.bi_data else cfg.bsz_per_host
  row_len = num_tokens // n_rows
  if row_len < cfg.seq_len:
    return 0
  return (row_len - cfg.seq_len) // cfg.reuse_len + 1


def concat_documents(shards: List[Tuple[np.ndarray, np.ndarray]],
                     order: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """Joins per-file `(ids, sent_ids)` in `order`, flipping a file's sentence
  parity when needed so that two files never merge into one sentence."""
  data, ids = [], []
  prev: Optional[bool] = None
  for k in order:
    tokens, sent = shards[k]
    if prev is not None and len(sent) and sent[0] == prev:
      sent = ~sent
    data.append(tokens)
    ids.append(sent)
    if len(sent):
      prev = bool(sent[-1])
  if not data:
    return np.zeros(0, np.int64), np.zeros(0, bool)
  return np.concatenate(data), np.concatenate(ids)


def line_ids(lines, encode, use_eod: bool):
  """Yields `(ids, sent_id)` per line: `encode(stripped line)`, or for an
  empty line (a document's end) `[<eod>]` with use_eod, else nothing.
  Sentence ids alternate per line (True/False) as the original.

    >>> list(line_ids(["a b", "", "c"], str.split, True))  # <eod> is 7
    [(['a', 'b'], True), ([7], True), (['c'], False)]
  """
  sent_id = True
  for line in lines:
    stripped = line.strip()
    if not stripped:
      if not use_eod:
        continue
      sent_id = not sent_id
      yield [EOD_ID], sent_id
    else:
      yield encode(stripped), sent_id
    sent_id = not sent_id
