"""Word-labelled data (named entities): the CoNLL layout and a JSONL form.

CoNLL layout: one word per line, whitespace-separated columns with the
word first and its tag last (`word POS chunk TAG` in CoNLL-2003; any
`word … TAG` works, every word line with the column count of the file's
first one); a blank line ends a sentence; a `-DOCSTART-` line starts a
document (it is not a sentence). JSONL: one sentence per line,
`{"tokens": [...], "tags": [...]}`; each file is one document. Where
untagged files are allowed (`read_ner(..., untagged=True)`, for
prediction), a CoNLL file may have the word column alone and a JSONL file
rows without "tags": such a file's sentences have no tags at all.

Tags are checked against the file's scheme (given, or found by
`schemes.detect_scheme`), then stored in IOB2 (`schemes.INTERNAL`);
`NerData.restore` writes a tag sequence back in the file's scheme.
Bad input raises `NerDataError` with one line naming `file:line`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, List, Optional, Sequence

from data_utils import paths
from data_utils.errors import UserError
from data_utils.ner import schemes
from data_utils.text_files import BadLine, read_lines

DOCSTART = "-DOCSTART-"


class NerDataError(UserError):
  """A malformed word-labelled file; the message names file:line."""


@dataclasses.dataclass
class Sentence:
  """One sentence: `words[i]` has tag `tags[i]` (IOB2), written
  `source_tags[i]` in the file. `line` is the 1-based line of its first
  word (CoNLL: word i is on line `line + i`; JSONL: the sentence's line);
  `document` its document's index.

  `source_tags` keeps the file's spelling: a file may write an entity as
  its scheme would not (CoNLL-2003's eng.train has IOB1 `B-MISC` after
  `O`), which `NerData.restore` gives back in the scheme's own spelling.
  """
  words: List[str]
  tags: List[str]
  document: int
  line: int
  source_tags: List[str] = dataclasses.field(default_factory=list)

  @property
  def entities(self) -> List[schemes.Entity]:
    return schemes.entities(self.tags)


@dataclasses.dataclass
class Document:
  """Consecutive sentences from one `-DOCSTART-` (or file) on; `line` is
  the `-DOCSTART-` line (1 when the file has none)."""
  index: int
  line: int
  sentences: List[Sentence]


@dataclasses.dataclass
class NerData:
  """A file's sentences in order, with the scheme its tags came in."""
  path: str
  scheme: str
  sentences: List[Sentence]
  documents: List[Document]

  @property
  def n_words(self) -> int:
    return sum(len(s.words) for s in self.sentences)

  @property
  def tagged(self) -> bool:
    """Whether the file has tags (gold to score against)."""
    return any(s.tags for s in self.sentences)

  def labels(self) -> List[str]:
    """The IOB2 tags used, `O` first, then by type and prefix (B before I)."""
    used = {t for s in self.sentences for t in s.tags}
    rest = sorted(used - {"O"}, key=lambda t: (schemes.split_tag(t)[1], t))
    return ["O"] + rest

  def restore(self, tags: Sequence[str]) -> List[str]:
    """IOB2 `tags` (gold or predicted) written in the file's scheme, as
    that scheme writes each entity."""
    return schemes.convert(tags, self.scheme)


def _lines(path: str) -> Iterator[str]:
  """The file's text lines (a UTF-8 byte-order mark dropped); a line that
  is not UTF-8, holds a NUL byte or is over 1 MiB (read in bounded pieces)
  is a one-line NerDataError naming it."""
  with paths.open_file(path, "rb") as f:
    for n, text in read_lines(f):
      if isinstance(text, BadLine):
        raise NerDataError(f"{path}:{n}: {text.reason}")
      yield text


def _conll_sentences(path: str, untagged: bool):
  """`(sentences, line of each document's start)`."""
  sentences: List[Sentence] = []
  words: List[str] = []
  tags: List[str] = []
  starts: List[int] = []
  columns, start = 0, 0

  def close():
    if words:
      sentences.append(Sentence(list(words), list(tags), len(starts) - 1,
                                start))
    words.clear()
    tags.clear()

  for line_no, line in enumerate(_lines(path), start=1):
    fields = line.split()
    if not fields:
      close()
      continue
    if fields[0] == DOCSTART:
      close()
      starts.append(line_no)
      continue
    if not starts:
      starts.append(1)   # words before any -DOCSTART-: a first document
    if not columns:
      columns = len(fields)
      if columns < 2 and not untagged:
        raise NerDataError(f"{path}:{line_no}: one column ({fields[0]!r}); "
                           "a word line is `word … TAG`")
    elif len(fields) != columns:
      raise NerDataError(f"{path}:{line_no}: {len(fields)} columns, the "
                         f"file's first word line has {columns}")
    if not words:
      start = line_no
    words.append(fields[0])
    if columns > 1:
      tags.append(fields[-1])
  close()
  return sentences, starts or [1]


def _jsonl_sentences(path: str, untagged: bool) -> List[Sentence]:
  sentences: List[Sentence] = []
  for line_no, line in enumerate(_lines(path), start=1):
    if not line.strip():
      continue
    where = f"{path}:{line_no}"
    try:
      row = json.loads(line.rstrip())
    except json.JSONDecodeError as e:
      raise NerDataError(f"{where}: not valid JSON ({e.msg} at column "
                         f"{e.colno})") from None
    if not isinstance(row, dict) or "tokens" not in row or (
        "tags" not in row and not untagged):
      raise NerDataError(f'{where}: not an object with "tokens" and "tags"')
    words, tags = row["tokens"], row.get("tags", [])
    for name, value in (("tokens", words), ("tags", tags)):
      if not isinstance(value, list) or \
          not all(isinstance(v, str) for v in value):
        raise NerDataError(f'{where}: "{name}" is not a list of strings')
    if sentences and bool(sentences[-1].tags) != ("tags" in row):
      raise NerDataError(f'{where}: "tags" in some rows only (line '
                         f'{sentences[-1].line} differs)')
    if "tags" in row and len(words) != len(tags):
      raise NerDataError(f"{where}: {len(words)} tokens but {len(tags)} tags")
    for i, word in enumerate(words):
      if not word or word != "".join(word.split()):
        raise NerDataError(f"{where}: token {i} ({word!r}) is empty or "
                           "holds whitespace")
    if words:
      sentences.append(Sentence(list(words), list(tags), 0, line_no))
  return sentences


def _where(path: str, sentence: Sentence, i: int, jsonl: bool) -> str:
  if jsonl:
    return f"{path}:{sentence.line}: tag {i}"
  return f"{path}:{sentence.line + i}"


def _check_tags(path: str, sentences: List[Sentence], scheme: Optional[str],
                jsonl: bool) -> None:
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags):
      problem = schemes.tag_problem(tag, scheme)
      if problem:
        raise NerDataError(f"{_where(path, sentence, i, jsonl)}: {problem}")


