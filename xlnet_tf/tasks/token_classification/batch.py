"""Batch prediction with a token-classifier export: a row's words (a raw
text split as `data_utils.ner.text.words_with_offsets`, or a CoNLL
sentence) -> the windows `run_ner.py` reads (`align_words`,
`sentence_windows`) -> one tag per word from the window with the most
context for it (`merge_words`) -> entities with character offsets.

Document context: a model trained with `run_ner.py --document_context`
(its marker's `batch` entry says `document_context`) reads a CoNLL
sentence that fits in one window after as many pieces of the preceding
sentences of its document as fit, as `run_ner.py` does. The read step
gives each such row those sentences (`with_document_context`: it reads a
file's rows in order, so rows need not meet again on one worker); a raw
text has no document and is read alone, as a document's first sentence
is. An export whose marker does not say (made before it was recorded) is
refused: read without context it would give other tags, with no word.

A row: `words`, `starts`, `ends` (character offsets into `text`, end
exclusive), `tags` and `entities` (`text.entity_spans`). A raw text's tags
are the model's (IOB2) and its offsets point into the text as given; a
CoNLL sentence's tags are written in its file's scheme (as `run_ner.py`
writes its predictions) and `text` is its words joined by single spaces.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from data_utils.ner.alignment import AlignedSentence, WordPieces, align_words
from data_utils.ner.features import (NerFeatureSettings, context_ids,
                                     merge_words, sentence_windows)
from data_utils.ner.schemes import convert
from data_utils.ner.text import (entity_spans, joined_words,
                                 words_with_offsets)
from data_utils.text_inputs import Row
from xlnet_tf.tasks.batch import (FEATURES, BatchKind, Padding, Prepared,
                                  left_padded, real_length, trimmed)


def sentence_text(fields: dict) -> Tuple[str, List[str], List[Tuple[int, int]]]:
  """`(text, words, offsets)` of a row: a raw text's own, or a CoNLL
  sentence's words joined by single spaces.

  Example:
    >>> sentence_text({"words": ["EU", "rejects"]})
    ('EU rejects', ['EU', 'rejects'], [(0, 2), (3, 10)])
  """
  if "words" in fields:
    text, offsets = joined_words(fields["words"])
    return text, list(fields["words"]), offsets
  words, offsets = words_with_offsets(fields["text"])
  return fields["text"], words, offsets


def last_words(sentences: Sequence[Sequence[str]], n: int
               ) -> List[List[str]]:
  """The last `n` words of `sentences` (lists of words), still by sentence:
  the nearest ones whole, the earliest kept cut at its start.

  Example:
    >>> last_words([["a", "b", "c"], ["d"], ["e", "f"]], 4)
    [['c'], ['d'], ['e', 'f']]
  """
  out: List[List[str]] = []
  total = 0
  for sentence in reversed(sentences):
    if total >= n:
      break
    kept = list(sentence[max(0, len(sentence) - (n - total)):])
    out.insert(0, kept)
    total += len(kept)
  return out


def with_document_context(rows: Iterable, words: int) -> Iterator:
  """A file's rows in order, each CoNLL sentence (a row with
  `fields["document"]`) with `fields["context"]`: the sentences before it
  in its document, cut to their last `words` words. With `words` at least
  the window length that is all the context a window can take: every word
  is at least one piece (`WordPieces.pieces`)."""
  document, previous = None, []
  for row in rows:
    if not isinstance(row, Row) or "document" not in row.fields:
      yield row
      continue
    if row.fields["document"] != document:
      document, previous = row.fields["document"], []
    yield row._replace(fields=dict(row.fields, context=previous))
    previous = last_words(previous + [list(row.fields["words"])], words)


class TokenClassifierBatch(BatchKind):
  conll = True

  def __init__(self, meta: dict, options: dict, spiece_model: str, *,
               name: str):
    super().__init__(meta, options, spiece_model, name=name)
    self.settings = NerFeatureSettings(
        meta["max_seq_length"], meta["doc_stride"],
        document_context=bool(meta["document_context"]),
        lower=bool(meta.get("lower")))
    self._word_pieces = None

  @classmethod
  def meta_problem(cls, meta: dict) -> Optional[str]:
    if isinstance(meta.get("document_context"), bool):
      return None
    return ("exported before its marker recorded run_ner.py's "
            "--document_context (a model trained with it gives other tags "
            "when read without it); export it again")

  @classmethod
  def in_context(cls, meta: dict, rows: Iterable) -> Iterable:
    if not meta["document_context"]:
      return rows
    return with_document_context(rows, int(meta["max_seq_length"]))

  def _context(self, fields: dict, aligned: AlignedSentence) -> List[int]:
    """The document context of a sentence (as `run_ner.py` gives it)."""
    room = self.settings.max_seq_length - 3 - len(aligned.input_ids)
    if not self.settings.document_context or room <= 0 or \
        not fields.get("context"):
      return []
    return context_ids([align_words(self._word_pieces, words)
                        for words in fields["context"]], room)

  def prepare(self, fields: dict) -> Prepared:
    if self._word_pieces is None:
      self._word_pieces = WordPieces(self.tokenizer)
    _, words, _ = sentence_text(fields)
    aligned = align_words(self._word_pieces, words)
    windows = []
    for w in sentence_windows(aligned, self.settings, 0,
                              self._context(fields, aligned)):
      features = trimmed({"input_ids": w.input_ids,
                          "segment_ids": w.segment_ids,
                          "input_mask": w.input_mask})
      features["word_index"] = np.asarray(
          w.word_index[len(w.word_index) - real_length(features):], np.int32)
      windows.append(features)
    return Prepared(max(real_length(w) for w in windows),
                    {"windows": windows, "n_words": len(words)})

  def units(self, prepared: Prepared) -> List[Prepared]:
    # Windows are read independently (`merge_words` joins them): each is
    # batched with other windows of its length.
    n_words = prepared.payload["n_words"]
    return [Prepared(real_length(w), dict(w, n_words=n_words))
            for w in prepared.payload["windows"]]

  def infer(self, signature, payloads: List[dict]
            ) -> Tuple[List[dict], List[Padding]]:
    """Windows -> per window its real positions' `word_index` and
    `tag_ids`."""
    longest = max(real_length(w) for w in payloads)
    length = longest if self.signature == "serve_features" \
        else self.settings.max_seq_length
    features = left_padded(payloads, length, {"word_index": -1})
    tag_ids = signature(**{k: tf.constant(features[k]) for k in FEATURES}
                        )["tag_ids"].numpy()
    out = []
    for b, w in enumerate(payloads):
      n = real_length(w)
      out.append({"word_index": w["word_index"],
                  "tag_ids": tag_ids[b, length - n:]})
    return out, [Padding(real_length(w), length) for w in payloads]

  def join(self, payloads: List[dict], outputs: List[dict]
           ) -> Tuple[dict, List[int]]:
    """A row's windows -> one tag id per word (`merge_words`)."""
    n_words = payloads[0]["n_words"]
    tags = merge_words([0] * len(outputs),
                       [o["word_index"] for o in outputs],
                       [o["tag_ids"] for o in outputs], [n_words])[0]
    return {"n_words": n_words}, tags

  def row(self, fields: dict, payload: dict, output: List[int]) -> dict:
    del payload
    labels = self.meta["labels"]
    text, words, offsets = sentence_text(fields)
    tags = [labels[i] for i in output]
    if "scheme" in fields:
      tags = convert(tags, fields["scheme"])
    row = {"text": text, "words": words,
           "starts": [s for s, _ in offsets], "ends": [e for _, e in offsets],
           "tags": tags, "entities": entity_spans(text, offsets, tags)}
    if "document" in fields:
      row["document"] = fields["document"]
    return row
