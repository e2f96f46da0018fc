"""The language-model scripts and batch prediction read one input the same
way (data_utils/text_inputs.py): the same rows of every format, and for a
bad file the script's one error line is the line of batch prediction's
first dead row, or its flag check's. A script stops at that row; a batch
job goes on after it. The one difference is the empty text: a script's
text (its output line n is its input's text n), a batch job's dead row."""

import codecs
import json
import os
import subprocess
import sys
import types
import uuid

import pytest

from conftest import ROOT
from object_stores import make_s3_bucket
from data_utils.errors import UsageError, UserError
from data_utils.lm import infill
from data_utils.text_inputs import (DeadRow, InputSpec, check_spec,
                                    error_line, input_files, read_all,
                                    read_rows, read_texts, script_spec)

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_generate  # noqa: E402  pylint: disable=wrong-import-position
import run_infill  # noqa: E402  pylint: disable=wrong-import-position
import run_score  # noqa: E402  pylint: disable=wrong-import-position

GOOD = {
    "a.txt": (None, b"\xef\xbb\xbfFirst.\r\n\nThird, with a comma.\n"),
    "b.tsv": (None, b"label\tsentence\n1\tA cat.\n\n0\tA dog.\n"),
    "c.tsv": ("1", b"id\tbody\n7\tBy index.\n"),
    "d.csv": ("text", b'id,text\n1,"two\nlines"\n2,"a, b"\n'),
    "e.jsonl": ("body", b'{"body": "One."}\n\n{"body": "Two.", "x": 1}\n'),
}
BAD = {
    # name: (column, bytes, the error line after the path)
    "utf8.txt": (None, b"ok\nbad \xff\n", ":2: not UTF-8 text (byte 0xff "
                 "at column 5)"),
    "nul.txt": (None, b"ok\nn\x00ul\n", ":2: NUL byte at column 2 (a binary "
                "file, not text)"),
    "utf16.tsv": (None, "sentence\nHi.\n".encode("utf-16"), ": UTF-16 text "
                  "(a byte-order mark); convert it to UTF-8, e.g. iconv -f "
                  "UTF-16 -t UTF-8"),
    "short.tsv": ("b", b"a\tb\n1\t2\n3\n", ":3: 1 columns, no column 1 (b)"),
    "pairs.tsv": (None, b"index\tsentence1\tsentence2\n0\tA.\tB.\n",
                  ":1: no sentence or text column (the header has index, "
                  "sentence1, sentence2); name the text column with "
                  "--text_column"),
    "named.tsv": ("body", b"sentence\tlabel\nx\t1\n", ":1: no column 'body' "
                  "(the header has sentence, label)"),
    "empty.tsv": (None, b"", ":1: no header line (a tsv file needs one)"),
    "quote.csv": (None, b'id,text\n1,"open\n2,fine\n', ":2: unclosed quote "
                  "(the record from this line runs to the end of the file)"),
    "json.jsonl": (None, b'{"text": "ok"}\nnot json\n', ":2: not JSON "
                   "(Expecting value)"),
    "field.jsonl": (None, b'{"text": "ok"}\n{"text": 3}\n', ":2: no string "
                    "field 'text'"),
}


def _write(tmp_path, name, data):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def _refusal(call, *args, error=UsageError) -> str:
  with pytest.raises(error) as e:
    call(*args)
  return str(e.value)


def _batch_texts(path, column):
  """What `run_batch_predict.py --input=path --text_column=column` reads:
  its flag checks, then the pipeline's rows (empty texts kept, to compare
  with a script's)."""
  spec = InputSpec("auto", column)
  check_spec(spec, input_files(path)[0])
  return [r.fields["text"] for r in read_rows(path, spec, empty_ok=True)]


def _score_texts(path, column):
  """What run_score.py reads (its own reading step)."""
  f = types.SimpleNamespace(text=None, input_file=path, text_column=column,
                            context_column=None)
  return run_score._inputs(f)[0]


