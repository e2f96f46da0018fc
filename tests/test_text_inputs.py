"""The rows a batch job reads (data_utils/text_inputs.py): every format
keyed by (file, line), bad rows as dead rows with one-line reasons and the
good rows around them intact, flag checks before any work; odd files as a
user expects them (UTF-16, a BOM, a text file read as a table, a header
without a text column, an unclosed CSV quote, a FIFO, an over-long line)."""

import codecs
import contextlib
import os
import signal
import tracemalloc

import pytest

from data_utils import table_records
from data_utils.errors import UsageError
from data_utils.text_inputs import (DeadRow, InputSpec, Row, check_spec,
                                    file_format, input_files, read_rows)


def _write(path, data: bytes):
  path.write_bytes(data)
  return str(path)


def _refused(call, *args):
  with pytest.raises(UsageError) as e:
    call(*args)
  return str(e.value)


@contextlib.contextmanager
def _deadline(seconds: int):
  """Fails the test instead of hanging (an open FIFO waits for a writer)."""
  def stop(signum, frame):
    raise TimeoutError(f"still running after {seconds} s")
  old = signal.signal(signal.SIGALRM, stop)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


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


def test_utf16_and_utf32_files_are_refused_by_name(tmp_path):
  text = "sentence\nHello there.\n"
  cases = [
      ("bom16.txt", text.encode("utf-16"), "UTF-16 text (a byte-order "
       "mark); convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8"),
      ("be16.tsv", codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
       "UTF-16 text (a byte-order mark); convert it to UTF-8, e.g. iconv -f "
       "UTF-16 -t UTF-8"),
      ("bom32.jsonl", text.encode("utf-32"), "UTF-32 text (a byte-order "
       "mark); convert it to UTF-8, e.g. iconv -f UTF-32 -t UTF-8"),
      ("le16.csv", text.encode("utf-16-le"), "UTF-16LE text (NUL bytes "
       "between the letters, no byte-order mark); convert it to UTF-8, e.g. "
       "iconv -f UTF-16LE -t UTF-8"),
      ("be32.conll", text.encode("utf-32-be"), "UTF-32BE text (NUL bytes "
       "between the letters, no byte-order mark); convert it to UTF-8, e.g. "
       "iconv -f UTF-32BE -t UTF-8")]
  good = _write(tmp_path / "good.txt", b"fine\n")
  for name, data, reason in cases:
    path = _write(tmp_path / name, data)
    # Refused before any work, even behind a good file...
    assert _refused(input_files, f"{good},{path}") == f"{path}: {reason}"
    # ...and, read anyway, the whole file is one dead row, not NUL texts.
    assert list(read_rows(path, InputSpec())) == [DeadRow(path, 0, reason)]


def test_a_nul_byte_in_a_utf8_line_is_a_dead_row(tmp_path):
  path = _write(tmp_path / "a.txt", b"one\ntw\x00o\nthree\n")
  assert input_files(path) == [path]
  assert list(read_rows(path, InputSpec())) == [
      Row(path, 1, {"text": "one"}),
      DeadRow(path, 2, "NUL byte at column 3 (a binary file, not text)"),
      Row(path, 3, {"text": "three"})]
  tsv = _write(tmp_path / "a.tsv", b"sentence\nok\n\x00x\n")
  assert list(read_rows(tsv, InputSpec()))[1] == DeadRow(
      tsv, 3, "NUL byte at column 1 (a binary file, not text)")
  # A file of NUL bytes is no UTF-16 text, and no text: one dead row.
  zeros = _write(tmp_path / "z.txt", b"\0" * 1_000_000)
  assert input_files(zeros) == [zeros]
  assert list(read_rows(zeros, InputSpec())) == [DeadRow(
      zeros, 1, "NUL byte at column 1 (a binary file, not text)")]


