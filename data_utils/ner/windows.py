"""Windows over a sentence's pieces, and which window predicts each piece.

A sentence of `n` pieces is read in windows of at most `size` pieces whose
starts are `stride` apart: `[0, size)`, `[stride, stride + size)`, ...,
the last one ending at `n` (one window when `n <= size`). Every piece is
then predicted from the window where it has the most context: the largest
`min(pieces before it, pieces after it)` inside the window, the earlier
window on a tie (BERT's "max context" rule for SQuAD, without its length
term).

Each rule is written once, as a function of integer arrays over `xp`, a
namespace with numpy's names: `numpy` here, `tf.experimental.numpy` in the
token classifier's export, whose graph picks its windows with these same
functions (`xlnet_tf/tasks/token_classification/serving.py`).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np


def window_count(n_pieces, size: int, stride: int, xp=np):
  """How many windows read `n_pieces` pieces: the first, then one per
  stride until one reaches the end.

  Example:
    >>> window_count(np.array([0, 4, 5, 10]), 4, 3).tolist()
    [1, 1, 2, 3]
  """
  return 1 + xp.maximum((n_pieces - size + stride - 1) // stride, 0)


def window_start(k, stride: int):
  """Where window `k` starts."""
  return k * stride


def window_end(start, n_pieces, size: int, xp=np):
  """Where the window starting at `start` ends (exclusive)."""
  return xp.minimum(start + size, n_pieces)


def context(piece, start, end, xp=np):
  """How much context `piece` has in window `[start, end)`: the fewer of
  the pieces before and after it there."""
  return xp.minimum(piece - start, end - 1 - piece)


def most_context(contexts, xp=np):
  """The index of the largest of `contexts` along the last axis (-1 where a
  window does not hold the piece), the first of equal ones: scores made
  distinct first, so any argmax agrees (TF's does not promise the first)."""
  count = contexts.shape[-1]
  return xp.argmax(contexts * count + (count - 1 - xp.arange(count)),
                   axis=-1)


def best_window(piece, n_pieces, size: int, stride: int, xp=np):
  """For pieces at `piece` [N] of sentences of `n_pieces` [N] pieces, the
  index of the window of `window_spans` that predicts each (`best_windows`
  over only the windows that can hold it: consecutive, at most ceil(size /
  stride)).

  Example:
    >>> best_window(np.arange(10), np.full(10, 10), 4, 3).tolist()
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
  """
  lowest = xp.maximum((piece - size) // stride + 1, 0)
  k = lowest[:, None] + xp.arange(-(-size // stride))[None, :]
  start = window_start(k, stride)
  end = window_end(start, n_pieces[:, None], size, xp)
  p = piece[:, None]
  holds = ((k < window_count(n_pieces, size, stride, xp)[:, None])
           & (start <= p) & (p < end))
  return lowest + most_context(
      xp.where(holds, context(p, start, end, xp), -1), xp)


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
  starts = [window_start(k, stride)
            for k in range(int(window_count(n_pieces, size, stride)))]
  return [(s, int(window_end(s, n_pieces, size))) for s in starts]


def context_of(piece: int, span: Tuple[int, int]) -> int:
  """`context` of `piece` in window `span`.

  Example:
    >>> context_of(5, (3, 7))
    1
  """
  return int(context(piece, *span))


def best_windows(spans: List[Tuple[int, int]], n_pieces: int) -> List[int]:
  """For each piece, the index of the window that predicts it.

  Example:
    >>> best_windows([(0, 4), (3, 7), (6, 10)], 10)
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
  """
  start, end = np.array(spans, np.int64).reshape(-1, 2).T
  p = np.arange(n_pieces)[:, None]
  holds = (start <= p) & (p < end)
  return most_context(np.where(holds, context(p, start, end), -1)).tolist()
