"""The pretraining-records builder never loses a user's file, never hangs,
and turns every bad input into one line: the output ledger in save_dir, one
build per save_dir, inputs that are not regular files, over-long lines,
binary files and flags that cannot work."""

import contextlib
import io
import json
import math
import os
import sys
import threading
import time
import tracemalloc
import types

import pytest
import tensorflow as tf

from data_utils.errors import UserError, run_main
from data_utils.outputs import LEDGER
from data_utils.pretraining import beam_pipeline, builder, ids_cache
from data_utils.pretraining import create_pretrain_data as cli
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.task_split import next_document_end, plan_tasks
from conftest import (corpus_slice, early_result, refused, run, shared_dir,
                      spiece_path, tree_digest)

CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)
SEED = 3
NAME = "bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.perm-8"
LONG_LINE = (":1: line longer than 1048576 bytes (1 MiB, the longest line "
             "the builder reads; the input is one sentence or paragraph per "
             "line)")


@pytest.fixture(scope="module")
def corpus(shared, tmp_path_factory):
  """Two small text files (tasks 0 and 1 with --num_task=2) and the model."""
  work = tmp_path_factory.mktemp("records")
  whole = corpus_slice(shared, work, 600)
  with open(whole, encoding="utf-8") as f:
    lines = f.readlines()
  paths = []
  for k, part in enumerate((lines[:300], lines[300:])):
    paths.append(str(work / f"part-{k}.txt"))
    with open(paths[-1], "w", encoding="utf-8") as f:
      f.writelines(part + ["\n"])
  return {"paths": paths, "sp": spiece_path(shared)}


def _build(corpus, save_dir, cfg=CFG, **kw):
  kw.setdefault("seed", SEED)
  return create_pretrain_data(corpus["paths"][:1], cfg, str(save_dir),
                              corpus["sp"], max_batches=2, **kw)


def _refused(fn):
  with pytest.raises(UserError) as e:
    fn()
  return str(e.value)


def _not_ours(save, name):
  """The line for a file at one of the build's names that is not ours."""
  return (f"--save_dir={save}: {name} exists and was not written by "
          "xlnet-tf (or was changed since); move it, or pass --overwrite to "
          "replace it")


def _ledger(directory):
  with open(os.path.join(directory, LEDGER), encoding="utf-8") as f:
    return {n: e["sha256"] for n, e in json.load(f)["files"].items()}


def _flags(**values):
  """The command line's flag values: the defaults, then `values`."""
  f = {name: default for name, (default, *_) in cli._FLAGS.items()}
  f.update(split="train", runner=None, pipeline_options=None, seq_len=32,
           reuse_len=16, bsz_per_host=4, num_predict=6, perm_size=8)
  f.update(values)
  return types.SimpleNamespace(**f)


def _cli_line(timeout=60, **values):
  """(exit code, stderr) of the command line's work in this process, on a
  thread: a read that blocks fails the test instead of hanging it."""
  out = {}

  def work():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      out["code"] = run_main("create_pretrain_data",
                             lambda: cli.build_from_flags(_flags(**values)))
    out["err"] = err.getvalue()
  thread = threading.Thread(target=work, daemon=True)
  thread.start()
  thread.join(timeout)
  assert not thread.is_alive(), f"still running after {timeout} s: a hang"
  return out["code"], out["err"]


# 1. The ledger ---------------------------------------------------------------

def test_a_users_corpus_info_is_never_replaced(corpus, tmp_path):
  save = tmp_path / "proc"
  save.mkdir()
  (save / "corpus_info.json").write_text('{"my": "notes"}\n')
  before = tree_digest(tmp_path)
  line = _not_ours(save, "corpus_info.json")
  assert _refused(lambda: _build(corpus, save)) == line
  assert tree_digest(tmp_path) == before  # no tfrecords/ or ids_cache/ either
  # --overwrite is the user's word; then the file is ours, in the ledger.
  assert len(_build(corpus, save, overwrite=True)) == 1
  assert _ledger(save) == {
      "corpus_info.json": tree_digest(save / "corpus_info.json")["."]}
  # Edited since, it is the user's again.
  with open(save / "corpus_info.json", "a", encoding="utf-8") as f:
    f.write("\n")
  before = tree_digest(tmp_path)
  assert _refused(lambda: _build(corpus, save)) == line
  assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("name", [
    f"train-0-0.{NAME}.tfrecords", f"record_info-train-0-0.{NAME}.json"])
