"""The rows a batch job reads (data_utils/batch_inputs.py): every format
keyed by (file, line), bad rows as dead rows with one-line reasons and the
good rows around them intact, flag checks before any work."""

import pytest

from data_utils.batch_inputs import (DeadRow, InputSpec, Row, check_spec,
                                     file_format, input_files, read_rows)
from data_utils.errors import UsageError


def _write(path, data: bytes):
  path.write_bytes(data)
  return str(path)


def test_lines_with_bad_utf8_and_empty_texts(tmp_path):
  path = _write(tmp_path / "a.txt", b"first\nbad \xff byte\n\n  \nlast\r\n")
  assert list(read_rows(path, InputSpec())) == [
      Row(path, 1, {"text": "first"}),
      DeadRow(path, 2, "not UTF-8 text (byte 0xff at column 5)"),
      DeadRow(path, 3, "empty text"), DeadRow(path, 4, "empty text"),
      Row(path, 5, {"text": "last"})]


def test_tsv_pairs_and_rows_missing_a_column(tmp_path):
  path = _write(tmp_path / "d.tsv", b"index\tsentence1\tsentence2\n"
                b"0\tA one.\tB one.\n1\tonly a\n2\t\xfe\tx\n3\tA \"q\tB\n")
  spec = InputSpec("auto", "sentence1", "sentence2")
  check_spec(spec, path)
  assert list(read_rows(path, spec)) == [
      Row(path, 2, {"text": "A one.", "text_b": "B one."}),
      DeadRow(path, 3, "2 columns, no column 2 (sentence2)"),
      DeadRow(path, 4, "not UTF-8 text (byte 0xfe at column 3)"),
      Row(path, 5, {"text": "A \"q", "text_b": "B"})]


def test_csv_record_over_two_lines_keeps_its_first_line(tmp_path):
  path = _write(tmp_path / "d.csv", b'id,text\n1,"two\nlines"\n2,plain\n'
                b'3,""\n')
  assert list(read_rows(path, InputSpec())) == [
      Row(path, 2, {"text": "two\nlines"}), Row(path, 4, {"text": "plain"}),
      DeadRow(path, 5, "empty text")]


def test_jsonl_bad_lines_and_missing_fields(tmp_path):
  path = _write(tmp_path / "r.jsonl", b'{"text": "ok", "b": "x"}\n\n'
                b'{"text": 3}\nnot json\n{"body": "no text"}\n')
  assert list(read_rows(path, InputSpec())) == [
      Row(path, 1, {"text": "ok"}),
      DeadRow(path, 3, "no string field 'text'"),
      DeadRow(path, 4, "not JSON (Expecting value)"),
      DeadRow(path, 5, "no string field 'text'")]
  pairs = list(read_rows(path, InputSpec("auto", None, "b")))
  assert pairs[0] == Row(path, 1, {"text": "ok", "text_b": "x"})
  assert pairs[1] == DeadRow(path, 3, "no string field 'text'")


def test_conll_sentences_keyed_by_their_first_line(tmp_path):
  path = _write(tmp_path / "eng.conll", b"-DOCSTART- -X- O O\n\n"
                b"EU NNP B-NP I-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP "
                b"I-PER\n\n-DOCSTART- -X- O O\n\nBonn NNP B-NP I-LOC\n\n")
  assert file_format(path) == "conll"
  rows = list(read_rows(path, InputSpec()))
  assert rows == [
      Row(path, 3, {"words": ["EU", "rejects"], "scheme": "IOB1",
                    "document": 0}),
      Row(path, 6, {"words": ["Peter"], "scheme": "IOB1", "document": 0}),
      Row(path, 10, {"words": ["Bonn"], "scheme": "IOB1", "document": 1})]


def test_a_file_without_the_column_has_every_row_dead(tmp_path):
  good = _write(tmp_path / "a.tsv", b"sentence\nfine\n")
  other = _write(tmp_path / "b.tsv", b"text2\nx\ny\n")
  spec = InputSpec("auto", "sentence")
  check_spec(spec, good)
  reason = "no column 'sentence' (the header has text2)"
  assert list(read_rows(other, spec)) == [DeadRow(other, 2, reason),
                                          DeadRow(other, 3, reason)]


def test_flag_checks_name_the_flag_or_file(tmp_path):
  tsv = _write(tmp_path / "a.tsv", b"sentence\tlabel\nx\t1\n")
  txt = _write(tmp_path / "a.txt", b"x\n")
  cases = [
      (InputSpec("xml"), tsv, "--input_format=xml: use one of auto, lines, "
       "tsv, csv, jsonl, conll"),
      (InputSpec("auto", "body"), tsv, f"{tsv}:1: no column 'body' (the "
       "header has sentence, label)"),
      (InputSpec("auto", "text"), txt, f"--text_column=text: {txt} is read "
       "as lines, which has no columns")]
  for spec, path, line in cases:
    with pytest.raises(UsageError) as e:
      check_spec(spec, path)
    assert str(e.value) == line
  with pytest.raises(UsageError) as e:
    input_files(f"{tmp_path}/*.tsv,{tmp_path}/none-*.txt")
  assert str(e.value) == f"--input={tmp_path}/none-*.txt: matches no file"
  assert input_files(f"{tmp_path}/*.t*,{tsv}") == [tsv, txt]
