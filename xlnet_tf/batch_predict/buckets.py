"""Global length buckets: pure helpers of the batching plan.

Every unit the model reads (a row, or one window of a long text) has a
length in positions. A unit's bucket is its length rounded up to a grid
that grows by an eighth per step (`bucket_of`). Buckets too sparse to
fill a few batches are merged with the next ones up (`layout`: a range of
buckets holds at least `MIN_ROWS` units, or is the last), so a small input
is not cut into many small batches; a range is spread over
`spread_of(count)` groups by a stable hash of the unit's key (`group_of`):
no group holds more than about `GROUP_ROWS` units, whatever the input's
size, and a hot bucket lands on many workers. A group is sorted by length
(then key) and cut into batches (`cut`) of neighbours in length, each
padded to its longest unit, so padding stays small even in a merged range.

Every step is a function of the units alone, so the batches (and the
values they give) are the same on every runner, with any number of
workers, on a retry.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Callable, Dict, List, Sequence, Tuple, TypeVar

T = TypeVar("T")

# Units per group, about: what one worker holds at once to sort them
# (a few MB of token ids), and enough for full batches of similar length.
GROUP_ROWS = 1024
# Units a range of buckets holds at least (unless it is the last): full
# batches of neighbours in length.
MIN_ROWS = 256
_STEP = 8  # the grid's finest step


def bucket_of(length: int) -> int:
  """The bucket of a unit of `length` positions: the least grid bound at
  least `length`. The grid is 8, 16, ..., 64, then each bound an eighth
  above the last (72, 81, 91, ...).

  Example:
    >>> [bucket_of(n) for n in (1, 8, 9, 64, 65, 100, 500)]
    [8, 8, 16, 64, 72, 102, 518]
  """
  bound = _STEP
  while bound < length:
    bound += max(_STEP, bound // 8)
  return bound


def spread_of(count: int, group_rows: int = GROUP_ROWS) -> int:
  """How many groups a bucket of `count` units is spread over.

  Example:
    >>> spread_of(1), spread_of(1024), spread_of(1025)
    (1, 1, 2)
  """
  return max(1, -(-count // group_rows))


def layout(counts: Dict[int, int], min_rows: int = MIN_ROWS,
           group_rows: int = GROUP_ROWS) -> Dict[int, Tuple[int, int]]:
  """{bucket: (its range's first bucket, the range's spread)} from the
  units per bucket: consecutive buckets merged until a range holds at
  least `min_rows` units (the last range takes what is left).

  Example:
    >>> layout({8: 3, 16: 5, 24: 300, 40: 2}, min_rows=8)
    {8: (8, 1), 16: (8, 1), 24: (24, 1), 40: (40, 1)}
    >>> layout({8: 3, 16: 5, 24: 300, 40: 2}, min_rows=9, group_rows=100)
    {8: (8, 4), 16: (8, 4), 24: (8, 4), 40: (40, 1)}
  """
  out: Dict[int, Tuple[int, int]] = {}
  members: List[int] = []
  total = 0
  for bucket in sorted(counts):
    members.append(bucket)
    total += counts[bucket]
    if total >= min_rows or bucket == max(counts):
      for member in members:
        out[member] = (members[0], spread_of(total, group_rows))
      members, total = [], 0
  return out


def group_of(key: Any, spread: int) -> int:
  """A unit's group in its bucket: a stable hash of its key (the same in
  every process, unlike `hash`) modulo `spread`.

  Example:
    >>> group_of(("a.txt", 3, 0), 1), group_of(("a.txt", 3, 0), 7)
    (0, 5)
  """
  return zlib.crc32(json.dumps(key).encode("utf-8")) % spread


def cut(units: Sequence[T], length: Callable[[T], int],
        order: Callable[[T], Any], batch_size: int, max_positions: int
        ) -> List[List[T]]:
  """`units` sorted by (length, order) and cut into batches of at most
  `batch_size` units whose padded size (units times the longest) is at
  most `max_positions` (a unit longer than that is a batch alone), and
  whose longest unit is at most an eighth (at least 2 positions) longer
  than their shortest: padding stays under about a ninth of any batch.

  Example:
    >>> cut([5, 2, 9, 3, 2], lambda n: n, lambda n: 0, 2, 100)
    [[2, 2], [3, 5], [9]]
    >>> cut([50, 52, 60, 51], lambda n: n, lambda n: 0, 4, 160)
    [[50, 51, 52], [60]]
  """
  batches: List[List[T]] = []
  batch: List[T] = []
  for unit in sorted(units, key=lambda u: (length(u), order(u))):
    n = length(unit)  # the longest so far: units come sorted
    if batch:
      first = length(batch[0])
      if (len(batch) == batch_size or (len(batch) + 1) * n > max_positions
          or n > first + max(2, first // 8)):
        batches.append(batch)
        batch = []
    batch.append(unit)
  if batch:
    batches.append(batch)
  return batches


def padding_of(batches: Sequence[Sequence[int]]) -> Tuple[int, int]:
  """`(real, fed)` positions of batches of unit lengths, each batch padded
  to its longest unit.

  Example:
    >>> padding_of([[2, 3], [9]])
    (14, 15)
  """
  real = sum(sum(b) for b in batches)
  return real, sum(len(b) * max(b) for b in batches)


def plan(units: Sequence[Tuple[Any, int]], batch_size: int,
         max_positions: int, min_rows: int = MIN_ROWS,
         group_rows: int = GROUP_ROWS) -> List[List[Tuple[Any, int]]]:
  """The batches the global bucketing makes of `units` `(key, length)`,
  in one process: what the pipeline's steps give on any runner (there
  spread over workers). Batches come by (range, group), then in order.

  Example:
    >>> plan([("a", 3), ("b", 30), ("c", 5), ("d", 2)], 2, 100, min_rows=2)
    [[('d', 2), ('a', 3)], [('c', 5)], [('b', 30)]]
  """
  counts: Dict[int, int] = {}
  for _, length in units:
    counts[bucket_of(length)] = counts.get(bucket_of(length), 0) + 1
  ranges = layout(counts, min_rows, group_rows)
  groups: Dict[Tuple[int, int], list] = {}
  for key, length in units:
    first, spread = ranges[bucket_of(length)]
    groups.setdefault((first, group_of(key, spread)), []).append(
        (key, length))
  return [batch for group in sorted(groups)
          for batch in cut(groups[group], lambda u: u[1], lambda u: u[0],
                           batch_size, max_positions)]
