"""Prediction files of word-labelled data.

CoNLL layout (`conll_lines`), which `conlleval` reads: one word per line,
`word gold predicted` (`word predicted` for a file without gold tags),
tags in the scheme the input came in; a blank line after each sentence;
each document of a CoNLL input opens with `-DOCSTART- O O` and a blank
line, as CoNLL-2003 writes it (conlleval reads that line as one more `O`
word: its token accuracy moves by those lines, its entity scores do not).

JSONL (`jsonl_rows`): one object per sentence, in input order:
`{"document", "sentence", "line", "text", "tokens", "tags", "gold"?,
"entities"}`, where `text` is the words joined by single spaces, `tags`
the predicted tags (input scheme) and `entities` their spans in `text`
(`text.entity_spans`: type, text, start, end in characters, first_word,
last_word).
"""

from __future__ import annotations

import json
from typing import Iterator, List, Sequence

from data_utils.ner.reader import DOCSTART, NerData
from data_utils.ner.text import entity_spans, joined_words


def conll_lines(data: NerData, predicted: Sequence[Sequence[str]],
                with_docstart: bool = True, with_gold: bool = True
                ) -> Iterator[str]:
  """The lines (without newlines) of the CoNLL-layout predictions of `data`
  (`predicted`: one list of tags per sentence, in the file's scheme)."""
  document = None
  for sentence, tags in zip(data.sentences, predicted):
    if len(tags) != len(sentence.words):
      raise ValueError(f"{data.path}:{sentence.line}: {len(tags)} tags for "
                       f"{len(sentence.words)} words")
    if with_docstart and sentence.document != document:
      document = sentence.document
      yield f"{DOCSTART} O O" if with_gold else f"{DOCSTART} O"
      yield ""
    for i, (word, tag) in enumerate(zip(sentence.words, tags)):
      yield (f"{word} {sentence.source_tags[i]} {tag}" if with_gold
             else f"{word} {tag}")
    yield ""


def jsonl_rows(data: NerData, predicted: Sequence[Sequence[str]],
               with_gold: bool = True) -> List[str]:
  """The JSONL lines of the predictions (see the module docstring)."""
  rows = []
  for k, (sentence, tags) in enumerate(zip(data.sentences, predicted)):
    text, offsets = joined_words(sentence.words)
    row = {"document": sentence.document, "sentence": k,
           "line": sentence.line, "text": text, "tokens": sentence.words,
           "tags": list(tags)}
    if with_gold:
      row["gold"] = sentence.source_tags
    row["entities"] = entity_spans(text, offsets, tags)
    rows.append(json.dumps(row, ensure_ascii=False))
  return rows
