"""SQuAD v1.1 / v2.0: reader, paragraph alignment, features, cached records.

Reader: the official JSON (`data[].paragraphs[].{context, qas[]}`, each qa
with `id`, `question`, `answers[{text, answer_start}]` and, in v2.0,
`is_impossible`). One `SquadExample` per question; training positions come
from the first listed answer, every answer text is kept for evaluation.
Malformed files raise `SquadDataError` (one line naming the file and what is
wrong).

Features, as the original `run_squad.py` builds them:
  `P <sep> Q <sep> <cls>` then RIGHT padding to `max_seq_length`
  input_ids      [L] int   pad id 0
  input_mask     [L] float 1 = padding, 0 = real token
  segment_ids    [L] int   P (and its <sep>) 0, Q (and its <sep>) 1,
                           <cls> 2, padding 3
  p_mask         [L] float 1 = may NOT be an answer boundary (<sep>,
                           question, padding); paragraph and <cls> are 0
  cls_index      []  int   position of <cls> (not the last position)
  start_positions, end_positions [] int  answer pieces inside the window,
                           `cls_index` for impossible / out-of-window
  is_impossible  []  float 1 = no answer in this window
The paragraph is cut into windows of `max_seq_length - len(Q) - 3` pieces,
`doc_stride` apart; the question keeps its first `max_query_length` pieces.
Each feature also carries what postprocessing needs: the paragraph character
span of every window piece and whether the window is the piece's "max
context" window.

Alignment: the original maps SentencePiece pieces back to the raw paragraph
with a banded LCS between the raw characters and the pieces' characters. The
same DP, tie-breaking and fallbacks (`_convert_index`) are computed here,
with the inner loop in plain lists, once per paragraph instead of once per
question (the original's main cost).

Answers inside a piece: the original can only point at whole pieces, so an
answer that begins or ends inside one ("8" in "▁18", "5" in "▁$5") is
snapped to the whole piece. By default pieces are split where the character
class changes (digit / letter / other) and between digits
(`split_piece_classes`), identically at training and evaluation time, so
such answers become whole pieces without looking at the answer. Splitting
digits is what matters for the official metrics (their normalization already
ignores punctuation; SentencePiece already cuts "1990s" before the "s");
`split_digits=False` keeps numbers whole (class changes only) and
`original_piece_snapping=True` keeps the original pieces.

Records: TFRecords in `output_dir` named by a hash of every setting that
shapes them, written to a temp file then renamed, with a `.json` info file
(settings, counts, alignment statistics).
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from absl import logging

from data_utils.atomic import atomic_path, write_json
from data_utils.errors import UsageError, UserError, read_json
from data_utils.progress import Progress
from data_utils.tokenization import (CLS_ID, SEP_ID, SPIECE_UNDERLINE,
                                     UNK_ID, preprocess_text)

SEG_ID_P, SEG_ID_Q, SEG_ID_CLS, SEG_ID_PAD = 0, 1, 2, 3
FIRST_UNIQUE_ID = 1000000000
FORMAT = "xlnet-tf/squad/v1"


class SquadDataError(UserError):
  """A SQuAD file cannot be used; the message names the file and the fault."""


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question_text: str
  paragraph_text: str
  paragraph_index: int              # paragraphs are aligned once, by index
  answers: List[str]                # every gold text (evaluation)
  orig_answer_text: str = ""        # first answer: training positions
  start_position: int = -1          # its character offset, -1 = none
  is_impossible: bool = False


@dataclasses.dataclass
class SquadData:
  path: str
  version: str                      # "1.1" or "2.0" (which official metric)
  examples: List[SquadExample]
  labeled: bool = True              # every question has answers or is
                                    # marked impossible: metrics apply

  def gold(self) -> Dict[str, List[str]]:
    """Question id -> gold texts ([] = no answer), for the metrics."""
    return {e.qas_id: [] if e.is_impossible else list(e.answers)
            for e in self.examples}


# Reader ---------------------------------------------------------------------
def _require(cond: bool, path: str, where: str, what: str) -> None:
  if not cond:
    raise SquadDataError(f"{path}: {where}: {what}")


def read_squad(path: str, is_training: bool = False) -> SquadData:
  """Questions of a SQuAD v1.1 / v2.0 file, in file order.

  `is_training` requires an answer for every question not marked
  `is_impossible`; otherwise a question without either leaves the file
  `labeled=False` (predictions only).
  """
  if not os.path.isfile(path):
    raise SquadDataError(f"{path}: no such file")
  raw = read_json(path, SquadDataError)
  if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
    raise SquadDataError(f"{path}: expected a JSON object with a 'data' list "
                         "of articles (the SQuAD layout)")
  examples: List[SquadExample] = []
  labeled = True
  v2 = str(raw.get("version", "")).lstrip("v").startswith("2")
  n_paragraph = 0
  seen_ids = set()
  mismatched: List[str] = []   # ids of answers not found at answer_start
  for a, article in enumerate(raw["data"]):
    _require(isinstance(article, dict) and
             isinstance(article.get("paragraphs"), list), path,
             f"article {a}", "expected an object with a 'paragraphs' list")
    for p, para in enumerate(article["paragraphs"]):
      where = f"article {a} paragraph {p}"
      _require(isinstance(para, dict) and isinstance(para.get("context"), str)
               and isinstance(para.get("qas"), list), path, where,
               "expected an object with 'context' (string) and 'qas' (list)")
      context = para["context"]
      for q, qa in enumerate(para["qas"]):
        qwhere = f"{where} question {q}"
        _require(isinstance(qa, dict), path, qwhere, "expected an object")
        for key, kind in (("id", str), ("question", str), ("answers", list)):
          _require(isinstance(qa.get(key), kind), path, qwhere,
                   f"missing or bad '{key}' (expected {kind.__name__})")
        # Predictions and metrics are keyed by id: a repeat would be lost.
        _require(qa["id"] not in seen_ids, path, qwhere,
                 f"duplicate question id {qa['id']!r} (ids must be unique)")
        seen_ids.add(qa["id"])
        qwhere = f"question {qa['id']}"
        texts, starts = [], []
        for answer in qa["answers"]:
          _require(isinstance(answer, dict) and
                   isinstance(answer.get("text"), str) and
                   isinstance(answer.get("answer_start"), int), path, qwhere,
                   "an answer needs 'text' (string) and 'answer_start' (int)")
          start, text = answer["answer_start"], answer["text"]
          _require(0 <= start and start + len(text) <= len(context), path,
                   qwhere, f"answer_start {start} + {len(text)} characters "
                   f"is outside its context ({len(context)} characters)")
          if context[start:start + len(text)] != text:
            mismatched.append(qa["id"])
          texts.append(text)
          starts.append(start)
        if "is_impossible" in qa:
          v2 = True
        impossible = bool(qa.get("is_impossible", False))
        if not texts and not impossible:
          if is_training:
            raise SquadDataError(f"{path}: {qwhere}: no answer and not "
                                 "marked is_impossible")
          labeled = False   # a question to answer, nothing to score
        example = SquadExample(qa["id"], qa["question"], context, n_paragraph,
                               texts, is_impossible=impossible)
        if texts and not impossible:
          example.orig_answer_text, example.start_position = texts[0], \
              starts[0]
        examples.append(example)
      n_paragraph += 1
  if is_training and not examples:
    raise SquadDataError(f"{path}: no question")
  if mismatched:
    # Training positions come from answer_start: a shifted offset trains on
    # the wrong span. Counted, not fatal: the text still scores predictions.
    first = list(dict.fromkeys(mismatched))[:3]
    logging.warning("%s: %d answers do not match the context at "
                    "answer_start (first: %s)", path, len(mismatched),
                    ", ".join(first))
  return SquadData(path, "2.0" if v2 else "1.1", examples, labeled)


# Pieces ---------------------------------------------------------------------
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


# Alignment ------------------------------------------------------------------
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
  if index[front] is None and index[rear] is None:
    return None
  if index[front] is None:
    if index[rear] >= 1:
      return 0 if is_start else index[rear] - 1
    return index[rear]
  if index[rear] is None:
    if limit is not None and index[front] < limit - 1:
      return index[front] + 1 if is_start else limit - 1
    return index[front]
  if is_start:
    return index[front] + 1 if index[rear] > index[front] + 1 else \
        index[rear]
  return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]


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


# Features -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FeatureSettings:
  """Everything that shapes a feature (and so keys the record cache)."""
  max_seq_length: int = 512
  doc_stride: int = 128
  max_query_length: int = 64
  uncased: bool = False
  original_piece_snapping: bool = False   # wins over split_digits
  split_digits: bool = True

  def validate(self) -> None:
    """UsageError naming the flags when no window could hold a question
    and a paragraph piece."""
    for flag in ("max_query_length", "doc_stride"):
      if getattr(self, flag) < 1:
        raise UsageError(f"--{flag}={getattr(self, flag)}: must be at "
                         "least 1")
    least = self.max_query_length + 4
    if self.max_seq_length < least:
      raise UsageError(
          f"--max_seq_length={self.max_seq_length}: must be at least "
          f"{least} with --max_query_length={self.max_query_length} (the "
          "question, <sep> <sep> <cls> and one paragraph piece)")


@dataclasses.dataclass
class SquadFeature:
  """One window: unpadded `P <sep> Q <sep> <cls>` ids and what
  postprocessing needs. `arrays()` gives the padded model features."""
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[int]
  paragraph_len: int
  tok_start_to_orig_index: List[int]
  tok_end_to_orig_index: List[int]
  token_is_max_context: List[bool]   # per paragraph piece of the window
  start_position: int
  end_position: int
  is_impossible: bool

  @property
  def cls_index(self) -> int:
    return len(self.tokens) - 1

  def arrays(self, max_seq_length: int) -> dict:
    n, p = len(self.tokens), self.paragraph_len
    pad = max_seq_length - n
    q = n - p - 3
    return {
        "input_ids": self.tokens + [0] * pad,
        "input_mask": [0.0] * n + [1.0] * pad,
        "segment_ids": [SEG_ID_P] * (p + 1) + [SEG_ID_Q] * (q + 1) +
                       [SEG_ID_CLS] + [SEG_ID_PAD] * pad,
        "p_mask": [0.0] * p + [1.0] * (q + 2) + [0.0] + [1.0] * pad,
        "cls_index": n - 1,
    }


def doc_spans(n_tokens: int, max_tokens: int, stride: int
              ) -> List[Tuple[int, int]]:
  """`(start, length)` windows as the original: `max_tokens` long, starts
  `min(length, stride)` apart, the last one ends the paragraph.

  Example:
    >>> doc_spans(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
  """
  spans = []
  start = 0
  while start < n_tokens:
    length = min(n_tokens - start, max_tokens)
    spans.append((start, length))
    if start + length == n_tokens:
      break
    start += min(length, stride)
  return spans


def max_context_flags(spans: List[Tuple[int, int]], index: int
                      ) -> List[bool]:
  """Whether window `index` is each of its pieces' "max context" window:
  the one maximizing min(left, right context) + 0.01 * window length (first
  such window on ties), as the original `_check_is_max_context`.

  Example:
    >>> max_context_flags([(0, 4), (2, 4)], 0)
    [True, True, True, False]
  """
  start, length = spans[index]
  if len(spans) == 1:
    return [True] * length
  flags = []
  for position in range(start, start + length):
    best, best_index = None, None
    for s, (s_start, s_len) in enumerate(spans):
      end = s_start + s_len - 1
      if not s_start <= position <= end:
        continue
      score = min(position - s_start, end - position) + 0.01 * s_len
      if best is None or score > best:
        best, best_index = score, s
    flags.append(best_index == index)
  return flags


@dataclasses.dataclass
class FeatureStats:
  examples: int = 0
  features: int = 0
  unaligned_paragraphs: int = 0     # whole paragraphs the original drops
  unaligned_examples: int = 0       # questions lost with them
  unaligned_answers: int = 0        # answers mapped to no piece span
  snapped_answers: int = 0          # answer span != its pieces' span
  truncated_questions: int = 0

  def add(self, other: "FeatureStats") -> None:
    for f in dataclasses.fields(self):
      setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Featurizer:
  """Builds the features of the questions of one paragraph at a time."""

  def __init__(self, tokenizer, settings: FeatureSettings):
    settings.validate()
    self.tok = tokenizer
    self.settings = settings

  def paragraph_pieces(self, text: str) -> List[str]:
    pieces = self.tok.encode_pieces(text)
    if not self.settings.original_piece_snapping:
      sp = self.tok.sp
      pieces = split_piece_classes(pieces, sp.EncodeAsPieces, sp.PieceToId,
                                   self.settings.split_digits)
    return pieces

  def align(self, text: str) -> Optional[ParagraphAlignment]:
    pieces = self.paragraph_pieces(text)
    ids = [self.tok.sp.PieceToId(p) for p in pieces]
    return align_paragraph(text, pieces, ids, lower=self.settings.uncased)

  def paragraph_features(self, examples: Sequence[Tuple[int, SquadExample]],
                         is_training: bool
                         ) -> Tuple[List[SquadFeature], FeatureStats]:
    """Features of `(example_index, example)` pairs sharing one paragraph;
    unique ids are left 0 (assigned in order by the caller)."""
    s = self.settings
    stats = FeatureStats(examples=len(examples))
    out: List[SquadFeature] = []
    if not examples:
      return out, stats
    align = self.align(examples[0][1].paragraph_text)
    if align is None:
      stats.unaligned_paragraphs = 1
      stats.unaligned_examples = len(examples)
      logging.warning("paragraph of question %s: pieces do not align with "
                      "the text; its %d questions get no feature",
                      examples[0][1].qas_id, len(examples))
      return out, stats
    n_doc = len(align.ids)
    for example_index, example in examples:
      query = self.tok.encode_ids(example.question_text)
      if len(query) > s.max_query_length:
        query = query[:s.max_query_length]
        stats.truncated_questions += 1
      answer = None
      if not example.is_impossible and example.start_position >= 0:
        answer = align.answer_pieces(example.start_position,
                                     example.orig_answer_text)
        if answer is None:
          stats.unaligned_answers += 1
          logging.warning("question %s: answer %r maps to no piece span",
                          example.qas_id, example.orig_answer_text)
          if is_training:
            continue   # counted; no position to learn from
        else:
          a_start = align.tok_start_to_orig[answer[0]]
          a_end = align.tok_end_to_orig[answer[1]]
          gold_end = example.start_position + len(example.orig_answer_text)
          if (a_start, a_end + 1) != (example.start_position, gold_end):
            covered = example.paragraph_text[a_start:a_end + 1].strip()
            if covered != example.orig_answer_text.strip():
              stats.snapped_answers += 1
      spans = doc_spans(n_doc, s.max_seq_length - len(query) - 3,
                        s.doc_stride)
      for span_index, (start, length) in enumerate(spans):
        tokens = align.ids[start:start + length] + [SEP_ID] + query + \
            [SEP_ID, CLS_ID]
        cls_index = len(tokens) - 1
        impossible = example.is_impossible or answer is None
        if answer is not None and not (start <= answer[0] and
                                       answer[1] <= start + length - 1):
          impossible = True
        if impossible:
          positions = (cls_index, cls_index)
        else:
          positions = (answer[0] - start, answer[1] - start)
        out.append(SquadFeature(
            0, example_index, span_index, tokens, length,
            align.tok_start_to_orig[start:start + length],
            align.tok_end_to_orig[start:start + length],
            max_context_flags(spans, span_index), positions[0],
            positions[1], impossible))
    stats.features = len(out)
    return out, stats


def group_by_paragraph(examples: Sequence[SquadExample]
                       ) -> List[List[Tuple[int, SquadExample]]]:
  groups: Dict[Tuple[int, str], List[Tuple[int, SquadExample]]] = {}
  for index, example in enumerate(examples):
    key = (example.paragraph_index, example.paragraph_text)
    groups.setdefault(key, []).append((index, example))
  return list(groups.values())


_WORKER: Optional[Featurizer] = None


def _worker_init(sp_path: str, settings: FeatureSettings) -> None:
  global _WORKER
  from data_utils.tokenization import SentencePieceTokenizer
  _WORKER = Featurizer(SentencePieceTokenizer(sp_path, lower=settings.uncased),
                       settings)


_PACKED = ("tokens", "tok_start_to_orig_index", "tok_end_to_orig_index",
           "token_is_max_context")


def _worker_run(job):
  groups, is_training = job
  feats, stats = [], FeatureStats()
  for group in groups:
    f, s = _WORKER.paragraph_features(group, is_training)
    feats.extend(f)
    stats.add(s)
  # Int lists travel back as machine arrays: pickling millions of Python
  # ints costs more than building them.
  for f in feats:
    for name in _PACKED:
      setattr(f, name, array.array("i", getattr(f, name)))
  return feats, stats


def _unpack(feature: SquadFeature) -> SquadFeature:
  for name in _PACKED:
    setattr(feature, name, getattr(feature, name).tolist())
  feature.token_is_max_context = [bool(x) for x in
                                  feature.token_is_max_context]
  return feature


def assign_unique_ids(features: List[SquadFeature]) -> None:
  """Sorts features by (example, window) and numbers them from
  `FIRST_UNIQUE_ID`, as the original."""
  features.sort(key=lambda f: (f.example_index, f.doc_span_index))
  for k, feature in enumerate(features):
    feature.unique_id = FIRST_UNIQUE_ID + k


@contextlib.contextmanager
def _main_hidden():
  """Spawned children re-import the parent's `__main__` (an entry script
  that imports TensorFlow: seconds per worker). The workers only need this
  module, so the script is hidden from them while the pool starts."""
  main = sys.modules.get("__main__")
  saved = {k: getattr(main, k) for k in ("__file__", "__spec__")
           if main is not None and hasattr(main, k)}
  try:
    for k in saved:
      setattr(main, k, None) if k == "__spec__" else delattr(main, k)
    yield
  finally:
    for k, v in saved.items():
      setattr(main, k, v)


def convert_examples(examples: Sequence[SquadExample], tokenizer,
                     settings: FeatureSettings, is_training: bool,
                     num_proc: int = 1, what: str = "squad features"
                     ) -> Tuple[List[SquadFeature], FeatureStats]:
  """Features of every example, in example order, with unique ids from
  1000000000. `num_proc > 1` spreads paragraphs over a process pool."""
  groups = group_by_paragraph(examples)
  progress = Progress(what, total=len(examples), unit="questions")
  features: List[SquadFeature] = []
  stats = FeatureStats()
  if num_proc > 1 and len(groups) > 1:
    import multiprocessing
    n_jobs = min(len(groups), num_proc * 8)
    jobs = [(groups[k::n_jobs], is_training) for k in range(n_jobs)]
    # Spawned (not forked) workers: the parent may run TensorFlow threads.
    ctx = multiprocessing.get_context("spawn")
    with _main_hidden():
      pool = ctx.Pool(num_proc, _worker_init,
                      (tokenizer.model_path, settings))
    with pool:
      for feats, s in pool.imap_unordered(_worker_run, jobs):
        features.extend(_unpack(f) for f in feats)
        stats.add(s)
        progress.update(s.examples)
  else:
    featurizer = Featurizer(tokenizer, settings)
    for group in groups:
      feats, s = featurizer.paragraph_features(group, is_training)
      features.extend(feats)
      stats.add(s)
      progress.update(s.examples)
  assign_unique_ids(features)
  progress.finish()
  if stats.unaligned_examples or stats.unaligned_answers:
    logging.warning("%s: %d questions in %d unaligned paragraphs, %d "
                    "unaligned answers", what, stats.unaligned_examples,
                    stats.unaligned_paragraphs, stats.unaligned_answers)
  logging.info("%s: %s", what, dataclasses.asdict(stats))
  return features, stats


# Records --------------------------------------------------------------------
def feature_file(output_dir: str, settings: dict) -> str:
  """`output_dir/squad.<split>.len-<n>.<hash>.tf_record` for settings."""
  key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
  return os.path.join(output_dir, f"squad.{settings['split']}.len-"
                      f"{settings['max_seq_length']}.{key[:12]}.tf_record")


def _serialize(feature: SquadFeature, max_seq_length: int) -> bytes:
  import tensorflow as tf

  def ints(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

  def floats(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))
  a = feature.arrays(max_seq_length)
  record = {
      "unique_ids": ints([feature.unique_id]),
      "input_ids": ints(a["input_ids"]),
      "input_mask": floats(a["input_mask"]),
      "segment_ids": ints(a["segment_ids"]),
      "p_mask": floats(a["p_mask"]),
      "cls_index": ints([a["cls_index"]]),
      "start_positions": ints([feature.start_position]),
      "end_positions": ints([feature.end_position]),
      "is_impossible": floats([float(feature.is_impossible)]),
      # Postprocessing only (variable length).
      "example_index": ints([feature.example_index]),
      "doc_span_index": ints([feature.doc_span_index]),
      "paragraph_len": ints([feature.paragraph_len]),
      "tok_start_to_orig_index": ints(feature.tok_start_to_orig_index),
      "tok_end_to_orig_index": ints(feature.tok_end_to_orig_index),
      "token_is_max_context": ints([int(x) for x in
                                    feature.token_is_max_context]),
  }
  # deterministic: map entries in key order, so same features, same bytes
  return tf.train.Example(features=tf.train.Features(
      feature=record)).SerializeToString(deterministic=True)


def write_records(path: str, features: Iterable[SquadFeature],
                  max_seq_length: int) -> int:
  """Writes the features to `path` atomically; returns their number."""
  import tensorflow as tf
  n = 0
  with atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for feature in features:
        writer.write(_serialize(feature, max_seq_length))
        n += 1
  return n


def cached_features(data: SquadData, tokenizer, settings: FeatureSettings,
                    output_dir: str, split: str, is_training: bool,
                    num_proc: int = 1, overwrite: bool = False,
                    seed: int = 0) -> dict:
  """Builds (or reuses) the record file of `data`; returns its info
  (`path`, `num_features`, `num_examples`, `stats`, `settings`). Training
  records are shuffled (seeded) so a small shuffle buffer suffices. Keyed
  by content: the examples and the SentencePiece model's bytes (see
  `feature_records.reusable_info`), plus every setting."""
  from data_utils import feature_records as fr  # TensorFlow, when needed
  key = dict(dataclasses.asdict(settings), format=FORMAT, split=split,
             is_training=is_training, seed=seed if is_training else None)
  inputs = fr.input_fingerprints(data.examples,
                                 {"spiece": tokenizer.model_path})
  fr.prepare_cache_dir(output_dir)
  path = feature_file(output_dir, key)
  info_path = path + ".json"
  info = None if overwrite else fr.reusable_info(path, key, inputs,
                                                 "num_features")
  if info is not None:
    logging.info("reusing %s (%d features)", path, info["num_features"])
    return info
  features, stats = convert_examples(
      data.examples, tokenizer, settings, is_training, num_proc,
      what=f"squad {split} features")
  if is_training:
    import random
    random.Random(seed).shuffle(features)
  fr.forget_info(info_path)  # after the long part: a failure keeps the cache
  write_records(path, features, settings.max_seq_length)
  info = {"settings": key, "inputs": inputs, "num_features": len(features),
          "num_examples": len(data.examples),
          "stats": dataclasses.asdict(stats)}
  write_json(info_path, info)
  logging.info("wrote %s (%d features)", path, len(features))
  return dict(info, path=path)


MODEL_KEYS = ("unique_ids", "input_ids", "input_mask", "segment_ids",
              "p_mask", "cls_index")
TRAIN_KEYS = ("start_positions", "end_positions", "is_impossible")


def squad_dataset(path: str, max_seq_length: int, batch_size: int,
                  is_training: bool = False, shuffle_buffer: int = 2048,
                  seed: int = 0, skip_batches: int = 0, input_context=None):
  """Batches of the model features (+ positions when training); training
  repeats and shuffles (seeded), inference keeps the file order."""
  import tensorflow as tf
  L = max_seq_length
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([L], tf.int64),
      "input_mask": tf.io.FixedLenFeature([L], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
      "p_mask": tf.io.FixedLenFeature([L], tf.float32),
      "cls_index": tf.io.FixedLenFeature([], tf.int64),
  }
  if is_training:
    spec.update(start_positions=tf.io.FixedLenFeature([], tf.int64),
                end_positions=tf.io.FixedLenFeature([], tf.int64),
                is_impossible=tf.io.FixedLenFeature([], tf.float32))

  from data_utils.feature_records import records_dataset
  return records_dataset(path, spec, batch_size, is_training, shuffle_buffer,
                         seed, skip_batches, input_context)


def read_feature_meta(path: str) -> List[SquadFeature]:
  """The features of a record file with what postprocessing needs (tokens
  are not read back)."""
  import tensorflow as tf
  out = []
  for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
    f = tf.train.Example.FromString(raw).features.feature

    def ints(key):
      return list(f[key].int64_list.value)
    out.append(SquadFeature(
        unique_id=ints("unique_ids")[0], example_index=ints("example_index")[0],
        doc_span_index=ints("doc_span_index")[0], tokens=[],
        paragraph_len=ints("paragraph_len")[0],
        tok_start_to_orig_index=ints("tok_start_to_orig_index"),
        tok_end_to_orig_index=ints("tok_end_to_orig_index"),
        token_is_max_context=[bool(x) for x in ints("token_is_max_context")],
        start_position=ints("start_positions")[0],
        end_position=ints("end_positions")[0],
        is_impossible=bool(f["is_impossible"].float_list.value[0])))
  return out
