"""The rows of a batch-prediction job's input files, each keyed by
`(file, line)`, and the rows that cannot be read with a one-line reason.

Formats (`--input_format`, `auto` decides from the file name):
  lines   one text per line (`.txt` and any other name); line n is row n
  tsv     a header line, then tab-separated columns (`.tsv`; no quoting, as
          GLUE writes them)
  csv     a header line, then comma-separated columns with CSV quoting
          (`.csv`); a row's line is the line it starts on
  jsonl   one JSON object per line (`.jsonl`); blank lines are no rows
  conll   CoNLL layout: one word per line (first column), blank lines
          between sentences, `-DOCSTART-` documents (`.conll`); a row is a
          sentence, keyed by the line of its first word (as `run_ner.py`
          reads it, `data_utils.ner.reader`)

A row is `Row(file, line, fields)` with `fields["text"]` (and
`fields["text_b"]` when a second column is asked for), or for CoNLL
`fields["words"]`, `["scheme"]` (the file's tag scheme) and
`["document"]`. A row that cannot be read is `DeadRow(file, line, reason)`;
reading goes on after it. Columns: a TSV/CSV column by header name or
0-based index (default `sentence`, else `text`, else the first), a JSONL
field by name (default `text`).
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
from typing import Iterator, List, NamedTuple, Optional, Union

from data_utils.errors import UsageError, UserError
from data_utils.ner.reader import read_ner

FORMATS = ("auto", "lines", "tsv", "csv", "jsonl", "conll")
_BY_SUFFIX = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl",
              ".conll": "conll"}


class Row(NamedTuple):
  file: str
  line: int
  fields: dict


class DeadRow(NamedTuple):
  file: str
  line: int
  reason: str


class InputSpec(NamedTuple):
  """What to read: `input_format` (one of FORMATS), the text column or
  field (None: the default) and the second text's (None: no pair)."""
  input_format: str = "auto"
  text_column: Optional[str] = None
  text_b_column: Optional[str] = None


def file_format(path: str, input_format: str = "auto") -> str:
  """The format a file is read in.

  Example:
    >>> file_format("dev.tsv"), file_format("a.JSONL"), file_format("x")
    ('tsv', 'jsonl', 'lines')
    >>> file_format("eng.testb", "conll")
    'conll'
  """
  if input_format != "auto":
    return input_format
  return _BY_SUFFIX.get(os.path.splitext(path)[1].lower(), "lines")


def input_files(patterns: str) -> List[str]:
  """The files of comma-separated glob `patterns`, sorted and without
  repeats; a pattern matching no file is a UsageError naming it."""
  files = []
  for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
    found = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    if not found:
      raise UsageError(f"--input={pattern}: matches no file")
    files.extend(found)
  if not files:
    raise UsageError("--input is empty")
  return list(dict.fromkeys(files))


def check_spec(spec: InputSpec, first_file: str) -> None:
  """Flag checks before any work: the format is known, a column is only
  asked of formats that have columns, and the first file's header has it."""
  if spec.input_format not in FORMATS:
    raise UsageError(f"--input_format={spec.input_format}: use one of "
                     f"{', '.join(FORMATS)}")
  kind = file_format(first_file, spec.input_format)
  if kind in ("lines", "conll"):
    for flag, value in (("text_column", spec.text_column),
                        ("text_b_column", spec.text_b_column)):
      if value is not None:
        raise UsageError(f"--{flag}={value}: {first_file} is read as "
                         f"{kind}, which has no columns")
  if kind in ("tsv", "csv"):
    with open(first_file, "rb") as f:
      header = _header(f.readline(), kind)
    if header is None:
      raise UsageError(f"{first_file}:1: no header line (a {kind} file "
                       "needs one)")
    for column in _columns(spec, header):
      problem = _column_problem(header, column)
      if problem:
        raise UsageError(f"{first_file}:1: {problem}")


def read_rows(path: str, spec: InputSpec
              ) -> Iterator[Union[Row, DeadRow]]:
  """Every row of `path` in order (see the module docstring)."""
  kind = file_format(path, spec.input_format)
  if kind == "conll":
    yield from _conll_rows(path)
    return
  with open(path, "rb") as f:
    if kind == "lines":
      for n, raw in enumerate(f, 1):
        text = _decoded(raw, path, n)
        if isinstance(text, DeadRow):
          yield text
        else:
          yield _text_row(path, n, {"text": text.rstrip("\r\n")})
    elif kind == "jsonl":
      yield from _jsonl_rows(f, path, spec.text_column or "text",
                             spec.text_b_column)
    else:
      yield from _table_rows(f, path, kind, spec)


def _decoded(raw: bytes, path: str, line: int) -> Union[str, DeadRow]:
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    return DeadRow(path, line, f"not UTF-8 text (byte 0x{raw[e.start]:02x} "
                   f"at column {e.start + 1})")


