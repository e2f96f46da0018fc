"""run_batch_predict.py as a user meets it: bad rows go to the dead-letter
shards and the job goes on; a re-run replaces its own outputs (stale shards
go) and never a file it did not write; every bad flag, a missing export or
an export of the wrong kind stops the job before any work with one line and
exit code 2."""

import json
import os
import subprocess
import sys
import types

import pytest

import xlnet_tf as xt
from conftest import ROOT, refused_line, spiece_path
from data_utils.errors import UsageError
from xlnet_tf.batch_predict.run import run_job
from xlnet_tf.tasks.classification.serving import export_classifier

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_batch_predict  # noqa: E402  pylint: disable=wrong-import-position

TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
DEFAULTS = dict(export_dir=None, input=None, input_format="auto",
                text_column=None, text_b_column=None, output_dir=None,
                job=None, layers=["-1"], pooling=["masked_mean"],
                tfrecord=False, batch_size=4, bucketing=True,
                rows_per_shard=50_000, overwrite=False, runner=None,
                pipeline_options=None)


@pytest.fixture(scope="module")
def exports(shared, tmp_path_factory):
  tmp = tmp_path_factory.mktemp("cli")
  model = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions()), n_class=2,
                             task_name="rte")
  model.build(None)
  labels = ["entailment", "not_entailment"]
  good = export_classifier(model, str(tmp / "export"), 32, False, labels,
                           sp_model_path=spiece_path(shared),
                           text_signatures=False)
  old = export_classifier(model, str(tmp / "old"), 32, False, labels)
  squad = tmp / "squad"
  squad.mkdir()
  (squad / "xlnet_tf_export.json").write_text(json.dumps(
      {"kind": "squad", "files": ["saved_model.pb"]}))
  rows = tmp / "rows.tsv"
  rows.write_bytes(b"index\tsentence1\tsentence2\n0\tA man sleeps.\tHe rests."
                   b"\n1\tonly one column\n2\t\xffbad\tbytes\n3\t \tempty a\n"
                   b"4\tIt rains.\tThe street is wet.\n")
  return {"tmp": tmp, "good": good, "old": old, "squad": str(squad),
          "rows": str(rows)}


def _flags(**values):
  return types.SimpleNamespace(**dict(DEFAULTS, **values))


def _refusal(**values):
  with pytest.raises(UsageError) as e:
    run_batch_predict.job_from_flags(_flags(**values))
  return str(e.value)


def test_bad_rows_are_dead_letters_and_the_job_goes_on(exports):
  out = exports["tmp"] / "out"
  res = subprocess.run(
      [sys.executable, "run_batch_predict.py",
       f"--export_dir={exports['good']}", f"--input={exports['rows']}",
       "--text_column=sentence1", "--text_b_column=sentence2",
       f"--output_dir={out}", "--batch_size=2"],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  report = json.loads(res.stdout.strip().splitlines()[-1])
  assert report == {"rows_read": 5, "predicted": 2, "dead_letters": 3,
                    "padding": report["padding"], "output_dir": str(out),
                    "shards": 1, "dead_letter_shards": 1}
  path = exports["rows"]
  with open(out / "dead-letter-00000-of-00001.jsonl") as f:
    dead = [json.loads(line) for line in f]
  assert dead == [
      {"file": path, "line": 3, "reason": "2 columns, no column 2 "
       "(sentence2)"},
      {"file": path, "line": 4, "reason": "not UTF-8 text (byte 0xff at "
       "column 3)"},
      {"file": path, "line": 5, "reason": "empty text"}]
  with open(out / "predictions-00000-of-00001.jsonl") as f:
    rows = [json.loads(line) for line in f]
  assert [(r["file"], r["line"]) for r in rows] == [(path, 2), (path, 6)]
  assert all(r["label"] in ("entailment", "not_entailment") for r in rows)


def test_rerun_replaces_its_own_outputs_and_refuses_a_users_file(exports):
  out = exports["tmp"] / "rerun"
  flags = dict(export_dir=exports["good"], input=exports["rows"],
               text_column="sentence1", text_b_column="sentence2",
               output_dir=str(out))
  job, args = run_batch_predict.job_from_flags(_flags(rows_per_shard=1,
                                                      **flags))
  first = run_job(job, args)
  assert len(first["shards"]) == 2 and len(first["dead_letter_shards"]) == 3
  mine = out / "notes.txt"
  mine.write_text("the user's")
  job, args = run_batch_predict.job_from_flags(_flags(**flags))
  second = run_job(job, args)
  names = sorted(os.listdir(out))
  assert names == [".xlnet_tf_outputs.json", "dead-letter-00000-of-00001.jsonl",
                   "manifest.json", "notes.txt",
                   "predictions-00000-of-00001.jsonl"]
  assert second["counts"] == first["counts"]
  assert mine.read_text() == "the user's"
  # A file of the job's names that the job did not write is never replaced.
  with open(out / "predictions-00000-of-00001.jsonl", "a") as f:
    f.write("edited by hand\n")
  where = f"--output_dir={out}"
  assert _refusal(**flags) == (
      f"{where}: predictions-00000-of-00001.jsonl exists and was not written "
      "by xlnet-tf (or was changed since); move it, or pass --overwrite to "
      "replace it")
  # Another input into the same folder: not this job's outputs.
  assert _refusal(**dict(flags, input=exports["rows"] + ",")) == \
      _refusal(**flags)


def test_refusals_name_the_flag_before_any_work(exports, tmp_path):
  tsv = exports["rows"]
  base = dict(export_dir=exports["good"], input=tsv, output_dir=str(
      tmp_path / "o"), text_column="sentence1")
  cases = [
      (dict(export_dir=str(tmp_path / "none")),
       f"--export_dir={tmp_path / 'none'}: no such directory"),
      (dict(export_dir=str(tmp_path)), f"--export_dir={tmp_path}: not an "
       "xlnet-tf export (no readable xlnet_tf_export.json)"),
      (dict(export_dir=exports["squad"]), f"--export_dir={exports['squad']}"
       ": a squad export; batch prediction takes classifier, regressor, "
       "token_classifier, language_model exports"),
      (dict(export_dir=exports["old"]), f"--export_dir={exports['old']}: "
       "made without its SentencePiece model (exported before batch "
       "prediction, or without --spiece_model_file); export it again"),
      (dict(input=str(tmp_path / "*.none")),
       f"--input={tmp_path / '*.none'}: matches no file"),
      (dict(text_column="premise"), f"{tsv}:1: no column 'premise' (the "
       "header has index, sentence1, sentence2)"),
      (dict(job="embed"), "--job=embed: only for a language-model export "
       "(this is a classifier export)"),
      (dict(batch_size=0), "--batch_size=0: must be at least 1"),
      (dict(runner="NoSuchRunner"), None),
      (dict(pipeline_options="--direct_running_mode=fast"),
       "--pipeline_options: argument --direct_running_mode: invalid choice: "
       "'fast' (choose from 'in_memory', 'multi_threading', "
       "'multi_processing')"),
      (dict(output_dir=tsv), f"--output_dir={tsv}: is a file")]
  for values, line in cases:
    got = _refusal(**dict(base, **values))
    if line is None:
      assert got.startswith("--runner=NoSuchRunner: ")
    else:
      assert got == line
  assert not os.path.exists(tmp_path / "o")
  # The script: one line on stderr, exit code 2, no traceback.
  assert refused_line("run_batch_predict.py", [
      f"--export_dir={exports['squad']}", f"--input={tsv}",
      f"--output_dir={tmp_path / 'o'}"]) == (
          "run_batch_predict: " + cases[2][1])
