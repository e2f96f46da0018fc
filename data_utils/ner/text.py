"""Raw text <-> words with character offsets, and entities as text spans.

A text's words are what `str.split()` gives (runs of non-space characters,
Python's `str.isspace`), so a CoNLL sentence and the text `" ".join(words)`
have the same words. Offsets count characters (code points), end exclusive.
"""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

from data_utils.ner.schemes import entities

_WORD = re.compile(r"\S+")


def words_with_offsets(text: str) -> Tuple[List[str], List[Tuple[int, int]]]:
  """`(words, [(start, end)])` of `text`.

  Example:
    >>> words_with_offsets(" EU  rejects\\tGerman")
    (['EU', 'rejects', 'German'], [(1, 3), (5, 12), (13, 19)])
  """
  found = [(m.group(), m.span()) for m in _WORD.finditer(text)]
  # `\\S` (str patterns are Unicode-aware) is exactly not `str.isspace`.
  return [w for w, _ in found], [span for _, span in found]


def joined_words(words: Sequence[str]) -> Tuple[str, List[Tuple[int, int]]]:
  """`(text, [(start, end)])`: a CoNLL sentence's words joined by single
  spaces, and where each word is in that text (as `words_with_offsets`
  finds them there).

  Example:
    >>> joined_words(["EU", "rejects"])
    ('EU rejects', [(0, 2), (3, 10)])
  """
  offsets, start = [], 0
  for word in words:
    offsets.append((start, start + len(word)))
    start += len(word) + 1
  return " ".join(words), offsets


def entity_spans(text: str, offsets: Sequence[Tuple[int, int]],
                 tags: Sequence[str]) -> List[dict]:
  """The entities of per-word `tags` (any scheme, read as conlleval) as
  `{"type", "text", "start", "end", "first_word", "last_word"}`: characters
  `text[start:end]`, from the first word's start to the last word's end.

  Example:
    >>> text = "EU rejects German call"
    >>> spans = entity_spans(text, words_with_offsets(text)[1],
    ...                      ["B-ORG", "O", "B-MISC", "O"])
    >>> [(e["type"], e["text"], e["start"], e["end"]) for e in spans]
    [('ORG', 'EU', 0, 2), ('MISC', 'German', 11, 17)]
  """
  out = []
  for entity_type, first, stop in entities(tags):
    start, end = offsets[first][0], offsets[stop - 1][1]
    out.append({"type": entity_type, "text": text[start:end], "start": start,
                "end": end, "first_word": first, "last_word": stop - 1})
  return out
