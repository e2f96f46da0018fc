"""run_batch_predict.py as a user meets it: bad rows go to the dead-letter
shards and the job goes on; a re-run replaces its own outputs (stale shards
go) and never a file it did not write; every bad flag, a missing, damaged
or incomplete export, an export of the wrong kind or inputs it does not
read stop the job before any work with one line and exit code 2; a full
disk at any point of the job leaves the folder as it was, or in a state
the same command run again owns, with one line."""

import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import xlnet_tf as xt
from conftest import ROOT, refused, refused_line, spiece_path, start
from data_utils import outputs
from data_utils.atomic import temp_dir
from data_utils.errors import UsageError, UserError, run_main
from xlnet_tf.batch_predict import pipeline as batch_pipeline
from xlnet_tf.batch_predict import run as batch_run
from xlnet_tf.batch_predict.run import check_output_dir, publish, run_job
from xlnet_tf.tasks.classification.serving import export_classifier

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_batch_predict  # noqa: E402  pylint: disable=wrong-import-position

TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
DEFAULTS = dict(export_dir=None, input=None, input_format="auto",
                text_column=None, text_b_column=None, output_dir=None,
                job=None, layers=["-1"], pooling=["masked_mean"],
                tfrecord=False, batch_size=4, bucketing="global",
                precision="float32", xla=False,
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
  conll = tmp / "news.conll"
  conll.write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n", encoding="utf-8")
  return {"tmp": tmp, "good": good, "old": old, "squad": str(squad),
          "rows": str(rows), "conll": str(conll)}


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
  path = os.path.basename(exports["rows"])  # named in its folder
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
      (dict(output_dir=tsv), f"--output_dir={tsv}: is a file"),
      # CoNLL sentences have no text a classifier reads (was a KeyError
      # inside the pipeline).
      (dict(input=exports["conll"], text_column=None),
       f"--input={exports['conll']}: a .conll file is read as CoNLL "
       "sentences, which are read only by a token_classifier export (this "
       "is a classifier export); give --input_format=lines, tsv, csv or "
       "jsonl"),
      (dict(input=exports["conll"], text_column=None, input_format="conll"),
       "--input_format=conll: CoNLL sentences are read only by a "
       "token_classifier export (this is a classifier export); give "
       "--input_format=lines, tsv, csv or jsonl"),
      # Was "no such directory" for a file that is there.
      (dict(export_dir=tsv), f"--export_dir={tsv}: a file, not an "
       "export's folder")]
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


def test_output_dir_in_the_export_is_refused(exports):
  # Was accepted: the shards, manifest and ledger went into the export's
  # own folder, to be copied and served with the model.
  before = sorted(os.listdir(exports["good"]))
  for out in (exports["good"], os.path.join(exports["good"], "preds")):
    assert _refusal(export_dir=exports["good"], input=exports["rows"],
                    text_column="sentence1", output_dir=out) == (
        f"--output_dir={out}: inside --export_dir={exports['good']}; write "
        "the predictions to another folder")
  assert sorted(os.listdir(exports["good"])) == before


def _damaged_copy(exports, name, damage):
  path = exports["tmp"] / name
  shutil.copytree(exports["good"], path)
  damage(path / "variables")
  return str(path)