def _batch_line(path, column):
  """The batch job's line for a bad file: a flag check's refusal before
  any work, else its first dead row."""
  spec = InputSpec("auto", column)
  try:
    check_spec(spec, input_files(path)[0])
  except UsageError as e:
    return str(e)
  return error_line(next(r for r in read_rows(path, spec)
                         if isinstance(r, DeadRow)))


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_script_and_a_batch_job_read_the_same_rows(tmp_path, name):
  column, data = GOOD[name]
  path = _write(tmp_path, name, data)
  texts = read_texts(path, column)
  assert texts == _batch_texts(path, column) == _score_texts(path, column)
  assert [r.line for r in read_all(path, script_spec(column))] == [
      r.line for r in read_rows(path, InputSpec("auto", column),
                                empty_ok=True)]
  expected = {"a.txt": ["First.", "", "Third, with a comma."],
              "b.tsv": ["A cat.", "A dog."], "c.tsv": ["By index."],
              "d.csv": ["two\nlines", "a, b"], "e.jsonl": ["One.", "Two."]}
  assert texts == expected[name]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_is_the_same_line_in_a_script_and_a_batch_job(tmp_path,
                                                                 name):
  column, data, line = BAD[name]
  path = _write(tmp_path, name, data)
  assert _refusal(_score_texts, path, column, error=UserError) == (
      _batch_line(path, column)) == path + line


def test_the_empty_text_is_a_scripts_text_and_a_batch_jobs_dead_row(
    tmp_path):
  path = _write(tmp_path, "a.txt", b"one\n\ntwo\n")
  assert read_texts(path) == ["one", "", "two"]
  assert list(read_rows(path, InputSpec()))[1] == DeadRow(path, 2,
                                                          "empty text")
  f = types.SimpleNamespace(prompt=None, input_file=path, text_column=None)
  assert _refusal(run_generate._prompts, f) == (
      f"--input_file={path}: text 2 is empty (a prompt needs at least one "
      "token)")


def test_a_scripts_messages_name_only_its_own_flags(tmp_path):
  one = _write(tmp_path, "reviews.tsv", b"review\nGood.\n")
  assert _batch_line(one, None).endswith(
      "or read one text per line with --input_format=lines")
  assert _refusal(read_texts, one) == (
      f"{one}:1: no sentence or text column (the header has review); name "
      "the text column with --text_column, or give one text per line in a "
      ".txt file")
  # run_score's second column is its --context_column.
  tsv = _write(tmp_path, "in.tsv", b"sentence\tprefix\nA.\tB.\n")
  txt = _write(tmp_path, "in.txt", b"A.\n")
  for path, line in ((tsv, f"{tsv}:1: no column 'context' (the header has "
                      "sentence, prefix)"),
                     (txt, f"--context_column=context: {txt} is read as "
                      "lines, which has no columns")):
    f = types.SimpleNamespace(text=None, input_file=path, text_column=None,
                              context_column="context")
    assert _refusal(run_score._inputs, f) == line
  f = types.SimpleNamespace(text=None, input_file=tsv, text_column=None,
                            context_column="prefix")
  assert run_score._inputs(f)[:2] == (["A."], ["B."])


def test_what_the_scripts_read_now_as_batch_prediction_does(tmp_path):
  """Each was read otherwise by the scripts' own reader before."""
  # A .csv is a table (was: its lines, or a TSV when a column was named).
  csv_ = _write(tmp_path, "a.csv", b'text,label\n"Hi, you.",1\n')
  assert read_texts(csv_) == ["Hi, you."]
  # No first column is guessed (a GLUE pair file's first is its index).
  pairs = _write(tmp_path, "rte.tsv", b"index\tsentence1\n0\tA man.\n")
  assert _refusal(read_texts, pairs).endswith("--text_column")
  assert read_texts(pairs, "sentence1") == ["A man."]
  # A column is never silently ignored (a .txt) or a guess at a TSV.
  for name in ("notes.txt", "notes.dat"):
    path = _write(tmp_path, name, b"sentence\nA.\n")
    assert _refusal(read_texts, path, "sentence") == (
        f"--text_column=sentence: {path} is read as lines, which has no "
        "columns")
  # A UTF-8 byte-order mark hides no header column.
  bom = _write(tmp_path, "bom.tsv", codecs.BOM_UTF8 + b"sentence\nA.\n")
  assert read_texts(bom) == ["A."]
  # A .conll file holds words, not texts.
  conll = _write(tmp_path, "eng.conll", b"EU B-ORG\nrejects O\n")
  assert _refusal(read_texts, conll) == (
      f"{conll}: CoNLL sentences (one word per line) are read only by batch "
      "prediction; give one text per line, a .tsv or .csv column or a "
      ".jsonl field")


