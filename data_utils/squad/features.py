"""SQuAD features: windows over the paragraph, as the original `run_squad.py`.

  `P <sep> Q <sep> <cls>` then RIGHT padding to `max_seq_length` (L)
  input_ids      [L] int   pad id 0
  input_mask     [L] float 1 = padding, 0 = real token
  segment_ids    [L] int   P (and its <sep>) SEG_ID_A 0, Q (and its <sep>)
                           SEG_ID_B 1, <cls> SEG_ID_CLS 2, padding
                           SEG_ID_PAD_SQUAD 3
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
context" window. The pieces and their character spans come from
`alignment.py`; the features are written and read back by `records.py`.
`convert_examples` spreads paragraphs over spawned worker processes, which
import this module only (no TensorFlow).
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import multiprocessing
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging

from data_utils.errors import UsageError, check_positive
from data_utils.progress import Progress
from data_utils.squad.alignment import (ParagraphAlignment, align_paragraph,
                                        split_piece_classes)
from data_utils.squad.reader import SquadExample
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD_SQUAD, SEP_ID,
                                     SentencePieceTokenizer)

FIRST_UNIQUE_ID = 1000000000


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
      check_positive(getattr(self, flag), flag)
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
        "segment_ids": [SEG_ID_A] * (p + 1) + [SEG_ID_B] * (q + 1) +
                       [SEG_ID_CLS] + [SEG_ID_PAD_SQUAD] * pad,
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
  module (which imports no TensorFlow: the records are written by
  `records.py`), so the script is hidden from them while the pool starts."""
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