def _truncate(variables):
  data = variables / "variables.data-00000-of-00001"
  os.truncate(data, os.path.getsize(data) // 2)


def test_a_damaged_export_is_refused_before_any_work(exports, tmp_path):
  """A copy without variables/, without its data shard or with the shard
  cut short: one line naming --export_dir and the file (it used to pass the
  checks and fail inside RunInference on every worker)."""
  no_variables = _damaged_copy(exports, "no_variables", shutil.rmtree)
  # The script, started now: it overlaps the checks below.
  script = start([sys.executable, "run_batch_predict.py",
                  f"--export_dir={no_variables}", f"--input={exports['rows']}",
                  f"--output_dir={tmp_path / 'o'}"])
  no_data = _damaged_copy(exports, "no_data", lambda v: os.remove(
      v / "variables.data-00000-of-00001"))
  cut = _damaged_copy(exports, "cut", _truncate)
  base = dict(input=exports["rows"], output_dir=str(tmp_path / "o"),
              text_column="sentence1")
  want = {
      no_variables: f"--export_dir={no_variables}: variables/variables.index "
                    "is missing (an incomplete copy?); export it again",
      no_data: f"--export_dir={no_data}: variables/variables.data-00000-of-"
               "00001 is missing (an incomplete copy?); export it again",
      cut: f"--export_dir={cut}: variables/variables.data-00000-of-00001 is "
           "truncated or damaged (Read less bytes than requested); export it "
           "again"}
  for path, line in want.items():
    assert _refusal(export_dir=path, **base) == line
  assert not os.path.exists(tmp_path / "o")
  assert refused(script.result()) == "run_batch_predict: " + want[
      no_variables]


def _files(folder):
  """Every file in `folder` (the ledger too) -> its bytes."""
  out = {}
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as f:
      out[name] = f.read()
  return out


def _restore(folder, files):
  shutil.rmtree(folder)
  os.makedirs(folder)
  for name, data in files.items():
    with open(os.path.join(folder, name), "wb") as f:
      f.write(data)


def _fail_at(m, k):
  """From now on, the k-th call of os.replace or write_json (the ledger's or
  the manifest's; each of those renames too) fails as on a full disk."""
  calls = [0]

  def failing(fn):
    def call(*args, **kwargs):
      calls[0] += 1
      if calls[0] == k:
        raise OSError(28, "No space left on device")
      return fn(*args, **kwargs)
    return call
  m.setattr(os, "replace", failing(os.replace))
  m.setattr(batch_run, "write_json", failing(batch_run.write_json))
  m.setattr(outputs, "write_json", failing(outputs.write_json))


def _publish_from(job, staged, fail_at=None, monkeypatch=None):
  """What run_jobs does after the pipeline, from a copy of its output
  `staged`: the job's temp folder in --output_dir, then `publish`, through
  the script's `run_main`. Returns its exit code."""
  with temp_dir(job.output_dir) as job_dir:
    shutil.copytree(staged, job_dir, dirs_exist_ok=True)
    with monkeypatch.context() as m:
      if fail_at:
        _fail_at(m, fail_at)
      def body():
        publish(job, job_dir)
      return run_main("run_batch_predict", body)


class _Kept(Exception):
  """The pipeline's output was kept; publishing stopped."""


def test_a_full_disk_at_any_step_of_publishing_leaves_a_state_the_rerun_owns(
    exports, tmp_path, monkeypatch, capsys):
  """The issue's case: the shards moved into --output_dir, then the manifest
  failed for lack of space, and the ledger did not list the shards, so the
  same command was refused. Now a failure at each step in turn (k = 1, 2,
  ...) leaves the old outputs exactly, or new ones the ledger lists (some
  missing); the user's file is untouched; the failure is one line; and the
  same command then succeeds without --overwrite."""
  out = tmp_path / "out"
  flags = dict(export_dir=exports["good"], input=exports["rows"],
               text_column="sentence1", text_b_column="sentence2",
               output_dir=str(out))
  # The old state: one row per shard (5 shards and the manifest), a user's
  # file, the ledger.
  job, args = run_batch_predict.job_from_flags(_flags(rows_per_shard=1,
                                                      **flags))
  run_job(job, args)
  (out / "notes.txt").write_text("the user's")
  old = _files(out)
  # The new job writes one shard per stream: the old shards are stale, the
  # manifest replaced. Its pipeline's output, kept once.
  job, args = run_batch_predict.job_from_flags(_flags(**flags))
  staged = tmp_path / "staged"

  def keep(job_, job_dir):
    shutil.copytree(job_dir, staged)
    raise _Kept  # stop before publishing
  with monkeypatch.context() as m:
    m.setattr(batch_run, "publish", keep)
    with pytest.raises(_Kept):
      run_job(job, args)
  assert _files(out) == old
  assert _publish_from(job, staged, monkeypatch=monkeypatch) == 0
  new = _files(out)
  assert sorted(new) == [".xlnet_tf_outputs.json",
                         "dead-letter-00000-of-00001.jsonl", "manifest.json",
                         "notes.txt", "predictions-00000-of-00001.jsonl"]
  unchanged = (f"run_batch_predict: --output_dir={out}: no space left on "
               "device; nothing in it was changed (free some space, then run "
               "the same command again)")
  placing = (f"run_batch_predict: --output_dir={out}: no space left on "
             "device while moving the new outputs into place; some are "
             "missing (free some space, then run the same command again: it "
             "replaces them)")
  seen = []
  for k in range(1, 40):
    _restore(out, old)
    capsys.readouterr()
    code = _publish_from(job, staged, k, monkeypatch)
    if code == 0:
      break
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    seen.append(err.strip().splitlines()[-1])
    assert seen[-1] in (unchanged, placing), (k, seen[-1])
    after = _files(out)
    assert after["notes.txt"] == b"the user's"
    if seen[-1] == unchanged:
      assert after == old, k
    else:  # each output is missing or its new bytes, and the ledger says so
      assert after[".xlnet_tf_outputs.json"] == new[".xlnet_tf_outputs.json"]
      assert all(after[n] == new[n] for n in after), k
    # The same command again: its checks pass and it publishes, no
    # --overwrite; the folder is then as after a run that never failed.
    check_output_dir(job)
    assert _publish_from(job, staged, monkeypatch=monkeypatch) == 0, k
    assert _files(out) == new, k
  # Every step failed once: the manifest written, 6 files set aside, the
  # ledger (each of those writes, then its rename), 3 files moved in.
  assert k == 14 and seen.count(placing) == 3
  # The case for real: the manifest's move fails; the same command
  # (pipeline and all) then succeeds without --overwrite.
  _restore(out, old)
  assert _publish_from(job, staged, 13, monkeypatch) == 2
  assert "manifest.json" not in os.listdir(out)
  job, args = run_batch_predict.job_from_flags(_flags(**flags))
  manifest = run_job(job, args)
  assert sorted(_files(out)) == sorted(new)
  for entry in manifest["shards"] + manifest["dead_letter_shards"]:
    assert _files(out)[entry["name"]] == new[entry["name"]]
  assert _files(out)["notes.txt"] == b"the user's"


def test_a_full_disk_while_writing_shards_is_one_line(exports, tmp_path,
                                                     monkeypatch):
  out = tmp_path / "out"
  job, args = run_batch_predict.job_from_flags(_flags(
      export_dir=exports["good"], input=exports["rows"],
      text_column="sentence1", output_dir=str(out)))

  def full(*args, **kwargs):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(batch_pipeline, "write_shard", full)
  with pytest.raises(UserError) as e:
    run_job(job, args)
  assert str(e.value) == (
      f"--output_dir={out}: no space left on device; nothing in it was "
      "changed (free some space, then run the same command again)")
  assert os.listdir(out) == []
