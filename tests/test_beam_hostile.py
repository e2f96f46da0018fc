"""The two Beam jobs as a hostile but realistic user meets them (issue 35,
third round): flags and files that once gave a traceback, a hang or a lost
file now give one line (`program: what: what is wrong`, exit code 2) or
the right behaviour. In process: each test calls what the command line
calls, with its flag values."""

import contextlib
import io
import os
import shutil
import tracemalloc
import types

import pytest

from data_utils import beam_jobs
from data_utils.errors import UsageError, run_main
from data_utils.pretraining import beam_pipeline, builder
from data_utils.pretraining import save_dir as save_dir_module
from data_utils.pretraining import create_pretrain_data as records_cli
from data_utils.pretraining.examples import DataError, PretrainDataConfig
from conftest import corpus_slice, spiece_path

CFG = PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                         num_predict=6, perm_size=8)


def _record_flags(corpus, save_dir, **values):
  """The records command line's flag values: its defaults, small settings,
  then `values`."""
  given = {name: default for name, (default, *_) in records_cli._FLAGS.items()}
  given.update(split="train", runner=None, pipeline_options=None,
               seq_len=32, reuse_len=16, bsz_per_host=4, num_predict=6,
               perm_size=8, input_glob=corpus["text"], sp_path=corpus["sp"],
               save_dir=str(save_dir))
  given.update(values)
  return types.SimpleNamespace(**given)