def test_a_utf8_bom_is_an_encoding_mark_in_every_format(tmp_path):
  bom = codecs.BOM_UTF8
  lines = _write(tmp_path / "a.txt", bom + b"Hello.\nBye.\n")
  assert list(read_rows(lines, InputSpec())) == [
      Row(lines, 1, {"text": "Hello."}), Row(lines, 2, {"text": "Bye."})]
  # The header's first column is found, by default and by name.
  tsv = _write(tmp_path / "a.tsv", bom + b"sentence\tlabel\nHi.\t1\n")
  csv_ = _write(tmp_path / "a.csv", bom + b"text,label\n\"Hi, you.\",1\n")
  for path, column in ((tsv, None), (tsv, "sentence"), (csv_, "text")):
    spec = InputSpec("auto", column)
    check_spec(spec, path)
    assert list(read_rows(path, spec))[0].fields == {
        "text": "Hi." if path == tsv else "Hi, you."}
  # An error lists the columns without the invisible mark.
  assert _refused(check_spec, InputSpec("auto", "body"), tsv) == (
      f"{tsv}:1: no column 'body' (the header has sentence, label)")
  jsonl = _write(tmp_path / "a.jsonl", bom + b'{"text": "Hi."}\n')
  assert list(read_rows(jsonl, InputSpec())) == [
      Row(jsonl, 1, {"text": "Hi."})]
  conll = _write(tmp_path / "a.conll", bom + b"-DOCSTART- -X- O O\n\nEU NNP "
                 b"B-NP I-ORG\n\n-DOCSTART- -X- O O\n\nBonn NNP B-NP I-LOC\n")
  bare = _write(tmp_path / "b.conll", bom + b"EU\nrejects\n\nBonn\n")
  assert [(r.line, r.fields["words"], r.fields["document"])
          for r in read_rows(conll, InputSpec())] == [
              (3, ["EU"], 0), (7, ["Bonn"], 1)]
  assert [r.fields["words"] for r in read_rows(bare, InputSpec())] == [
      ["EU", "rejects"], ["Bonn"]]


def test_a_text_file_read_as_a_table_keeps_its_first_line(tmp_path):
  txt = _write(tmp_path / "notes.txt", b"The cat sat.\nThe dog ran.\n")
  spec = InputSpec("tsv")
  hint = ("name the text column with --text_column, or read one text per "
          "line with --input_format=lines")
  assert _refused(check_spec, spec, txt) == (
      f"{txt}:1: no sentence or text column (the header has The cat sat.); "
      f"{hint}")
  # A later file like it: its rows are dead, none silently predicted.
  assert list(read_rows(txt, spec)) == [DeadRow(
      txt, 2, f"no sentence or text column (the header has The cat sat.); "
      f"{hint}")]
  # A text with commas forced to csv is no header with columns either.
  commas = _write(tmp_path / "c.txt", b"Hello, world\nBye\n")
  assert _refused(check_spec, InputSpec("csv"), commas) == (
      f"{commas}:1: no sentence or text column (the header has Hello,  "
      f"world); {hint}")
  # A one-column table is named: its header could be a first text.
  one = _write(tmp_path / "reviews.tsv", b"review\nGood.\nBad.\n")
  assert _refused(check_spec, InputSpec(), one) == (
      f"{one}:1: no sentence or text column (the header has review); "
      f"{hint}")
  check_spec(InputSpec("auto", "review"), one)
  assert [r.fields for r in read_rows(one, InputSpec("auto", "review"))] \
      == [{"text": "Good."}, {"text": "Bad."}]


def test_a_glue_pair_header_asks_for_the_text_column(tmp_path):
  first = _write(tmp_path / "a.tsv", b"sentence\tlabel\nfine\t1\n")
  pairs = _write(tmp_path / "rte.tsv", b"index\tsentence1\tsentence2\tlabel"
                 b"\n0\tA man.\tHe.\tentailment\n1\tX.\tY.\tnot_entailment\n")
  reason = ("no sentence or text column (the header has index, sentence1, "
            "sentence2, label); name the text column with --text_column")
  assert _refused(check_spec, InputSpec(), pairs) == f"{pairs}:1: {reason}"
  # A second file, after a first that has `sentence`: every row dead, none
  # classified by its index.
  check_spec(InputSpec(), first)
  assert list(read_rows(pairs, InputSpec())) == [
      DeadRow(pairs, 2, reason), DeadRow(pairs, 3, reason)]
  # Named, the columns are read; `text` is the second default.
  spec = InputSpec("auto", "sentence1", "sentence2")
  check_spec(spec, pairs)
  assert list(read_rows(pairs, spec))[0] == Row(
      pairs, 2, {"text": "A man.", "text_b": "He."})
  texts = _write(tmp_path / "t.csv", b"id,text\n1,Hi.\n")
  assert list(read_rows(texts, InputSpec())) == [Row(texts, 2,
                                                     {"text": "Hi."})]
  # A wide header is cut short in the message.
  wide = _write(tmp_path / "w.tsv", "\t".join(
      [f"c{i}" for i in range(11)] + ["x" * 50]).encode() + b"\n")
  assert _refused(check_spec, InputSpec(), wide) == (
      f"{wide}:1: no sentence or text column (the header has c0, c1, c2, "
      "c3, c4, c5, c6, c7, c8, c9, … (12 columns)); name the text column "
      "with --text_column")