def _text_row(path: str, line: int, fields: dict) -> Union[Row, DeadRow]:
  if not fields["text"].strip():
    return DeadRow(path, line, "empty text")
  return Row(path, line, fields)


def _jsonl_rows(f, path, field, field_b) -> Iterator[Union[Row, DeadRow]]:
  for n, raw in enumerate(f, 1):
    line = _decoded(raw, path, n)
    if isinstance(line, DeadRow):
      yield line
      continue
    if not line.strip():
      continue
    try:
      value = json.loads(line)
    except json.JSONDecodeError as e:
      yield DeadRow(path, n, f"not JSON ({e.msg})")
      continue
    fields = {}
    for key, name in (("text", field), ("text_b", field_b)):
      if name is None:
        continue
      if not isinstance(value, dict) or not isinstance(value.get(name), str):
        yield DeadRow(path, n, f"no string field {name!r}")
        break
      fields[key] = value[name]
    else:
      yield _text_row(path, n, fields)


def _header(raw: bytes, kind: str) -> Optional[List[str]]:
  try:
    text = raw.decode("utf-8").rstrip("\r\n")
  except UnicodeDecodeError:
    return None
  if not text:
    return None
  return next(_reader(io.StringIO(text), kind))


def _reader(lines, kind: str):
  if kind == "tsv":
    return csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
  return csv.reader(lines)


def _columns(spec: InputSpec, header: List[str]) -> List[str]:
  first = spec.text_column
  if first is None:
    first = next((c for c in ("sentence", "text") if c in header), "0")
  return [first] + ([spec.text_b_column] if spec.text_b_column else [])


def _column_problem(header: List[str], column: str) -> Optional[str]:
  if column in header or (column.isdigit() and int(column) < len(header)):
    return None
  return f"no column {column!r} (the header has {', '.join(header)})"


def _column_index(header: List[str], column: str) -> int:
  return header.index(column) if column in header else int(column)


def _table_rows(f, path, kind, spec) -> Iterator[Union[Row, DeadRow]]:
  header_line = f.readline()
  header = _header(header_line, kind)
  if header is None:
    yield DeadRow(path, 1, f"no header line (a {kind} file needs one)")
    return
  columns = _columns(spec, header)
  for column in columns:
    problem = _column_problem(header, column)
    if problem:
      # Every row of the file is dead, each with the reason.
      for n, _ in enumerate(f, 2):
        yield DeadRow(path, n, problem)
      return
  indices = [_column_index(header, c) for c in columns]
  good = _GoodLines(f, path)
  starts: List[int] = []
  reader = _reader(_tracked(good, starts), kind)
  while True:
    consumed = len(starts)
    try:
      record = next(reader)
    except StopIteration:
      break
    except csv.Error as e:
      yield DeadRow(path, starts[consumed] if consumed < len(starts)
                    else starts[-1], f"not {kind} ({e})")
      continue
    yield from good.take_dead()
    # A CSV record may span lines: it starts on the first line read for it.
    line = starts[consumed]
    if not record:
      continue
    missing = [i for i in indices if i >= len(record)]
    if missing:
      yield DeadRow(path, line, f"{len(record)} columns, no column "
                    f"{missing[0]} ({header[missing[0]]})")
      continue
    fields = {"text": record[indices[0]]}
    if len(indices) > 1:
      fields["text_b"] = record[indices[1]]
    yield _text_row(path, line, fields)
  yield from good.take_dead()


class _GoodLines:
  """The decoded lines `(number, text)` of a binary file from line 2 on;
  a line that is not UTF-8 is kept aside as a dead row (`take_dead`)."""

  def __init__(self, f, path: str):
    self.path, self.dead = path, []
    self.numbers = enumerate(f, 2)

  def __iter__(self):
    for n, raw in self.numbers:
      text = _decoded(raw, self.path, n)
      if isinstance(text, DeadRow):
        self.dead.append(text)
        continue
      yield n, text

  def take_dead(self) -> List[DeadRow]:
    dead, self.dead = self.dead, []
    return dead


def _tracked(good: _GoodLines, starts: List[int]) -> Iterator[str]:
  """The text lines for `csv`, noting each one's line number in `starts`."""
  for n, text in good:
    starts.append(n)
    yield text


def _conll_rows(path: str) -> Iterator[Union[Row, DeadRow]]:
  try:
    data = read_ner(path, untagged=True)
  except UserError as e:
    # The whole file cannot be read (its reason names the line).
    yield DeadRow(path, 0, str(e))
    return
  for sentence in data.sentences:
    yield Row(path, sentence.line, {"words": list(sentence.words),
                                    "scheme": data.scheme,
                                    "document": sentence.document})