def test_a_users_file_at_a_records_name_is_never_replaced(corpus, tmp_path,
                                                          name):
  save = tmp_path / "proc"
  (save / "tfrecords").mkdir(parents=True)
  (save / "tfrecords" / name).write_bytes(b"the user's own bytes\n")
  before = tree_digest(tmp_path)
  line = _not_ours(save, f"tfrecords/{name}")
  assert _refused(lambda: _build(corpus, save)) == line
  # Beam's driver checks the same before the pipeline starts.
  job = builder.prepare_job(corpus["paths"][:1], CFG, str(save), corpus["sp"],
                            seed=SEED, max_batches=2)
  assert _refused(lambda: beam_pipeline.run(
      job, ["--runner=DirectRunner"])) == line
  assert tree_digest(tmp_path) == before


def test_reruns_of_one_build_work_and_the_ledgers_list_every_file(corpus,
                                                                  tmp_path):
  save = tmp_path / "proc"

  def build(task, pass_ids):
    return create_pretrain_data(corpus["paths"], CFG, str(save), corpus["sp"],
                                task=task, num_task=2, pass_ids=pass_ids,
                                seed=SEED, max_batches=2)
  # Another task of the build, then more passes: the same build.
  assert len(build(1, [0])) == 1
  assert len(build(0, [0])) == 1
  assert len(build(0, [1, 2])) == 2
  assert len(build(1, [1, 2])) == 2
  assert build(0, [0, 1, 2]) == []  # all kept
  tfrecords = save / "tfrecords"
  files = {n: sha for n, sha in tree_digest(tfrecords).items()
           if not n.startswith(".")}
  assert len(files) == 2 * 2 * 3
  assert _ledger(tfrecords) == files
  assert _ledger(save) == {
      "corpus_info.json": tree_digest(save / "corpus_info.json")["."]}
  with open(save / "corpus_info.json", encoding="utf-8") as f:
    assert json.load(f)["pass_ids"] == [0, 1, 2]  # every pass in the folder


