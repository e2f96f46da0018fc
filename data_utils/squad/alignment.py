"""SQuAD: the paragraph's pieces mapped back to its raw characters.

The original maps SentencePiece pieces back to the raw paragraph with a
banded LCS between the raw characters and the pieces' characters. The same
DP, tie-breaking and fallbacks (`_convert_index`) are computed here, with the
inner loop in plain lists, once per paragraph instead of once per question
(the original's main cost).

Answers inside a piece: the original can only point at whole pieces, so an
answer that begins or ends inside one ("8" in "▁18", "5" in "▁$5") is
snapped to the whole piece. By default pieces are split where the character
class changes (digit / letter / other) and between digits
(`split_piece_classes`), identically at training and evaluation time, so
such answers become whole pieces without looking at the answer. Splitting
digits is what matters for the official metrics (their normalization already
ignores punctuation; SentencePiece already cuts "1990s" before the "s");
`split_digits=False` keeps numbers whole (class changes only) and
`original_piece_snapping=True` keeps the original pieces (see
`features.FeatureSettings`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Optional, Sequence, Tuple

from data_utils.tokenization import SPIECE_UNDERLINE, UNK_ID, preprocess_text


def char_class(ch: str) -> int:
  """0 digit, 1 letter, 2 anything else.

  Example:
    >>> [char_class(c) for c in "8a,"]
    [0, 1, 2]
  """
  if ch.isdigit():
    return 0
  if ch.isalpha():
    return 1
  return 2


def class_runs(text: str, split_digits: bool = False) -> List[str]:
  """`text` cut where the character class changes (and between digits with
  `split_digits`).

  Example:
    >>> class_runs("1990s")
    ['1990', 's']
    >>> class_runs("$5.2bn")
    ['$', '5', '.', '2', 'bn']
    >>> class_runs("18th", split_digits=True)
    ['1', '8', 'th']
  """
  runs: List[str] = []
  for ch in text:
    cls = char_class(ch)
    if runs and char_class(runs[-1][-1]) == cls and not (
        split_digits and cls == 0):
      runs[-1] += ch
    else:
      runs.append(ch)
  return runs


def split_piece_classes(pieces: Sequence[str], encode, piece_id,
                        split_digits: bool = False) -> List[str]:
  """Splits every piece whose text changes character class inside
  (`class_runs`); each run is re-encoded with `encode` (text -> pieces) and
  only the piece's own leading "▁" opens a word. A sub-piece missing from the
  vocabulary (`piece_id(p) == UNK_ID`) falls back to its characters. The
  characters (so the alignment to the paragraph) do not change.

  Example (toy encoder: one piece per run, with the dummy "▁"):
    >>> split_piece_classes(["▁in", "▁1990s", ","],
    ...                     lambda t: ["▁" + t], lambda p: 7)
    ['▁in', '▁1990', 's', ',']
  """
  out: List[str] = []
  for piece in pieces:
    opens = piece.startswith(SPIECE_UNDERLINE)
    body = piece[1:] if opens else piece
    if body.isalpha() or (body.isdigit() and not split_digits):
      out.append(piece)   # the common case: one class
      continue
    runs = class_runs(body, split_digits)
    if len(runs) < 2:
      out.append(piece)
      continue
    for r, run in enumerate(runs):
      sub = list(encode(run))
      # The encoder adds a dummy "▁" that only the first run may keep.
      if sub and sub[0].startswith(SPIECE_UNDERLINE) and not (r == 0 and
                                                             opens):
        sub = sub[1:] if sub[0] == SPIECE_UNDERLINE else [sub[0][1:]] + \
            sub[1:]
      if r == 0 and opens and not (sub and sub[0].startswith(
          SPIECE_UNDERLINE)):
        sub = [SPIECE_UNDERLINE] + sub
      for p in sub:
        if piece_id(p) == UNK_ID and len(p) > 1:
          out.extend(c for c in p)
        else:
          out.append(p)
  return out


def _banded_lcs(a: Sequence[str], b: str, max_dist: int
                ) -> Tuple[int, List[bytearray]]:
  """The original `_lcs_match`: LCS of `a` (one normalized string per raw
  character) and `b` restricted to `i - max_dist <= j < i + max_dist`,
  cells outside the band counting 0. Returns f[N-1, M-1] and the moves
  (per row, indexed by `j - i + max_dist`): 0 up, 1 left, 2 match, 3 none.
  Ties go as in the original: match only if strictly better than up and
  left, left only if strictly better than up.
  """
  n, m, width = len(a), len(b), 2 * max_dist
  prev = [0] * (width + 1)
  moves: List[bytearray] = []
  for i in range(n):
    cur = [0] * (width + 1)
    row = bytearray(b"\x03" * width)
    ai = a[i]
    base = i - max_dist
    lo, hi = max(0, -base), min(width, m - base)
    # Unwritten cells are 0, like the cells outside the band, so the left
    # neighbour is a running value and f[i-1, j-1] at j = 0 reads 0.
    left = 0
    for k, bj in zip(range(lo, hi), b[base + lo:base + hi]):
      if i:
        v, c = prev[k + 1], 0
      else:
        v, c = 0, 3
      if left > v:
        v, c = left, 1
      if ai == bj and prev[k] + 1 > v:
        v, c = prev[k] + 1, 2
      cur[k] = left = v
      row[k] = c
    moves.append(row)
    prev = cur
  last = (m - 1) - (n - 1 - max_dist)
  return (prev[last] if n and m and 0 <= last < width else 0), moves


def _convert_index(index: Sequence[Optional[int]], pos: int,
                   limit: Optional[int] = None, is_start: bool = True
                   ) -> Optional[int]:
  """The original's fallback for an unmatched position: the nearest matched
  neighbours decide (start: just after the previous match; end: just before
  the next). None when nothing is matched.

  Example:
    >>> _convert_index([0, None, 5], 1), _convert_index([0, None, 5], 1,
    ...                                                 is_start=False)
    (1, 4)
  """
  if index[pos] is not None:
    return index[pos]
  n = len(index)
  rear = pos
  while rear < n - 1 and index[rear] is None:
    rear += 1
  front = pos
  while front > 0 and index[front] is None:
    front -= 1
  before, after = index[front], index[rear]   # the nearest matches, or None
  if before is None and after is None:
    return None
  if before is None:   # nothing matched on the left
    if after >= 1:
      return 0 if is_start else after - 1
    return after
  if after is None:    # nothing matched on the right
    if limit is not None and before < limit - 1:
      return before + 1 if is_start else limit - 1
    return before
  if after > before + 1:   # a gap between the two: the inside of it
    return before + 1 if is_start else after - 1
  return after if is_start else before


@dataclasses.dataclass
class ParagraphAlignment:
  """A paragraph's pieces and their raw-character spans (inclusive)."""
  pieces: List[str]
  ids: List[int]
  tok_start_to_orig: List[int]
  tok_end_to_orig: List[int]
  orig_to_chartok: List[Optional[int]]
  chartok_to_tok: List[int]

  def answer_pieces(self, start: int, text: str
                    ) -> Optional[Tuple[int, int]]:
    """First and last piece of the answer at character `start` (the
    original's mapping); None if it cannot be placed."""
    end = start + len(text) - 1
    s = _convert_index(self.orig_to_chartok, start, is_start=True)
    e = _convert_index(self.orig_to_chartok, end, is_start=False)
    if s is None or e is None:
      return None
    ts, te = self.chartok_to_tok[s], self.chartok_to_tok[e]
    return (ts, te) if ts <= te else None


