"""The one reader of users' text inputs: rows keyed by `(file, line)` and
the rows that cannot be read with a one-line reason. Batch prediction
(`read_rows`: a bad row is dead, reading goes on) and the language-model
scripts (`read_texts`: the first bad row is the script's one error line,
`path:line: reason`) read the same files the same way.

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
          reads it, `data_utils.ner.reader`); batch prediction only

A row is `Row(file, line, fields)` with `fields["text"]` (and
`fields["text_b"]` when a second column is asked for), or for CoNLL
`fields["words"]`, `["scheme"]` (the file's tag scheme) and
`["document"]`. A row that cannot be read is `DeadRow(file, line, reason)`;
reading goes on after it. A whole file that cannot be read is one dead
row at line 0. An empty text is a dead row for batch prediction and a
text for the scripts (a script's output line n is its input's text n).

Columns: a TSV/CSV column by header name or 0-based index, a JSONL field
by name (default `text`). A table's text column defaults to `sentence`,
else `text`; a header with neither (a GLUE pair file, or a text file read
as a table, whose first line is no header) needs `--text_column`, so no
column is guessed and no first line is silently taken for a header. A
column asked of a format without columns (lines, CoNLL) is refused.

Files (`data_utils.text_files`): only regular files (a FIFO, device or
directory is refused unopened); UTF-8 only (a UTF-16/UTF-32 file is
refused by name, a line that is not UTF-8 or holds a NUL byte is a dead
row); a UTF-8 byte-order mark is dropped, so it neither hides a header's
first column nor starts a text. A line over 1 MiB is a dead row, skipped
in bounded pieces. Tables (`data_utils.table_records`): a CSV record whose
quote is left open (not closed within 1,048,576 characters or by the end
of the file, or running into a field that opens a quote) is a dead row at
its first line ("unclosed quote"), and its other lines are read again.
Every path may be a bucket URL (`data_utils.paths`).
"""

from __future__ import annotations

import io
import json
import os
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

from data_utils import path_checks, paths, table_records
from data_utils.errors import UsageError, UserError
from data_utils.ner.reader import read_ner
from data_utils.text_files import BadLine, file_problem, read_lines

FORMATS = ("auto", "lines", "tsv", "csv", "jsonl", "conll")
_BY_SUFFIX = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl",
              ".conll": "conll"}
DEFAULT_COLUMNS = ("sentence", "text")
_SHOWN_COLUMNS, _SHOWN_CHARS = 10, 40   # of a header, in a message


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
  field (None: the default) and the second text's (None: no pair).
  `flags`: the flags that set the three, as messages name them (None: the
  caller has no such flag)."""
  input_format: str = "auto"
  text_column: Optional[str] = None
  text_b_column: Optional[str] = None
  flags: Tuple[Optional[str], Optional[str], Optional[str]] = (
      "input_format", "text_column", "text_b_column")


def script_spec(column: Optional[str], flag: str = "text_column"
                ) -> InputSpec:
  """The spec of an entry script's `--input_file`: its format from the
  file name, one text column set by `--{flag}`.

  Example:
    >>> script_spec("prefix", "context_column").flags
    (None, 'context_column', None)
  """
  return InputSpec("auto", column, None, (None, flag, None))


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
  repeats. A pattern matching nothing, or matching anything that is not a
  regular UTF-8 text file (a FIFO, a directory, a UTF-16 file: see
  `data_utils.text_files.file_problem`), is a UsageError naming it. A
  pattern may be a bucket URL (`gs://`, `s3://`): its store is checked
  first (`path_checks.check_store`: one line for a missing bucket, no
  credentials, a dead endpoint)."""
  files = []
  for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
    path_checks.check_store(pattern, "input")
    found = paths.glob(pattern)
    if not found:
      raise UsageError(f"--input={pattern}: matches no file")
    for path in found:
      problem = file_problem(path)
      if problem:
        raise UsageError(f"{path}: {problem}")
    files.extend(found)
  if not files:
    raise UsageError("--input is empty")
  return list(dict.fromkeys(files))


