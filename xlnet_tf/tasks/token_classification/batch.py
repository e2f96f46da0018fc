"""Batch prediction with a token-classifier export: a row's words (a raw
text split as `data_utils.ner.text.words_with_offsets`, or a CoNLL
sentence) -> the windows `run_ner.py` reads (`align_words`,
`sentence_windows`, without document context) -> one tag per word from the
window with the most context for it (`merge_words`) -> entities with
character offsets.

A row: `words`, `starts`, `ends` (character offsets into `text`, end
exclusive), `tags` and `entities` (`text.entity_spans`). A raw text's tags
are the model's (IOB2) and its offsets point into the text as given; a
CoNLL sentence's tags are written in its file's scheme (as `run_ner.py`
writes its predictions) and `text` is its words joined by single spaces.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import tensorflow as tf

from data_utils.ner.alignment import WordPieces, align_words
from data_utils.ner.features import (NerFeatureSettings, merge_words,
                                     sentence_windows)
from data_utils.ner.schemes import convert
from data_utils.ner.text import entity_spans, words_with_offsets
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
    text = " ".join(fields["words"])
    offsets, start = [], 0
    for word in fields["words"]:
      offsets.append((start, start + len(word)))
      start += len(word) + 1
    return text, list(fields["words"]), offsets
  words, offsets = words_with_offsets(fields["text"])
  return fields["text"], words, offsets


class TokenClassifierBatch(BatchKind):
  def __init__(self, meta: dict, options: dict, spiece_model: str):
    super().__init__(meta, options, spiece_model)
    self.settings = NerFeatureSettings(meta["max_seq_length"],
                                       meta["doc_stride"],
                                       lower=bool(meta.get("lower")))
    self._word_pieces = None

  def prepare(self, fields: dict) -> Prepared:
    if self._word_pieces is None:
      self._word_pieces = WordPieces(self.tokenizer)
    _, words, _ = sentence_text(fields)
    aligned = align_words(self._word_pieces, words)
    windows = []
    for w in sentence_windows(aligned, self.settings):
      features = trimmed({"input_ids": w.input_ids,
                          "segment_ids": w.segment_ids,
                          "input_mask": w.input_mask})
      features["word_index"] = np.asarray(
          w.word_index[len(w.word_index) - real_length(features):], np.int32)
      windows.append(features)
    return Prepared(max(real_length(w) for w in windows),
                    {"windows": windows, "n_words": len(words)})

  def infer(self, signature, payloads: List[dict]
            ) -> Tuple[List[List[int]], List[Padding]]:
    windows = [w for p in payloads for w in p["windows"]]
    longest = max(real_length(w) for w in windows)
    length = longest if self.signature == "serve_features" \
        else self.settings.max_seq_length
    features = left_padded(windows, length, {"word_index": -1})
    tag_ids = signature(**{k: tf.constant(features[k]) for k in FEATURES}
                        )["tag_ids"].numpy()
    out, padding, first = [], [], 0
    for p in payloads:
      k = len(p["windows"])
      out.append(merge_words([0] * k, features["word_index"][first:first + k],
                             tag_ids[first:first + k], [p["n_words"]])[0])
      padding.append(Padding(sum(real_length(w) for w in p["windows"]),
                             length * k))
      first += k
    return out, padding

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