@functools.lru_cache(maxsize=64)
def _char_alignment(paragraph: str, cat: str, lower: bool):
  """`(orig_to_chartok, chartok_to_orig)` of the original's LCS, or None on
  a mismatch. Cached: pieces split differently (`split_piece_classes`) have
  the same characters, so both settings share one alignment."""
  n, m = len(paragraph), len(cat)
  if not n or not m:
    return None
  cache: Dict[str, str] = {}
  norm = []
  for ch in paragraph:
    if ch not in cache:
      cache[ch] = preprocess_text(ch, lower=lower, remove_space=False)
    norm.append(cache[ch])
  max_dist = abs(n - m) + 5
  for _ in range(2):
    score, moves = _banded_lcs(norm, cat, max_dist)
    if score > 0.8 * n:
      break
    max_dist *= 2
  orig_to_chartok: List[Optional[int]] = [None] * n
  chartok_to_orig: List[Optional[int]] = [None] * m
  i, j = n - 1, m - 1
  while i >= 0 and j >= 0:
    k = j - i + max_dist
    if not 0 <= k < 2 * max_dist or moves[i][k] == 3:
      break
    move = moves[i][k]
    if move == 2:
      orig_to_chartok[i] = j
      chartok_to_orig[j] = i
      i, j = i - 1, j - 1
    elif move == 1:
      j -= 1
    else:
      i -= 1
  if score < 0.8 * n or all(v is None for v in orig_to_chartok):
    return None
  return tuple(orig_to_chartok), tuple(chartok_to_orig)


def align_paragraph(paragraph: str, pieces: List[str], ids: List[int],
                    lower: bool = False) -> Optional[ParagraphAlignment]:
  """Maps pieces to raw characters as the original; None when the texts
  disagree too much (the original's "MISMATCH DETECTED", < 80% matched)."""
  chartok_to_tok: List[int] = []
  starts, ends = [], []
  count = 0
  for t, piece in enumerate(pieces):
    chartok_to_tok.extend([t] * len(piece))
    starts.append(count)
    count += len(piece)
    ends.append(count - 1)
  cat = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
  matched = _char_alignment(paragraph, cat, lower)
  if matched is None:
    return None
  orig_to_chartok, chartok_to_orig = matched
  n = len(paragraph)
  tok_start, tok_end = [], []
  for s, e in zip(starts, ends):
    tok_start.append(_convert_index(chartok_to_orig, s, n, is_start=True))
    tok_end.append(_convert_index(chartok_to_orig, e, n, is_start=False))
  return ParagraphAlignment(list(pieces), list(ids), tok_start, tok_end,
                            list(orig_to_chartok), chartok_to_tok)
