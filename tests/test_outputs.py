"""Files a run writes beside the user's: the output ledger
(`data_utils/outputs.py`), the one temp-file rule (`data_utils/atomic.py`),
and the refusals of the builder and SentencePiece flags that used to write
something else than asked."""

import contextlib
import io
import json
import os
import sys
import threading

import pytest

from data_utils import atomic
from data_utils.errors import UsageError, UserError, run_main
from data_utils.lm.embedding_files import EmbeddingWriter
from data_utils.outputs import (LEDGER, check_outputs, record_outputs,
                                write_output)
from data_utils.train_spiece import train_spiece
from conftest import (corpus_slice, early_result, run, shared_dir, spiece_path,
                      tree_digest)


def _refusal(paths, **kw):
  with pytest.raises(UsageError) as err:
    check_outputs([str(p) for p in paths], "predict_dir", **kw)
  return str(err.value)


def test_ledger_replaces_only_our_unchanged_output_of_the_same_input(
    tmp_path):
  out = tmp_path / "out"
  source = str(tmp_path / "a.txt")
  path = str(out / "a.txt.predictions.conll")
  write_output(path, "first\n", "predict_dir", source=source)
  # A re-run from the same input replaces it.
  write_output(path, "second\n", "predict_dir", source=source)
  assert open(path).read() == "second\n"
  with open(out / LEDGER) as f:
    ledger = json.load(f)["files"]
  assert ledger == {"a.txt.predictions.conll": {
      "sha256": tree_digest(path)["."], "source": source}}
  # Another input's run does not.
  other = str(tmp_path / "b" / "a.txt")
  assert _refusal([path], source=other) == (
      f"--predict_dir={out}: a.txt.predictions.conll holds the output of "
      f"{source}, not of {other}; use another --predict_dir, or pass "
      "--overwrite")
  # Once the user edits it, it is theirs.
  with open(path, "a") as f:
    f.write("my note\n")
  assert _refusal([path], source=source) == (
      f"--predict_dir={out}: a.txt.predictions.conll exists and was not "
      "written by xlnet-tf (or was changed since); move it, or pass "
      "--overwrite to replace it")
  before = tree_digest(out)
  with pytest.raises(UsageError):
    write_output(path, "third\n", "predict_dir", source=source)
  assert tree_digest(out) == before
  # --overwrite is the user's word.
  write_output(path, "third\n", "predict_dir", overwrite=True, source=source)
  assert open(path).read() == "third\n"