def test_a_changed_record_file_is_refused_and_a_broken_one_rebuilt(corpus,
                                                                   tmp_path):
  save = tmp_path / "proc"
  _build(corpus, save)
  record = save / "tfrecords" / f"train-0-0.{NAME}.tfrecords"
  good = record.read_bytes()
  # A records file that reads back whole, with other bytes (its records in
  # another order): not ours now.
  records = [r.numpy() for r in tf.data.TFRecordDataset(str(record))]
  with tf.io.TFRecordWriter(str(record)) as writer:
    for r in reversed(records):
      writer.write(r)
  assert record.read_bytes() != good
  before = tree_digest(tmp_path)
  assert _refused(lambda: _build(corpus, save)) == _not_ours(
      save, f"tfrecords/train-0-0.{NAME}.tfrecords")
  assert tree_digest(tmp_path) == before
  # Cut short, it is our broken file: built again, as the reader asks.
  record.write_bytes(good[:len(good) // 2])
  assert len(_build(corpus, save)) == 1
  assert record.read_bytes() == good
  # A build from before the ledger: --overwrite keeps what is built, and
  # records it.
  os.remove(save / "tfrecords" / LEDGER)
  assert _refused(lambda: _build(corpus, save)) == _not_ours(
      save, f"tfrecords/{record.name}")
  assert _build(corpus, save, overwrite=True) == []
  assert record.read_bytes() == good
  assert set(_ledger(save / "tfrecords")) == {
      record.name, f"record_info-train-0-0.{NAME}.json"}


def test_the_ids_cache_is_the_builders_own_folder(corpus, tmp_path):
  save = tmp_path / "proc"
  (save / "ids_cache").mkdir(parents=True)
  (save / "ids_cache" / "notes.txt").write_text("mine\n")
  before = tree_digest(tmp_path)
  assert _refused(lambda: _build(corpus, save)) == (
      f"--save_dir={save}: ids_cache/notes.txt was not written by xlnet-tf; "
      "ids_cache/ is the builder's own folder (it may be deleted once the "
      "records are built): move it away")
  assert tree_digest(tmp_path) == before


# 2. One build per save_dir ---------------------------------------------------

def test_another_build_in_the_same_save_dir_is_refused(corpus, tmp_path):
  save = tmp_path / "proc"
  _build(corpus, save)
  before = tree_digest(tmp_path)
  longer = pd.PretrainDataConfig(**dict(CFG.to_dict(), seq_len=64,
                                        reuse_len=32))
  for overwrite in (False, True):  # --overwrite replaces files, not builds
    assert _refused(lambda: _build(corpus, save, longer,
                                   overwrite=overwrite)) == (
        f"--save_dir={save}: holds another build: corpus_info.json has "
        "seq_len=32, this run seq_len=64; use another --save_dir, or remove "
        "the old build (corpus_info.json and tfrecords/) first")
  assert _refused(lambda: _build(corpus, save, seed=SEED + 1)) == (
      f"--save_dir={save}: holds another build: corpus_info.json has "
      f"seed={SEED}, this run seed={SEED + 1}; use another --save_dir, or "
      "remove the old build (corpus_info.json and tfrecords/) first")
  assert tree_digest(tmp_path) == before


def test_a_build_without_corpus_info_yet_is_found_by_its_record_infos(
    corpus, tmp_path):
  save = tmp_path / "proc"
  create_pretrain_data(corpus["paths"], CFG, str(save), corpus["sp"], task=1,
                       num_task=2, seed=SEED, max_batches=2)
  assert not (save / "corpus_info.json").exists()  # task 0 writes it
  before = tree_digest(tmp_path)
  assert _refused(lambda: _build(corpus, save, split="dev")) == (
      f"--save_dir={save}: holds another build: tfrecords/record_info-train-"
      f'1-0.{NAME}.json has split="train", this run split="dev"; use another '
      "--save_dir, or remove the old build (corpus_info.json and tfrecords/) "
      "first")
  assert tree_digest(tmp_path) == before


# 3. Hangs and bounded reading ------------------------------------------------

def test_inputs_that_are_not_regular_files_are_refused_up_front(corpus,
                                                                tmp_path):
  fifo = tmp_path / "pipe.txt"
  os.mkfifo(fifo)
  folder = tmp_path / "folder.txt"
  folder.mkdir()
  broken = tmp_path / "gone.txt"
  broken.symlink_to(tmp_path / "nowhere")
  save = tmp_path / "proc"
  sp = corpus["sp"]
  for path, why in [(fifo, "a named pipe (FIFO), not a regular file"),
                    (folder, f"a directory, not a file (name its files, "
                             f"e.g. {folder}/*)"),
                    ("/dev/null", "a character device, not a regular file"),
                    (broken, "does not exist (a broken link?)")]:
    assert _cli_line(input_glob=str(path), sp_path=sp,
                     save_dir=str(save)) == (2, (
                         f"create_pretrain_data: --input_glob={path}: {path}: "
                         f"{why}\n"))
  # a glob names the first file it matches that is refused
  pattern = f"{tmp_path}/*.txt"
  assert _cli_line(input_glob=pattern, sp_path=sp, save_dir=str(save)) == (
      2, f"create_pretrain_data: --input_glob={pattern}: {folder}: a "
      f"directory, not a file (name its files, e.g. {folder}/*)\n")
  # the library call, and the model
  assert _refused(lambda: create_pretrain_data(
      [corpus["paths"][0], str(fifo)], CFG, str(save), sp)) == (
          f"{fifo}: a named pipe (FIFO), not a regular file")
  assert _cli_line(input_glob=corpus["paths"][0], sp_path=str(fifo),
                   save_dir=str(save)) == (2, (
                       f"create_pretrain_data: --sp_path={fifo}: {fifo}: a "
                       "named pipe (FIFO), not a regular file\n"))
  # A UTF-16 corpus is named as such (not as NUL bytes at line 1).
  utf16 = tmp_path / "u16" / "corpus.txt"
  utf16.parent.mkdir()
  utf16.write_bytes("One sentence.\n".encode("utf-16"))
  assert _cli_line(input_glob=str(utf16), sp_path=sp,
                   save_dir=str(save)) == (2, (
                       f"create_pretrain_data: --input_glob={utf16}: {utf16}: "
                       "UTF-16 text (a byte-order mark); convert it to UTF-8, "
                       "e.g. iconv -f UTF-16 -t UTF-8\n"))
  assert not save.exists()


@pytest.mark.parametrize("task_size_mb", [None, 1.0])
def test_an_overlong_line_is_refused_quickly_at_bounded_memory(
    corpus, tmp_path, task_size_mb):
  big = tmp_path / "one_line.txt"
  with open(big, "wb") as f:
    for _ in range(50):
      f.write(b"word " * 209715 + b"word")  # 50 MiB, no newline
  started = time.monotonic()
  tracemalloc.start()
  try:
    message = _refused(lambda: create_pretrain_data(
        [str(big)], CFG, str(tmp_path / "proc"), corpus["sp"],
        task_size_mb=task_size_mb))
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert message == f"{big}{LONG_LINE}"
  assert time.monotonic() - started < 20
  assert peak < 16 * ids_cache.MAX_LINE_BYTES  # never the 50 MiB line
  assert sorted(os.listdir(tmp_path)) == ["one_line.txt"]  # nothing made


def test_the_task_splitter_reads_long_lines_in_pieces(tmp_path):
  path = tmp_path / "long.txt"
  path.write_bytes(b"x" * (8 << 20) + b"\n\nnext document\n\n")
  tracemalloc.start()
  try:
    assert next_document_end(str(path), 10) == (8 << 20) + 2
    assert next_document_end(str(path), (8 << 20) + 3) == (8 << 20) + 17
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert peak < 1 << 20


# 4. Flags that cannot work ---------------------------------------------------

@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0])
def test_task_size_mb_must_be_a_finite_size(corpus, tmp_path, value):
  assert _cli_line(input_glob=corpus["paths"][0], sp_path=corpus["sp"],
                   save_dir=str(tmp_path / "proc"), task_size_mb=value) == (
      2, f"create_pretrain_data: --task_size_mb={value}: must be a positive,"
      " finite number of MiB (or 0: one task per file, --num_task)\n")
  if value > 0:
    assert _refused(lambda: plan_tasks(corpus["paths"], 1, value)) == (
        "--task_size_mb=inf: must be a positive, finite number of MiB")
  assert os.listdir(tmp_path) == []