def check_spec(spec: InputSpec, first_file: str) -> None:
  """Flag checks before any work: the format is known, a column is only
  asked of formats that have columns, and the first file's header has it
  (or, with no column named, `sentence` or `text`)."""
  if spec.input_format not in FORMATS:
    raise UsageError(f"--{spec.flags[0]}={spec.input_format}: use one of "
                     f"{', '.join(FORMATS)}")
  kind = file_format(first_file, spec.input_format)
  if kind in ("lines", "conll"):
    for flag, value in ((spec.flags[1], spec.text_column),
                        (spec.flags[2], spec.text_b_column)):
      if value is not None:
        raise UsageError(f"--{flag}={value}: {first_file} is read as "
                         f"{kind}, which has no columns")
  if kind in ("tsv", "csv"):
    with _open_binary(first_file) as f:
      header, problem = table_records.header(read_lines(f), kind)
    if not problem:
      problem = _columns(spec, header, first_file, kind)[1]
    if problem:
      raise UsageError(f"{first_file}:1: {problem}")


def _open_binary(path: str):
  """`path` opened to read bytes, with a `readline(size)` (`read_lines`
  bounds each line; fsspec's files take no size, so a bucket's file is
  buffered by io)."""
  f = paths.open_file(path, "rb")
  return io.BufferedReader(f) if paths.is_remote(path) else f


def read_rows(path: str, spec: InputSpec, empty_ok: bool = False,
              keep: Tuple[str, ...] = ()) -> Iterator[Union[Row, DeadRow]]:
  """Every row of `path` in order (see the module docstring). `empty_ok`:
  an empty text is a row, not a dead one; `keep`: JSONL fields to keep
  as they are, when a row has them (e.g. an infill text's `spans`)."""
  problem = file_problem(path)
  if problem:
    yield DeadRow(path, 0, problem)
    return
  kind = file_format(path, spec.input_format)
  if kind == "conll":
    yield from _conll_rows(path)
    return
  with _open_binary(path) as f:
    lines = read_lines(f)
    if kind == "lines":
      for n, text in lines:
        if isinstance(text, BadLine):
          yield DeadRow(path, n, text.reason)
        else:
          yield _text_row(path, n, {"text": text.rstrip("\r\n")},
                          empty_ok)
    elif kind == "jsonl":
      yield from _jsonl_rows(lines, path, spec, empty_ok, keep)
    else:
      yield from _table_rows(lines, path, kind, spec, empty_ok)


def _text_row(path: str, line: int, fields: dict, empty_ok: bool
              ) -> Union[Row, DeadRow]:
  if not empty_ok and not fields["text"].strip():
    return DeadRow(path, line, "empty text")
  return Row(path, line, fields)


def _jsonl_rows(lines, path, spec, empty_ok, keep
                ) -> Iterator[Union[Row, DeadRow]]:
  field, field_b = spec.text_column or "text", spec.text_b_column
  for n, line in lines:
    if isinstance(line, BadLine):
      yield DeadRow(path, n, line.reason)
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
      fields.update((k, value[k]) for k in keep if k in value)
      yield _text_row(path, n, fields, empty_ok)


def _names(header: List[str]) -> str:
  """The header's column names for a one-line message, cut short."""
  names = [n if len(n) <= _SHOWN_CHARS else n[:_SHOWN_CHARS - 1] + "…"
           for n in header[:_SHOWN_COLUMNS]]
  more = (f", … ({len(header)} columns)" if len(header) > _SHOWN_COLUMNS
          else "")
  return ", ".join(names) + more


def _no_text_column(header: List[str], path: str, kind: str,
                    flags: Tuple[Optional[str], ...]) -> str:
  hint = f"name the text column with --{flags[1]}"
  # A one-column "header", or a table format forced on another name: the
  # first line may be a text of a file with one text per line.
  if len(header) == 1 or file_format(path) != kind:
    hint += (f", or read one text per line with --{flags[0]}=lines"
             if flags[0] else ", or give one text per line in a .txt file")
  return (f"no {' or '.join(DEFAULT_COLUMNS)} column (the header has "
          f"{_names(header)}); {hint}")