def test_an_unclosed_csv_quote_is_dead_and_reading_goes_on(tmp_path,
                                                          monkeypatch):
  # The quote on line 2 runs into line 4, whose field opens a quote of its
  # own: line 2 is dead and lines 3 on are read again.
  path = _write(tmp_path / "a.csv", b'id,text\n1,"open\n2,fine\n3,"two\n'
                b'lines"\n4,"ab"c\n5,last\n')
  assert list(read_rows(path, InputSpec())) == [
      DeadRow(path, 2, "unclosed quote (the record from this line runs "
              "into line 4: ',' expected after '\"')"),
      Row(path, 3, {"text": "fine"}), Row(path, 4, {"text": "two\nlines"}),
      DeadRow(path, 6, "not csv (',' expected after '\"')"),
      Row(path, 7, {"text": "last"})]
  # No quote after it: the record runs to the end of the file.
  end = _write(tmp_path / "b.csv", b'id,text\n1,"open\n2,fine\n\n3,also')
  assert list(read_rows(end, InputSpec())) == [
      DeadRow(end, 2, "unclosed quote (the record from this line runs to "
              "the end of the file)"),
      Row(end, 3, {"text": "fine"}), Row(end, 5, {"text": "also"})]
  # A bounded record: its lines are never gathered past the bound.
  monkeypatch.setattr(table_records, "MAX_RECORD_CHARS", 20)
  big = _write(tmp_path / "c.csv", b'id,text\n1,"open\n2,aaaa\n3,"bb\xff\n'
               b'4,cccc\n5,"a\n"\n')
  assert list(read_rows(big, InputSpec())) == [
      DeadRow(big, 4, "not UTF-8 text (byte 0xff at column 6)"),
      DeadRow(big, 2, "unclosed quote (the record from this line runs "
              "over 20 characters)"),
      Row(big, 3, {"text": "aaaa"}), Row(big, 5, {"text": "cccc"}),
      Row(big, 6, {"text": "a\n"})]



def test_only_regular_files_are_read_and_none_is_opened(tmp_path):
  good = _write(tmp_path / "a.txt", b"fine\n")
  fifo = str(tmp_path / "b.txt")
  os.mkfifo(fifo)
  folder = tmp_path / "c.txt"
  folder.mkdir()
  with _deadline(10):
    assert _refused(input_files, f"{tmp_path}/a.txt,{fifo}") == (
        f"{fifo}: a named pipe (FIFO), not a regular file")
    assert _refused(input_files, f"{tmp_path}/*.txt") == (
        f"{fifo}: a named pipe (FIFO), not a regular file")
    assert list(read_rows(fifo, InputSpec())) == [
        DeadRow(fifo, 0, "a named pipe (FIFO), not a regular file")]
    assert _refused(input_files, str(folder)) == (
        f"{folder}: a directory, not a file (name its files, e.g. "
        f"{folder}/*)")
  broken = tmp_path / "gone.txt"
  broken.symlink_to(tmp_path / "nowhere")
  assert _refused(input_files, str(broken)) == (
      f"{broken}: does not exist (a broken link?)")
  assert input_files(f"{tmp_path}/a.*") == [good]


def test_an_overlong_line_is_dead_and_skipped_at_bounded_memory(tmp_path):
  size = 20 << 20
  path = tmp_path / "big.txt"
  with open(path, "wb") as f:
    f.write(b"first\n")
    f.write(b"x" * size + b"\n")
    f.write(b"after\n")
    f.write(b"y" * size)   # the last line, no newline
  path = str(path)
  reason = f"line too long: {size} bytes (the limit is 1 MiB)"
  tracemalloc.start()
  try:
    rows = list(read_rows(path, InputSpec()))
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert rows == [Row(path, 1, {"text": "first"}), DeadRow(path, 2, reason),
                  Row(path, 3, {"text": "after"}), DeadRow(path, 4, reason)]
  # A few pieces of 1 MiB held at once, never the 20 MiB line.
  assert peak < 8 << 20, peak
  # In a table too, the header included.
  tsv = _write(tmp_path / "t.tsv", b"sentence\n" + b"z" * (1 << 20) +
               b"1\nok\n")
  assert list(read_rows(tsv, InputSpec())) == [
      DeadRow(tsv, 2, f"line too long: {(1 << 20) + 1} bytes (the limit "
              "is 1 MiB)"), Row(tsv, 3, {"text": "ok"})]
  head = _write(tmp_path / "h.tsv", b"s" * (2 << 20) + b"\nok\n")
  assert _refused(check_spec, InputSpec(), head) == (
      f"{head}:1: no header line (line too long: {2 << 20} bytes (the "
      "limit is 1 MiB))")
