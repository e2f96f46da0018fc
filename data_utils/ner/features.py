"""Sentences -> fixed-length model windows, and window predictions -> one
tag per word.

A window of `max_seq_length` L, LEFT-padded as the classifier's features:

    [<pad> ...] [context <sep>] pieces <sep> <cls>

  input_ids    [L] int   piece ids (0 on padding)
  segment_ids  [L] int   context and its <sep>: SEG_ID_A; the sentence's
                         pieces and <sep>: SEG_ID_B with context, SEG_ID_A
                         without; <cls>: SEG_ID_CLS; padding: SEG_ID_PAD
  input_mask   [L] float 1 = padding
  label_ids    [L] int   label id on labelled pieces (a word's first, or all
                         with `label_all_pieces`), IGNORE_LABEL elsewhere
  word_index   [L] int   the word whose tag this window predicts here (at
                         its first piece, in the window that has the most
                         context for it: `windows.best_windows`), else -1

A sentence longer than L - 2 pieces is read in windows of L - 2 pieces,
`doc_stride` apart (`windows.window_spans`). With `document_context`, a
sentence that fits in one window with room to spare is preceded by as many
pieces of the preceding sentences of its document as fit (whole words,
the nearest ones), unlabelled; a sentence split in windows gets none.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from data_utils.errors import UsageError
from data_utils.ner.alignment import (IGNORE_LABEL, AlignedSentence,
                                      WordPieces, align_words)
from data_utils.ner.reader import NerData
from data_utils.ner.windows import best_windows, window_spans
from data_utils.progress import Progress
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID, SPIECE_UNDERLINE)


@dataclasses.dataclass(frozen=True)
class NerFeatureSettings:
  """What shapes the windows (all of it keys the feature cache). `lower`:
  the pieces are of lower-cased text."""
  max_seq_length: int = 128
  doc_stride: int = 64
  label_all_pieces: bool = False
  document_context: bool = False
  lower: bool = False

  @property
  def window(self) -> int:
    """Pieces of a sentence one window holds."""
    return self.max_seq_length - 2

  def validate(self) -> None:
    if self.max_seq_length < 4:
      raise UsageError(f"--max_seq_length={self.max_seq_length}: must be at "
                       "least 4 (<sep> <cls> and a piece)")
    if not 1 <= self.doc_stride <= self.window:
      raise UsageError(f"--doc_stride={self.doc_stride}: must be in [1, "
                       f"max_seq_length - 2 = {self.window}]")


@dataclasses.dataclass
class NerWindow:
  """One window's features (see the module docstring); `sentence` is the
  sentence's index in its file, `window` the window's in the sentence."""
  sentence: int
  window: int
  input_ids: List[int]
  segment_ids: List[int]
  input_mask: List[float]
  label_ids: List[int]
  word_index: List[int]


@dataclasses.dataclass
class WindowStats:
  sentences: int = 0
  words: int = 0
  pieces: int = 0
  windows: int = 0
  split_sentences: int = 0      # read in more than one window
  longest_sentence_pieces: int = 0
  context_sentences: int = 0    # given document context
  context_pieces: int = 0


def context_ids(previous: Sequence[AlignedSentence], room: int
                ) -> List[int]:
  """The ids of the last whole words of `previous` (in order) that fit in
  `room` pieces: the last `room` pieces, from the first that starts a word
  (opens with '▁').

  Example:
    >>> s = AlignedSentence(["▁a", "b", "▁c"], [5, 6, 7], [], [], [])
    >>> context_ids([s], 2), context_ids([s], 3)
    ([7], [5, 6, 7])
  """
  pieces: List[str] = []
  ids: List[int] = []
  for sentence in reversed(previous):
    if len(pieces) >= room:
      break
    pieces = sentence.pieces + pieces
    ids = sentence.input_ids + ids
  if len(pieces) <= room:
    return ids
  cut = len(pieces) - room
  # Start at a word's first piece: drop the tail of a cut word.
  while cut < len(pieces) and not pieces[cut].startswith(SPIECE_UNDERLINE):
    cut += 1
  return ids[cut:]


def sentence_windows(aligned: AlignedSentence, settings: NerFeatureSettings,
                     sentence: int = 0, context_ids: Sequence[int] = ()
                     ) -> List[NerWindow]:
  """The windows of one aligned sentence (`context_ids` only when it fits
  in one window beside them; see the module docstring)."""
  n = len(aligned.input_ids)
  length = settings.max_seq_length
  spans = window_spans(n, settings.window, settings.doc_stride)
  best = best_windows(spans, n)
  first_piece_word = {p: w for w, p in enumerate(aligned.word_starts)}
  labels = aligned.label_ids or [IGNORE_LABEL] * n
  out = []
  for k, (start, end) in enumerate(spans):
    context = list(context_ids) if len(spans) == 1 else []
    ids, segs, label_ids, words = [], [], [], []
    if context:
      ids += context + [SEP_ID]
      segs += [SEG_ID_A] * (len(context) + 1)
      label_ids += [IGNORE_LABEL] * (len(context) + 1)
      words += [-1] * (len(context) + 1)
    own = SEG_ID_B if context else SEG_ID_A
    ids += aligned.input_ids[start:end] + [SEP_ID, CLS_ID]
    segs += [own] * (end - start + 1) + [SEG_ID_CLS]
    label_ids += labels[start:end] + [IGNORE_LABEL] * 2
    words += [first_piece_word[p] if p in first_piece_word and best[p] == k
              else -1 for p in range(start, end)] + [-1, -1]
    if len(ids) > length:
      raise ValueError(f"window of {len(ids)} pieces exceeds {length}")
    pad = length - len(ids)
    out.append(NerWindow(
        sentence, k, [0] * pad + ids, [SEG_ID_PAD] * pad + segs,
        [1.0] * pad + [0.0] * len(ids), [IGNORE_LABEL] * pad + label_ids,
        [-1] * pad + words))
  return out


def align_data(data: NerData, word_pieces: WordPieces,
               label_map: Optional[Dict[str, int]],
               label_all_pieces: bool = False) -> List[AlignedSentence]:
  """Every sentence of `data` aligned (with label ids when `label_map`)."""
  return [align_words(word_pieces, s.words, s.tags if label_map else None,
                      label_map, label_all_pieces,
                      where=f"{data.path}:{s.line}")
          for s in data.sentences]


def convert_data(data: NerData, word_pieces: WordPieces,
                 label_map: Optional[Dict[str, int]],
                 settings: NerFeatureSettings, what: str = "ner features"
                 ) -> Tuple[List[NerWindow], WindowStats]:
  """The windows of every sentence of `data`, in order; with `label_map`
  (tag -> id) labelled, without it unlabelled (prediction)."""
  settings.validate()
  aligned = align_data(data, word_pieces, label_map,
                       settings.label_all_pieces)
  stats = WindowStats()
  windows: List[NerWindow] = []
  progress = Progress(what, total=len(aligned), unit="sentences")
  for i, (sentence, a) in enumerate(zip(data.sentences, aligned)):
    n = len(a.input_ids)
    context: List[int] = []
    room = settings.max_seq_length - 3 - n
    if settings.document_context and room > 0:
      previous = [aligned[j] for j in range(i - 1, -1, -1)
                  if data.sentences[j].document == sentence.document]
      context = context_ids(previous[::-1], room)
    own = sentence_windows(a, settings, i, context)
    windows.extend(own)
    stats.sentences += 1
    stats.words += len(sentence.words)
    stats.pieces += n
    stats.windows += len(own)
    stats.split_sentences += len(own) > 1
    stats.longest_sentence_pieces = max(stats.longest_sentence_pieces, n)
    stats.context_sentences += bool(context)
    stats.context_pieces += len(context)
    progress.update()
  progress.finish()
  return windows, stats


def merge_words(sentence_index: Sequence[int],
                word_index: Sequence[Sequence[int]],
                predicted: Sequence[Sequence[int]],
                n_words: Sequence[int]) -> List[List[int]]:
  """Per sentence, one predicted id per word, from the windows' outputs:
  `sentence_index [N]`, `word_index [N, L]`, `predicted [N, L]` (ids per
  position) of N windows in any order; `n_words[s]` words in sentence s.
  A word predicted by no window or by two is an error (a bug).

  Example:
    >>> merge_words([0, 0], [[-1, 0, -1], [1, -1, -1]], [[5, 2, 5], [3, 5, 5]],
    ...             [2])
    [[2, 3]]
  """
  out: List[List[Optional[int]]] = [[None] * n for n in n_words]
  for s, words, ids in zip(sentence_index, word_index, predicted):
    for w, i in zip(words, ids):
      if w < 0:
        continue
      if out[s][w] is not None:
        raise ValueError(f"sentence {s}: word {w} predicted twice")
      out[s][w] = int(i)
  for s, row in enumerate(out):
    if None in row:
      raise ValueError(f"sentence {s}: word {row.index(None)} not predicted")
  return out  # type: ignore[return-value]