def test_infill_reads_through_the_same_reader(tmp_path):
  rows = [{"text": "The <mask> sat."}, {"text": "A dog.", "spans": [[2, 5]]}]
  data = _write(tmp_path, "in.jsonl", "".join(
      json.dumps(r) + "\n" for r in rows).encode())
  f = types.SimpleNamespace(input_file=data, text_column=None)
  items = run_infill._items(f)[0]
  assert [(i.text, [(h.start, h.end) for h in i.holes]) for i in items] == [
      ("The <mask> sat.", [(4, 10)]), ("A dog.", [(2, 5)])]
  csv_ = _write(tmp_path, "in.csv", b'id,text\n1,"A <mask>, b"\n2,None.\n')
  assert _refusal(infill.read_infill_file, csv_, error=UserError) == (
      f"{csv_}:3: nothing to fill (no <mask> marker)")
  bad = _write(tmp_path, "bad.jsonl", b'{"text": "a <mask>"}\nnot json\n')
  assert _refusal(infill.read_infill_file, bad, error=UserError) == (
      _batch_line(bad, None)) == f"{bad}:2: not JSON (Expecting value)"


# Reads each file (argv: the local folder holding them, the folder to
# read, then names and columns) both ways, in a fresh interpreter (s3fs
# and gcsfs read their settings when imported); a bucket's files are
# uploaded first.
_BOTH_WAYS = """import json, sys
from data_utils import paths
from data_utils.errors import UserError
from data_utils.text_inputs import (DeadRow, InputSpec, check_spec,
                                    error_line, input_files, read_rows,
                                    read_texts)
source, folder, out = sys.argv[1], sys.argv[2], {}
for name, column in zip(sys.argv[3::2], sys.argv[4::2]):
  path, column = paths.join(folder, name), column or None
  if folder != source:
    paths.upload(paths.join(source, name), path)
  try:
    script = read_texts(path, column)
  except UserError as e:
    script = str(e)
  spec = InputSpec("auto", column)
  try:
    check_spec(spec, input_files(path)[0])
    batch = [r if isinstance(r, DeadRow) else r.fields["text"]
             for r in read_rows(path, spec, empty_ok=True)]
    dead = [r for r in batch if isinstance(r, DeadRow)]
    batch = error_line(dead[0]) if dead else batch
  except UserError as e:
    batch = str(e)
  out[name] = [script, batch]
print(json.dumps(out).replace(folder, "FOLDER"))
"""


def _both_ways(source, folder, files, env=None):
  argv = [a for name, column in files for a in (name, column or "")]
  proc = subprocess.run([sys.executable, "-c", _BOTH_WAYS, source, folder,
                         *argv], cwd=ROOT, env={**os.environ, **(env or {})},
                        capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_bucket_file_reads_as_the_same_file_on_disk(s3_server, tmp_path):
  """Both readers open files through data_utils.paths: on s3:// the same
  rows and the same error lines as on a local disk."""
  files = {**GOOD, **{name: case[:2] for name, case in BAD.items()}}
  for name, (_, data) in files.items():
    _write(tmp_path, name, data)
  pairs = [(name, column) for name, (column, _) in files.items()]
  local = _both_ways(str(tmp_path), str(tmp_path), pairs)
  assert all(script == batch for script, batch in local.values()), local
  assert local["utf8.txt"][0] == ("FOLDER/utf8.txt:2: not UTF-8 text (byte "
                                  "0xff at column 5)")
  bucket = f"texts-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, bucket)
  assert _both_ways(str(tmp_path), f"s3://{bucket}", pairs,
                    s3_server.env) == local