def _documents(sentences: List[Sentence], starts: List[int]) -> List[Document]:
  docs = [Document(i, line, []) for i, line in enumerate(starts)]
  for sentence in sentences:
    docs[sentence.document].sentences.append(sentence)
  return docs


def read_ner(path: str, scheme: Optional[str] = None,
             untagged: bool = False) -> NerData:
  """The sentences of a CoNLL-layout file, or of a JSONL file (name ending
  in `.jsonl`), with tags in IOB2. `scheme` (IOB1, IOB2, BIOES) is the
  file's; None finds it from the tags (an untagged file's is `scheme` or
  IOB2: predictions are written in it). `untagged` accepts a file without
  tags (see the module docstring).

  Example (a CoNLL-2003 file):
    data = read_ner("eng.train")
    data.scheme                    # 'IOB1'
    data.sentences[0].tags[:3]     # ['B-ORG', 'O', 'B-MISC']
  """
  if scheme is not None and scheme not in schemes.SCHEMES:
    raise NerDataError(f"{path}: unknown tag scheme {scheme!r} (one of "
                       f"{', '.join(schemes.SCHEMES)})")
  jsonl = path.endswith(".jsonl")
  try:
    if jsonl:
      sentences, starts = _jsonl_sentences(path, untagged), [1]
    else:
      sentences, starts = _conll_sentences(path, untagged)
  except OSError as e:
    raise NerDataError(f"{path}: cannot read ({e.strerror or e})") from None
  _check_tags(path, sentences, None, jsonl)
  tagged = any(s.tags for s in sentences)
  found = scheme or (schemes.detect_scheme([s.tags for s in sentences])
                     if tagged else schemes.INTERNAL)
  _check_tags(path, sentences, found, jsonl)
  for sentence in sentences:
    sentence.source_tags = sentence.tags
    sentence.tags = schemes.convert(sentence.tags, schemes.INTERNAL)
  return NerData(path, found, sentences, _documents(sentences, starts))
