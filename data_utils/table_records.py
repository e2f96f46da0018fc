"""The records of a TSV or CSV file from its lines (`read_lines`'s
`(n, text or BadLine)`), bounded: a header, then `(first line, fields)` for
each record or `(line, BadLine(reason))` for each that cannot be read.

  tsv   tab-separated, no quoting (as GLUE writes them): a record is a line
  csv   comma-separated with CSV quoting: a quoted field may span lines,
        and a record is keyed by the line it starts on

A CSV quote left open would swallow the rest of the file into one field.
Here a record whose quote is not closed by the end of the file, or within
MAX_RECORD_CHARS characters, or that runs into a field that opens a quote
of its own, is dead at its first line ("unclosed quote"), and its other
lines are read again, so one stray quote costs one row:

    >>> lines = enumerate(['1,"open\\n', '2,fine\\n', '3,also'], 2)
    >>> for line, fields in records(lines, "csv"):
    ...   print(line, fields)
    2 BadLine(reason='unclosed quote (the record from this line runs to the end of the file)')
    3 ['2', 'fine']
    4 ['3', 'also']
"""

from __future__ import annotations

import collections
import csv
from typing import Deque, Iterator, List, Optional, Tuple, Union

from data_utils.text_files import MAX_LINE_BYTES, BadLine

MAX_RECORD_CHARS = MAX_LINE_BYTES   # a CSV record's lines, together

# csv's own field limit (131072 characters, for the whole process) would
# cut a quoted field before MAX_RECORD_CHARS does, or not, depending on
# what else was imported (data_utils.classification.reader lifts it).
if csv.field_size_limit() < 2 * MAX_RECORD_CHARS:
  csv.field_size_limit(2 * MAX_RECORD_CHARS)

Lines = Iterator[Tuple[int, Union[str, BadLine]]]


def header(lines: Lines, kind: str) -> Tuple[List[str], Optional[str]]:
  """`(columns, None)` from the table's first line (taken from `lines`),
  or `([], why there is no header)`."""
  _, text = next(lines, (1, ""))
  if isinstance(text, BadLine):
    return [], f"no header line ({text.reason})"
  if not text.rstrip("\r\n"):
    return [], f"no header line (a {kind} file needs one)"
  try:
    return next(_reader([text], kind)), None
  except csv.Error as e:
    return [], f"header line not {kind} ({e})"


def records(lines: Lines, kind: str
            ) -> Iterator[Tuple[int, Union[List[str], BadLine]]]:
  """`(first line, fields)` for each non-blank record of `lines` (after
  the header), `(line, BadLine)` for each line or record that cannot be
  read (see the module docstring)."""
  yield from _Records(lines, kind)


def _reader(lines, kind: str):
  if kind == "tsv":
    return csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
  # strict: a quote that does not end its field is an error, not text, so
  # an unclosed quote stops at the next field that opens one.
  return csv.reader(lines, strict=True)


class _RecordTooLong(Exception):
  """Raised through csv's reader when a record's lines pass the bound."""


class _Records:
  """csv pulls the lines it needs from `_feed`, which notes the record's
  lines; a record cut short is dead and its lines after the first go to a
  new reader (csv's cannot be reset)."""

  def __init__(self, lines: Lines, kind: str):
    self.lines, self.kind = lines, kind
    self.again: Deque[Tuple[int, str]] = collections.deque()
    self.record: List[Tuple[int, str]] = []
    self.size = 0
    self.bad: List[Tuple[int, BadLine]] = []
    self.reader = _reader(self._feed(), kind)

  def _feed(self) -> Iterator[str]:
    while True:
      if self.again:
        n, text = self.again.popleft()
      else:
        n, text = next(self.lines, (0, None))
        if text is None:
          # The end: an empty line, which csv only asks for inside an open
          # quote (line 0 marks it in the record).
          self.record.append((0, ""))
          yield ""
          return
        if isinstance(text, BadLine):
          self.bad.append((n, text))
          continue
      if self.record and self.size + len(text) > MAX_RECORD_CHARS:
        self.again.appendleft((n, text))
        raise _RecordTooLong
      self.record.append((n, text))
      self.size += len(text)
      yield text

  def _drop(self, reason: str):
    """The record is dead; its lines after the first are read again."""
    self.again.extendleft(reversed([r for r in self.record[1:] if r[0]]))
    self.reader = _reader(self._feed(), self.kind)
    yield from self._take_bad()
    yield self.record[0][0], BadLine(reason)

  def _why(self, error: csv.Error) -> str:
    """A csv error in words: one in a record over several lines is a
    quote left open on its first line."""
    lines = [n for n, _ in self.record if n]
    if self.record[-1][0] == 0:
      return ("unclosed quote (the record from this line runs to the end "
              "of the file)")
    if len(lines) > 1:
      return (f"unclosed quote (the record from this line runs into line "
              f"{lines[-1]}: {error})")
    return f"not {self.kind} ({error})"

  def _take_bad(self):
    bad, self.bad = self.bad, []
    yield from bad

  def __iter__(self):
    while True:
      self.record, self.size = [], 0
      try:
        fields = next(self.reader)
      except StopIteration:
        yield from self._take_bad()
        return
      except _RecordTooLong:
        yield from self._drop("unclosed quote (the record from this line "
                              f"runs over {MAX_RECORD_CHARS:,} characters)")
        continue
      except csv.Error as e:
        yield from self._drop(self._why(e))
        continue
      yield from self._take_bad()
      if fields:
        yield self.record[0][0], fields