def cli_inf_run(work):
  """The command line with --task_size_mb=inf (an early run: see
  conftest)."""
  corpus = corpus_slice(shared_dir(), work, 20)
  return work, run([
      sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
      f"--input_glob={corpus}", f"--sp_path={spiece_path(shared_dir())}",
      f"--save_dir={work}/proc", "--task_size_mb=inf"], 300)


@pytest.mark.early("cli_inf_run")
@pytest.mark.usefixtures("shared")
def test_the_command_line_says_one_line_and_exits_2():
  work, res = early_result(cli_inf_run)
  assert refused(res) == (
      "create_pretrain_data: --task_size_mb=inf: must be a positive, finite "
      "number of MiB (or 0: one task per file, --num_task)")
  assert sorted(os.listdir(work)) == ["corpus.txt"]


# 5. Binary files, and what a refused input leaves ----------------------------

def test_a_file_of_nul_bytes_is_refused_as_binary(corpus, tmp_path):
  nul = tmp_path / "zeros.txt"
  nul.write_bytes(b"\0" * 1_000_000)
  save = tmp_path / "proc"
  assert _refused(lambda: create_pretrain_data(
      [str(nul)], CFG, str(save), corpus["sp"])) == (
          f"{nul}:1: NUL byte at column 1 (a binary file, not text)")
  assert not save.exists()  # the folders it made are gone again
  # in a line of text, the column; an existing save_dir is left as it was
  text = tmp_path / "text.txt"
  text.write_bytes("One line.\nAnother.\nThird \u00e9\0 line.\n".encode())
  save.mkdir()
  assert _refused(lambda: create_pretrain_data(
      [str(text)], CFG, str(save), corpus["sp"])) == (
          f"{text}:3: NUL byte at column 8 (a binary file, not text)")
  assert os.listdir(save) == []
  # over the line bound, a NUL still names a binary file
  nul.write_bytes(b"\0" * (3 << 20))
  assert _refused(lambda: create_pretrain_data(
      [str(nul)], CFG, str(save), corpus["sp"])) == (
          f"{nul}:1: NUL byte at column 1 (a binary file, not text)")