def _line(program, body):
  """What a run of `body` under the entry point prints: `(exit code, the
  stderr lines)`."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main(program, body)
  return code, err.getvalue().splitlines()


@pytest.fixture(scope="module")
def corpus(shared, tmp_path_factory):
  work = tmp_path_factory.mktemp("hostile")
  return {"work": work, "text": corpus_slice(shared, work, 200),
          "sp": spiece_path(shared)}


@pytest.mark.parametrize("flag,value,line", [
    ("bsz_per_host", 0, "bsz_per_host (0) must be a positive multiple of "
     "num_core_per_host (1 > 0)"),
    ("bsz_per_host", -4, "bsz_per_host (-4) must be a positive multiple of "
     "num_core_per_host (1 > 0)"),
    ("num_core_per_host", 0, "bsz_per_host (4) must be a positive multiple "
     "of num_core_per_host (0 > 0)"),
    ("reuse_len", -16, "seq_len (32) and reuse_len (-16) must be positive: "
     "the stream advances by reuse_len tokens per step")])
def test_records_zero_or_negative_batch_is_one_line(corpus, flag, value,
                                                    line):
  # bsz_per_host=0 once divided by zero after tokenizing (a traceback).
  save_dir = corpus["work"] / f"zero-{flag}"
  f = _record_flags(corpus, save_dir, **{flag: value})
  code, err = _line("create_pretrain_data",
                    lambda: records_cli.build_from_flags(f))
  assert (code, err) == (2, [f"create_pretrain_data: {line}"])
  assert not save_dir.exists()


def _with_peak(fn):
  """`(fn(), the peak of what Python allocated while it ran)`."""
  tracemalloc.start()
  try:
    return fn(), tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()


def test_records_huge_batch_is_one_line_in_bounded_memory(corpus):
  # --bsz_per_host=1000000000 once built per-stream tables for a billion
  # streams of no tokens (10 GB and rising) before finding no step.
  save_dir = corpus["work"] / "huge-bsz"
  f = _record_flags(corpus, save_dir, bsz_per_host=2_000_000)
  (code, err), peak = _with_peak(lambda: _line(
      "create_pretrain_data", lambda: records_cli.build_from_flags(f)))
  assert code == 2 and len(err) == 1, err
  assert err[0].startswith("create_pretrain_data: no example could be "
                           "built: ") and "2000000 streams" in err[0], err
  assert peak < 64 << 20, peak
  assert not list(save_dir.glob("**/*.tfrecords"))


def test_records_input_gone_on_a_beam_worker_is_one_line(corpus):
  # A file removed after the driver's checks once failed the Beam build
  # with a worker's FileNotFoundError traceback; the plain CLI said one line.
  gone = corpus["work"] / "gone.txt"
  shutil.copy(corpus["text"], gone)
  job = builder.prepare_job([str(gone)], CFG, str(corpus["work"] / "gone"),
                            corpus["sp"])
  gone.unlink()
  with pytest.raises(RuntimeError) as e:
    beam_pipeline.tokenize_unit(tuple(job.tasks[0][0].to_list()), job)
  with pytest.raises(DataError) as line:
    beam_jobs._reraise_marked(e.value, DataError)  # as the driver does
  assert str(line.value) == f"{gone}: No such file or directory"


@pytest.mark.parametrize("flag,value,line", [
    # numpy's generator once refused it after tokenizing (a traceback).
    ("seed", -1, "--seed=-1: must be at least 0"),
    # Once a list of a billion pass ids before any check (memory).
    ("num_passes", 10**9, "--num_passes=1000000000: at most 10000 (each "
     "pass is the whole corpus again)"),
    # Once five million empty tasks built before saying so.
    ("num_task", 5 * 10**6, "task 1 of 5000000 has no input file (1 files "
     "in all)")])
def test_records_flags_out_of_range_are_one_line_up_front(corpus, flag,
                                                          value, line):
  save_dir = corpus["work"] / f"range-{flag}"
  f = _record_flags(corpus, save_dir, **{flag: value})
  (code, err), peak = _with_peak(lambda: _line(
      "create_pretrain_data", lambda: records_cli.build_from_flags(f)))
  assert (code, err) == (2, [f"create_pretrain_data: {line}"])
  assert peak < 64 << 20, peak
  assert not save_dir.exists()


def test_records_two_builds_at_once_into_one_save_dir(corpus):
  # Two runs with other settings started together both passed the on-disk
  # check (neither had written yet) and mixed their records in tfrecords/.
  save_dir = corpus["work"] / "at-once"
  running = builder.prepare_job(
      [corpus["text"]], PretrainDataConfig(seq_len=64, reuse_len=32,
                                           bsz_per_host=4, num_predict=6,
                                           perm_size=8),
      str(save_dir), corpus["sp"])
  same = _record_flags(corpus, save_dir, max_batches=1)
  with builder.claimed(running):
    code, err = _line("create_pretrain_data",
                      lambda: records_cli.build_from_flags(same))
    assert (code, err) == (2, [
        f"create_pretrain_data: --save_dir={save_dir}: another build is "
        "being written into it now (seq_len=64, this run seq_len=32); wait "
        "for it to end, or use another --save_dir"])
    assert os.listdir(save_dir) == [save_dir_module.BUILD_LOCK]
  assert not os.listdir(save_dir)  # the last run out removes the lock file
  # Runs of one build share it (the plain CLI's one process per task).
  with builder.claimed(builder.prepare_job([corpus["text"]], CFG,
                                           str(save_dir), corpus["sp"],
                                           max_batches=1)):
    records_cli.build_from_flags(same)
  assert sorted(os.listdir(save_dir)) == [
      ".xlnet_tf_outputs.json", "corpus_info.json", "ids_cache", "tfrecords"]



@pytest.mark.parametrize("theirs", ["file", "symlink", "folder"])
def test_a_file_of_yours_at_the_lock_name_is_kept(corpus, theirs):
  """A file, symlink or folder at `.xlnet_tf_build.lock` that no run of
  ours left is one line, exit 2, and stays as it was (it used to be
  truncated, written and removed)."""
  save_dir = corpus["work"] / f"lock-{theirs}"
  save_dir.mkdir()
  lock = save_dir / save_dir_module.BUILD_LOCK
  notes = corpus["work"] / f"notes-{theirs}"
  notes.write_text("my notes")
  why = {"file": "it is neither empty nor a build's settings",
         "symlink": "a symlink", "folder": "a folder"}[theirs]
  {"file": lambda: lock.write_text("my notes"),
   "symlink": lambda: lock.symlink_to(notes),
   "folder": lock.mkdir}[theirs]()
  code, err = _line("create_pretrain_data", lambda: records_cli.build_from_flags(
      _record_flags(corpus, save_dir, max_batches=1)))
  assert (code, err) == (2, [
      f"create_pretrain_data: {lock}: not a build lock of xlnet-tf ({why}); "
      "it is left as it is: remove it if it is not yours, or use another "
      "--save_dir"])
  assert os.listdir(save_dir) == [save_dir_module.BUILD_LOCK]
  assert notes.read_text() == "my notes"
  if theirs == "file":
    assert lock.read_text() == "my notes"
  lock.unlink() if theirs != "folder" else lock.rmdir()
  lock.write_text("")  # a run killed before writing its settings left it
  code, err = _line("create_pretrain_data", lambda: records_cli.build_from_flags(
      _record_flags(corpus, save_dir, max_batches=1)))
  assert (code, err) == (0, []), err
  assert save_dir_module.BUILD_LOCK not in os.listdir(save_dir)

def test_negative_direct_workers_is_one_line():
  # Both jobs' check: Beam accepted it and its local runner then failed on
  # an empty worker list (an IndexError traceback, exit 1).
  with pytest.raises(UsageError) as e:
    beam_jobs.check_options("DirectRunner", "--direct_num_workers=-2 "
                            "--direct_running_mode=multi_processing")
  assert str(e.value) == ("--pipeline_options: --direct_num_workers=-2: "
                          "must be at least 0 (0: one per CPU)")
  assert beam_jobs.check_options("DirectRunner", "--direct_num_workers=0")