def _columns(spec: InputSpec, header: List[str], path: str, kind: str
             ) -> Tuple[List[str], Optional[str]]:
  """`(the columns asked for, None)`, or `([], why the header lacks
  one)`. With no column named: `sentence`, else `text`, else none is
  guessed (the first column of a GLUE pair file is its index)."""
  first = spec.text_column
  if first is None:
    first = next((c for c in DEFAULT_COLUMNS if c in header), None)
    if first is None:
      return [], _no_text_column(header, path, kind, spec.flags)
  columns = [first] + ([spec.text_b_column] if spec.text_b_column else [])
  for column in columns:
    if not (column in header
            or (column.isdigit() and int(column) < len(header))):
      return [], f"no column {column!r} (the header has {_names(header)})"
  return columns, None


def _column_index(header: List[str], column: str) -> int:
  return header.index(column) if column in header else int(column)


def _table_rows(lines, path, kind, spec, empty_ok
                ) -> Iterator[Union[Row, DeadRow]]:
  header, problem = table_records.header(lines, kind)
  if problem:
    yield DeadRow(path, 1, problem)
    return
  columns, problem = _columns(spec, header, path, kind)
  if problem:
    # Every row of the file is dead, each with the reason.
    for n, _ in lines:
      yield DeadRow(path, n, problem)
    return
  indices = [_column_index(header, c) for c in columns]
  for line, record in table_records.records(lines, kind):
    if isinstance(record, BadLine):
      yield DeadRow(path, line, record.reason)
      continue
    missing = [i for i in indices if i >= len(record)]
    if missing:
      yield DeadRow(path, line, f"{len(record)} columns, no column "
                    f"{missing[0]} ({header[missing[0]]})")
      continue
    fields = {"text": record[indices[0]]}
    if len(indices) > 1:
      fields["text_b"] = record[indices[1]]
    yield _text_row(path, line, fields, empty_ok)


def _conll_rows(path: str) -> Iterator[Union[Row, DeadRow]]:
  # The CoNLL reader opens local files: a bucket's file is read from a
  # download into this unit's own scratch folder (removed after).
  data, problem = None, None
  with paths.local_copy(path) as local:
    try:
      data = read_ner(local, untagged=True)
    except UserError as e:
      problem = str(e).replace(local, path)
  if data is None:
    # The whole file cannot be read (its reason names the line).
    yield DeadRow(path, 0, problem)
    return
  for sentence in data.sentences:
    yield Row(path, sentence.line, {"words": list(sentence.words),
                                    "scheme": data.scheme,
                                    "document": sentence.document})


def error_line(row: DeadRow) -> str:
  """A dead row as one error line: `file:line: reason`, or `file: reason`
  for a whole file.

  Example:
    >>> error_line(DeadRow("in.tsv", 3, "2 columns, no column 2 (b)"))
    'in.tsv:3: 2 columns, no column 2 (b)'
    >>> error_line(DeadRow("in.txt", 0, "a directory, not a file"))
    'in.txt: a directory, not a file'
  """
  where = f"{row.file}:{row.line}" if row.line else row.file
  return f"{where}: {row.reason}"


def read_all(path: str, spec: InputSpec, keep: Tuple[str, ...] = ()
             ) -> List[Row]:
  """Every row of an entry script's input, or a UserError: `check_spec`'s
  line, else the first dead row's `error_line`. Empty texts are rows (a
  script's output line n is its input's text n). CoNLL sentences are no
  texts: a `.conll` file is refused."""
  # As `input_files` does for a batch job: the file first, then its header.
  problem = file_problem(path)
  if problem:
    raise UsageError(f"{path}: {problem}")
  check_spec(spec, path)
  if file_format(path, spec.input_format) == "conll":
    raise UsageError(f"{path}: CoNLL sentences (one word per line) are "
                     "read only by batch prediction; give one text per "
                     "line, a .tsv or .csv column or a .jsonl field")
  rows = []
  for row in read_rows(path, spec, empty_ok=True, keep=keep):
    if isinstance(row, DeadRow):
      raise UserError(error_line(row))
    rows.append(row)
  return rows


def read_texts(path: str, column: Optional[str] = None,
               flag: str = "text_column") -> List[str]:
  """The texts of an entry script's `--input_file` (`read_all`): one per
  line, or a TSV/CSV column or JSONL field named by `--{flag}` (a table's
  default: `sentence`, else `text`; a JSONL's: `text`)."""
  return [row.fields["text"] for row in read_all(path,
                                                 script_spec(column, flag))]
