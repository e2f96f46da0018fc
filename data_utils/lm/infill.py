"""Texts with holes to fill: parsing `<mask>` pieces and character spans,
turning them into token ids with the hole positions, and writing the fills
back into the text.

A hole is a character span `[start, end)` of the original text plus the
number of pieces to fill it with:
  - `<mask>` pieces: each run of directly adjacent `<mask>` markers is one
    hole of as many pieces as markers (`"a <mask><mask> b"`: one hole of 2);
  - character spans `[start, end]` or `[start, end, pieces]`: the span's
    text is removed and filled with `pieces` pieces (default: as many as the
    span's own text has); `start == end` with `pieces` inserts.
The text between holes is tokenized segment by segment; a segment that
directly continues a hole (no space between) does not open a new word.

`encode(tokenizer, item)` -> `(ids [n], holes [[positions of hole h]])`,
`fill_text(item, fills)` -> the original text with hole h replaced by
`fills[h]`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from data_utils.errors import UserError
from data_utils.text_inputs import file_format, read_all, script_spec
from data_utils.tokenization import MASK_ID, SPIECE_UNDERLINE, UNK_ID

MASK_TOKEN = "<mask>"
NO_MASK = f"no {MASK_TOKEN} marker"
_MASK_RUN = re.compile(f"(?:{re.escape(MASK_TOKEN)})+")


@dataclass(frozen=True)
class Hole:
  start: int  # characters of the original text
  end: int
  pieces: Optional[int] = None  # None: as many as text[start:end] has


@dataclass
class InfillText:
  text: str
  holes: List[Hole] = field(default_factory=list)


def parse_masks(text: str) -> InfillText:
  """The holes `<mask>` markers make.

  Example:
    >>> parse_masks("The <mask> sat on <mask><mask>.").holes
    [Hole(start=4, end=10, pieces=1), Hole(start=18, end=30, pieces=2)]
  """
  holes = [Hole(m.start(), m.end(), (m.end() - m.start()) // len(MASK_TOKEN))
           for m in _MASK_RUN.finditer(text)]
  return InfillText(text, holes)


def parse_spans(text: str, spans, where: str = "spans") -> InfillText:
  """Holes from character spans (`[start, end]` or `[start, end, pieces]`),
  checked: in range, ordered, not overlapping; a UserError names `where`.

  Example:
    >>> parse_spans("The cat sat", [[4, 7], [11, 11, 2]]).holes
    [Hole(start=4, end=7, pieces=None), Hole(start=11, end=11, pieces=2)]
    >>> parse_spans("The cat", [[5, 3]])
    Traceback (most recent call last):
    ...
    data_utils.errors.UserError: spans: [5, 3]: start after end
  """
  if not isinstance(spans, list):
    raise UserError(f"{where}: must be a list of [start, end] or "
                    "[start, end, pieces]")
  holes, last_end = [], 0
  for span in spans:
    if (not isinstance(span, (list, tuple)) or len(span) not in (2, 3)
        or not all(isinstance(v, int) and not isinstance(v, bool)
                   for v in span)):
      raise UserError(f"{where}: {json.dumps(span)}: not [start, end] or "
                      "[start, end, pieces] (integers)")
    shown = json.dumps(list(span))
    start, end = span[0], span[1]
    pieces = span[2] if len(span) == 3 else None
    if start < 0 or end > len(text):
      raise UserError(f"{where}: {shown}: outside the text (0..{len(text)})")
    if start > end:
      raise UserError(f"{where}: {shown}: start after end")
    if pieces is not None and pieces < 1:
      raise UserError(f"{where}: {shown}: pieces must be at least 1")
    if start == end and pieces is None:
      raise UserError(f"{where}: {shown}: an empty span needs a number of "
                      "pieces")
    if start < last_end:
      raise UserError(f"{where}: {shown}: overlaps or precedes the span "
                      "before it (spans go left to right)")
    holes.append(Hole(start, end, pieces))
    last_end = end
  return InfillText(text, holes)


def parse_span_flag(value: str) -> List[List[int]]:
  """`"4:7,11:11:2"` -> `[[4, 7], [11, 11, 2]]`.

  Example:
    >>> parse_span_flag("4:7, 11:11:2")
    [[4, 7], [11, 11, 2]]
  """
  spans = []
  for part in value.split(","):
    fields = part.strip().split(":")
    if len(fields) not in (2, 3) or not all(
        f.strip().lstrip("-").isdigit() for f in fields):
      raise UserError(f"--spans={value}: {part.strip()!r} is not start:end "
                      "or start:end:pieces")
    spans.append([int(f) for f in fields])
  return spans


def _continuation(tokenizer, pieces: List[str]) -> List[str]:
  """Drops the word start SentencePiece puts before a segment that directly
  continues a hole (where the vocabulary has the bare piece)."""
  if not pieces or not pieces[0].startswith(SPIECE_UNDERLINE):
    return pieces
  if pieces[0] == SPIECE_UNDERLINE:
    return pieces[1:]
  bare = pieces[0][len(SPIECE_UNDERLINE):]
  if tokenizer.sp.PieceToId(bare) != UNK_ID:
    return [bare] + pieces[1:]
  return pieces


def encode(tokenizer, item: InfillText) -> Tuple[List[int], List[List[int]]]:
  """`(ids, holes)`: the text's ids with `MASK_ID` at the holes, and per
  hole the positions it covers (in `ids`)."""
  ids: List[int] = []
  holes: List[List[int]] = []
  cursor = 0
  for h, hole in enumerate(item.holes):
    ids += _segment_ids(tokenizer, item, cursor, hole.start, h > 0)
    n = hole.pieces
    if n is None:
      n = max(len(tokenizer.encode_ids(item.text[hole.start:hole.end])), 1)
    holes.append(list(range(len(ids), len(ids) + n)))
    ids += [MASK_ID] * n
    cursor = hole.end
  ids += _segment_ids(tokenizer, item, cursor, len(item.text),
                      bool(item.holes))
  return ids, holes


def _segment_ids(tokenizer, item: InfillText, start: int, end: int,
                 after_hole: bool) -> List[int]:
  segment = item.text[start:end]
  pieces = tokenizer.encode_pieces(segment)
  if after_hole and segment and not segment[0].isspace():
    pieces = _continuation(tokenizer, pieces)
  return [tokenizer.sp.PieceToId(p) for p in pieces]


def fill_text(item: InfillText, fills: Sequence[Sequence[str]]) -> str:
  """The original text with hole h replaced by the text of its pieces
  `fills[h]` (a word-opening first piece gets a space when the text before
  the hole does not end in one; no space doubles one beside the hole).

  Example:
    >>> item = parse_masks("The<mask> sat on the <mask>.")
    >>> fill_text(item, [["\u2581cat"], ["\u2581m", "at"]])
    'The cat sat on the mat.'
    >>> fill_text(parse_masks("and <mask> go"), [["\u2581the", "\u2581"]])
    'and the go'
  """
  out, cursor = [], 0
  for hole, pieces in zip(item.holes, fills):
    out.append(item.text[cursor:hole.start])
    words = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    before, after = item.text[:hole.start], item.text[hole.end:]
    if not before or before[-1].isspace():
      words = words.lstrip(" ")
    if not after or after[0].isspace():
      words = words.rstrip(" ")
    out.append(words)
    cursor = hole.end
  out.append(item.text[cursor:])
  return "".join(out)


def read_infill_file(path: str, column: Optional[str] = None
                     ) -> List[InfillText]:
  """Texts to fill from `path` (read as every script's input is,
  `data_utils.text_inputs.read_all`): lines / a TSV or CSV column / a
  JSONL field with `<mask>` markers; a JSONL row may instead give
  `"spans"` (character spans of its text). Each text needs a hole. Errors
  name the file and line."""
  items = []
  for row in read_all(path, script_spec(column), keep=("spans",)):
    where = f"{path}:{row.line}"
    text = row.fields["text"]
    if "spans" in row.fields:
      item = parse_spans(text, row.fields["spans"], f"{where}: spans")
      items.append(require_holes(item, where, "its spans are []"))
    elif file_format(path) == "jsonl":
      items.append(require_holes(parse_masks(text), where,
                                 f"{NO_MASK}, no spans"))
    else:
      items.append(require_holes(parse_masks(text), where))
  return items


def require_holes(item: InfillText, where: str, why: str = NO_MASK
                  ) -> InfillText:
  """`item`, unless it has no hole: a text filled with nothing comes back
  unchanged, surely not what was asked (UserError naming `where`, `why`:
  what it lacks).

  Example:
    >>> require_holes(parse_masks("No hole."), "in.txt:3")
    Traceback (most recent call last):
    ...
    data_utils.errors.UserError: in.txt:3: nothing to fill (no <mask> marker)
  """
  if not item.holes:
    raise UserError(f"{where}: nothing to fill ({why})")
  return item
