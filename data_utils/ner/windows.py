"""Windows over a sentence's pieces, and which window predicts each piece.

A sentence of `n` pieces is read in windows of at most `size` pieces whose
starts are `stride` apart: `[0, size)`, `[stride, stride + size)`, ...,
the last one ending at `n` (one window when `n <= size`). Every piece is
then predicted from the window where it has the most context: the largest
`min(pieces before it, pieces after it)` inside the window, the earlier
window on a tie (BERT's "max context" rule for SQuAD, without its length
term). The in-graph version in the export follows the same two rules.
"""

from __future__ import annotations

from typing import List, Tuple


def window_spans(n_pieces: int, size: int, stride: int
                 ) -> List[Tuple[int, int]]:
  """`[(start, end)]` of the windows over `n_pieces` pieces (at least one;
  `1 <= stride <= size`).

  Example:
    >>> window_spans(10, 4, 3)
    [(0, 4), (3, 7), (6, 10)]
    >>> window_spans(3, 4, 2)
    [(0, 3)]
  """
  if not 1 <= stride <= size:
    raise ValueError(f"stride {stride} must be in [1, size={size}]")
  spans = []
  start = 0
  while True:
    end = min(start + size, n_pieces)
    spans.append((start, end))
    if end >= n_pieces:
      return spans
    start += stride


def context_of(piece: int, span: Tuple[int, int]) -> int:
  """How much context `piece` has in window `span`: the fewer of the pieces
  before and after it there.

  Example:
    >>> context_of(5, (3, 7))
    1
  """
  start, end = span
  return min(piece - start, end - 1 - piece)


def best_windows(spans: List[Tuple[int, int]], n_pieces: int) -> List[int]:
  """For each piece, the index of the window that predicts it.

  Example:
    >>> best_windows([(0, 4), (3, 7), (6, 10)], 10)
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
  """
  best = []
  for p in range(n_pieces):
    holding = [k for k, (s, e) in enumerate(spans) if s <= p < e]
    best.append(max(holding, key=lambda k: (context_of(p, spans[k]), -k)))
  return best
