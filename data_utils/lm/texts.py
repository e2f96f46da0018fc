"""Texts to embed, score, continue or fill, read from a file: one text per
line (`.txt` or any other name), a TSV column (`.tsv`, by header name or
0-based index) or a JSONL field (`.jsonl`). Bad input is one line naming the
file and line."""

from __future__ import annotations

import csv
import json
from typing import List, Optional, Tuple

from data_utils import paths
from data_utils.errors import UserError
from data_utils.text_files import utf8_error


def text_format(path: str, column: Optional[str] = None) -> str:
  """'tsv', 'jsonl' or 'lines', from the file name (and whether a column or
  field was asked for).

  Example:
    >>> text_format("dev.tsv", "sentence"), text_format("a.jsonl")
    ('tsv', 'jsonl')
    >>> text_format("notes.txt")
    'lines'
  """
  lowered = path.lower()
  if lowered.endswith(".jsonl"):
    return "jsonl"
  if lowered.endswith(".tsv") or (column is not None
                                  and not lowered.endswith(".txt")):
    return "tsv"
  return "lines"


def _tsv_column(header: List[str], column: str, path: str) -> int:
  if column in header:
    return header.index(column)
  if column.isdigit() and int(column) < len(header):
    return int(column)
  raise UserError(f"{path}:1: no column {column!r} (the header has "
                  f"{', '.join(header)})")


def read_texts(path: str, column: Optional[str] = None) -> List[str]:
  """The texts of `path`.

  `column`: a TSV column (header name or 0-based index; default 'sentence'
  if the header has it, else 'text', else the first column) or a JSONL field
  (default 'text'). Plain lines are taken whole (the newline dropped);
  empty lines count as empty texts, so line n of the output is line n of
  the input.
  """
  return [text for _, text in read_numbered_texts(path, column)]


def read_numbered_texts(path: str, column: Optional[str] = None
                        ) -> List[Tuple[int, str]]:
  """`read_texts` with each text's line number in the file (1-based), for
  messages that point at it."""
  if not paths.isfile(path):
    raise UserError(f"{path}: no such file")
  kind = text_format(path, column)
  try:
    with paths.open_file(path, encoding="utf-8", newline="") as f:
      if kind == "lines":
        return [(n, line.rstrip("\r\n")) for n, line in enumerate(f, 1)]
      if kind == "jsonl":
        return _read_jsonl(f, path, column or "text")
      return _read_tsv(f, path, column)
  except UnicodeDecodeError:
    raise UserError(utf8_error(path)) from None


def _read_jsonl(f, path: str, field: str) -> List[Tuple[int, str]]:
  texts = []
  for line_no, line in enumerate(f, start=1):
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except json.JSONDecodeError as e:
      raise UserError(f"{path}:{line_no}: not JSON ({e.msg})") from None
    if not isinstance(row, dict) or not isinstance(row.get(field), str):
      raise UserError(f"{path}:{line_no}: no string field {field!r}")
    texts.append((line_no, row[field]))
  return texts


def _read_tsv(f, path: str, column: Optional[str]
              ) -> List[Tuple[int, str]]:
  rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
  header = next(rows, None)
  if header is None:
    raise UserError(f"{path}: empty file (a TSV needs a header line)")
  if column is None:
    column = next((c for c in ("sentence", "text") if c in header), "0")
  index = _tsv_column(header, column, path)
  texts = []
  for line_no, row in enumerate(rows, start=2):
    if not row:
      continue
    if index >= len(row):
      raise UserError(f"{path}:{line_no}: {len(row)} columns, no column "
                      f"{index} ({header[index]})")
    texts.append((line_no, row[index]))
  return texts