def test_inputs_folders_and_foreign_ledgers_are_refused(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  given = data / "eng.testb"
  given.write_text("EU B-ORG\n")
  # Even with --overwrite, an output never lands on an input.
  assert _refusal([given], overwrite=True, source=str(given),
                  inputs=[str(given)]) == (
      f"--predict_dir={data}: eng.testb is the input {given}; it is never "
      "replaced")
  (data / "sub").mkdir()
  assert _refusal([data / "sub"], overwrite=True) == (
      f"--predict_dir={data}: sub exists and is not a file this run may "
      "replace")
  assert _refusal([given / "x.conll"]) == (
      f"--predict_dir={given}: {given} is a file, not a directory")
  (data / LEDGER).write_text("my own notes\n")
  with pytest.raises(UserError) as err:
    check_outputs([str(data / "new.conll")], "predict_dir")
  assert str(err.value) == (f"{data}/{LEDGER}: not the output ledger of "
                            "xlnet-tf; move it away (it is not replaced)")
  assert (data / LEDGER).read_text() == "my own notes\n"


def _record_many(directory, worker):
  for k in range(40):
    record_outputs(directory, {f"{worker}-{k}.bin": f"{k:064x}"}, lock=True)


def test_writers_in_parallel_lose_no_ledger_entry(tmp_path):
  # What the record builder's tasks do: each records its own files in one
  # folder's ledger at the same time as the others. (Threads: flock treats
  # each open of the lock file apart, in one process as across processes;
  # without the lock, about 3 in 4 entries are lost here.)
  workers = [threading.Thread(target=_record_many, args=(str(tmp_path), w))
             for w in range(4)]
  for w in workers:
    w.start()
  for w in workers:
    w.join()
  with open(tmp_path / LEDGER, encoding="utf-8") as f:
    assert len(json.load(f)["files"]) == 4 * 40
  # The named folder in a line when the files lie below the flag's folder.
  sub = tmp_path / "tfrecords"
  sub.mkdir()
  (sub / "a.tfrecords").write_text("mine")
  assert _refusal([sub / "a.tfrecords"], value=str(tmp_path)) == (
      f"--predict_dir={tmp_path}: tfrecords/a.tfrecords exists and was not "
      "written by xlnet-tf (or was changed since); move it, or pass "
      "--overwrite to replace it")


def test_every_writer_removes_the_temps_of_a_dead_writer(tmp_path):
  dead = f"{atomic.TEMP_PREFIX}{atomic.host_name()}-999999999-"
  live = f"{atomic.temp_prefix()}keep"
  other_host = f"{atomic.TEMP_PREFIX}elsewhere-999999999-abc"
  for name in (dead + "file", live, other_host, ".tmp-mine"):
    (tmp_path / name).write_text("x")
  (tmp_path / (dead + "dir")).mkdir()
  (tmp_path / (dead + "dir") / "part").write_text("x")
  # A file written atomically into the folder cleans it first.
  atomic.write_text(str(tmp_path / "out.txt"), "hi")
  assert sorted(os.listdir(tmp_path)) == sorted(
      [live, other_host, ".tmp-mine", "out.txt"])
  # So does a writer's temp folder (SentencePiece, checkpoints, HF saves).
  (tmp_path / (dead + "again")).write_text("x")
  with atomic.temp_dir(str(tmp_path)) as tmp:
    assert os.path.basename(tmp).startswith(atomic.temp_prefix())
    assert not (tmp_path / (dead + "again")).exists()
  assert not os.path.exists(tmp)


def test_a_killed_embedding_runs_temps_go_at_the_next_run(tmp_path):
  # What a SIGKILLed run_embed.py leaves: its writer's temps (a pid that no
  # longer runs), beside the user's own file.
  dead = [tmp_path / f"{atomic.TEMP_PREFIX}{atomic.host_name()}-999999999-{k}"
          for k in ("a1", "b2")]
  for path in dead:
    path.write_bytes(b"partial")
  (tmp_path / "notes.txt").write_text("mine")
  with pytest.raises(RuntimeError):
    with EmbeddingWriter(str(tmp_path / "out.jsonl"), [1], [0], 4,
                         ["mean"]):
      assert not any(p.exists() for p in dead)
      raise RuntimeError("stop")  # an interrupted run leaves no file
  assert os.listdir(tmp_path) == ["notes.txt"]


def test_train_spiece_refuses_a_folder_prefix(shared, tmp_path):
  corpus = corpus_slice(shared, tmp_path, 50)
  (tmp_path / "d").mkdir()
  before = tree_digest(tmp_path)
  for prefix in (f"{tmp_path}/d/", f"{tmp_path}/d"):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      code = run_main("train_spiece", lambda: train_spiece(
          corpus, prefix, vocab_size=100))
    assert (code, err.getvalue()) == (2, (
        f"train_spiece: --model_prefix={prefix}: names a folder; give a "
        f"file prefix (e.g. {os.path.join(prefix, 'spiece')}) for "
        "<prefix>.model and <prefix>.vocab\n"))
  assert tree_digest(tmp_path) == before


BUILDER_FLAGS = [
    ("--num_passes=0", "--num_passes=0: must be at least 1"),
    ("--max_batches=-1", "--max_batches=-1: must be at least 0"),
    ("--pass_id=-2", "--pass_id=-2: must be at least 0"),
    ("--input_glob={tmp}/nothing/*.txt",
     "--input_glob={tmp}/nothing/*.txt: matches no file"),
]


def builder_runs(work):
  """The builder's run for each flag of BUILDER_FLAGS, each in a folder of
  its own (an early run: see conftest): flag -> (folder, result)."""
  shared, runs = shared_dir(), {}
  for k, (flag, _) in enumerate(BUILDER_FLAGS):
    tmp_path = work / str(k)
    tmp_path.mkdir()
    corpus = corpus_slice(shared, tmp_path, 20)
    args = [f"--input_glob={corpus}", f"--sp_path={spiece_path(shared)}",
            f"--save_dir={tmp_path}/proc", "--seq_len=16", "--reuse_len=8",
            "--bsz_per_host=2", "--num_predict=3", flag.format(tmp=tmp_path)]
    runs[flag] = tmp_path, run(
        [sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
         *args], 300)
  return runs


@pytest.mark.early("builder_runs")
@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("flag, line", BUILDER_FLAGS)
def test_create_pretrain_data_flags(flag, line):
  tmp_path, res = early_result(builder_runs)[flag]
  line = line.format(tmp=tmp_path)
  assert res.returncode == 2, res.stderr[-2000:]
  assert res.stderr.strip().splitlines()[-1] == f"create_pretrain_data: {line}"
  assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]
