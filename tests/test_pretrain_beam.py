"""Pretraining records at corpus scale: task splits, the ids cache, memory-
mapped passes, and Beam runs giving the plain CLI's bytes."""

import hashlib
import json
import os
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils.errors import UsageError
from data_utils import beam_jobs
from data_utils.outputs import LEDGER
from data_utils.pretraining import beam_pipeline, builder, ids_cache
from data_utils.pretraining import examples as pd
from data_utils.pretraining import reference_examples as ref
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.reader import load_record_infos
from data_utils.records import example_bytes, float_feature, int_feature
from data_utils.pretraining.task_split import MIB, split_by_size
from data_utils.tokenization import EOD_ID, SentencePieceTokenizer
from conftest import early_result, run, shared_dir, spiece_path

CFG = pd.PretrainDataConfig(seq_len=64, reuse_len=32, bsz_per_host=8,
                            num_core_per_host=1, bi_data=True, num_predict=10,
                            perm_size=16)
PASSES = [0, 1]
MAX_BATCHES = 25
SEED = 11
# The three files, and the CLI's Beam build of them, come first.
pytestmark = pytest.mark.early("beam_inputs")


def _sha256_tree(save_dir):
  """sha256 of every file of the build: those in save_dir (corpus_info.json,
  the output ledger) and under tfrecords/ (records, record-infos, ledger)."""
  out = {}
  names = [n for n in os.listdir(save_dir)
           if os.path.isfile(os.path.join(save_dir, n))] + [
               os.path.join("tfrecords", n)
               for n in os.listdir(os.path.join(save_dir, "tfrecords"))]
  for name in names:
    with open(os.path.join(save_dir, name), "rb") as f:
      out[name] = hashlib.sha256(f.read()).hexdigest()
  return out


def _ledger(directory):
  """{name: sha256} of the output ledger in `directory`."""
  with open(os.path.join(directory, LEDGER), encoding="utf-8") as f:
    return {n: e["sha256"] for n, e in json.load(f)["files"].items()}


def _write_ranges(ranges, directory):
  paths = []
  for i, r in enumerate(ranges):
    with open(r.path, "rb") as f:
      f.seek(r.begin)
      data = f.read(r.size)
    path = os.path.join(directory, f"part-{i}.txt")
    with open(path, "wb") as f:
      f.write(data)
    paths.append(path)
  return paths


def beam_inputs(work):
  """The shared corpus cut into 3 files at document boundaries, then the
  CLI's Beam build of them by two worker processes (an early run: see
  conftest): the files, the build's folder and the result."""
  shared = shared_dir()
  corpus = os.path.join(shared, "data", "corpus", "gutenberg_state_union.txt")
  size = os.path.getsize(corpus)
  ranges = [r for task in split_by_size([corpus], size / 3 / MIB)
            for r in task]
  assert len(ranges) == 3
  (work / "three").mkdir()
  three_files = _write_ranges(ranges, str(work / "three"))
  cmd = [sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
         f"--input_glob={os.path.dirname(three_files[0])}/part-*.txt",
         f"--sp_path={spiece_path(shared)}",
         f"--save_dir={work / 'workers'}", "--num_task=3",
         f"--seq_len={CFG.seq_len}", f"--reuse_len={CFG.reuse_len}",
         f"--bsz_per_host={CFG.bsz_per_host}",
         f"--num_predict={CFG.num_predict}", f"--perm_size={CFG.perm_size}",
         "--bi_data", f"--num_passes={len(PASSES)}", f"--seed={SEED}",
         f"--max_batches={MAX_BATCHES}", "--runner=DirectRunner",
         "--pipeline_options=--direct_num_workers=2 "
         "--direct_running_mode=multi_processing"]
  workers = run(cmd, 600)
  # Without --runner and --task: every task, one after another.
  every = [a.replace(str(work / "workers"), str(work / "every"))
           for a in cmd[:-2]]
  return three_files, work / "workers", workers, work / "every", run(every,
                                                                     600)


@pytest.fixture(scope="module")
def three_files(shared):  # pylint: disable=unused-argument  (without ../shared)
  """The shared corpus cut into 3 files at document boundaries."""
  return early_result(beam_inputs)[0]


@pytest.fixture(scope="module")
def plain_cli(three_files, shared, tmp_path_factory):
  """The plain CLI's build, one call per task (--num_task=3 --task=i)."""
  out = str(tmp_path_factory.mktemp("plain"))
  for task in range(3):
    create_pretrain_data(three_files, CFG, out, spiece_path(shared),
                         task=task, num_task=3, pass_ids=PASSES, seed=SEED,
                         max_batches=MAX_BATCHES)
  return out


def test_beam_in_process_and_two_workers_give_the_plain_cli_bytes(
    three_files, plain_cli, shared, tmp_path):
  want = _sha256_tree(plain_cli)
  # corpus_info, 6 files + infos, each folder's ledger, the records' lock
  assert len(want) == 1 + 2 * 3 * len(PASSES) + 2 + 1
  # Each task's process recorded its own files in the one ledger.
  assert _ledger(os.path.join(plain_cli, "tfrecords")) == {
      os.path.basename(n): sha for n, sha in want.items()
      if n.startswith("tfrecords/") and "/." not in n}
  assert _ledger(plain_cli) == {"corpus_info.json": want["corpus_info.json"]}

  job = builder.prepare_job(three_files, CFG, str(tmp_path / "direct"),
                            spiece_path(shared), num_task=3, pass_ids=PASSES,
                            seed=SEED, max_batches=MAX_BATCHES)
  counters = beam_pipeline.run(job, beam_jobs.check_options(
      "DirectRunner", None))
  assert _sha256_tree(str(tmp_path / "direct")) == want
  assert counters["files"] == 6
  assert counters["examples"] == 6 * MAX_BATCHES * CFG.bsz_per_host
  assert counters["lines"] == sum(
      sum(1 for _ in open(p, encoding="utf-8")) for p in three_files)

  # The CLI with two worker processes (begun early: see beam_inputs).
  _, workers, res, every, plain = early_result(beam_inputs)
  assert res.returncode == 0, res.stderr[-3000:]
  assert _sha256_tree(str(workers)) == want
  # The CLI without --runner or --task: every task in its one process, with
  # progress over all of them.
  assert plain.returncode == 0, plain.stderr[-3000:]
  assert _sha256_tree(str(every)) == want
  assert "passes: 6/6 (100.0%)" in plain.stderr


def test_a_retried_unit_and_a_rerun_give_the_same_bytes(
    three_files, shared, tmp_path, monkeypatch):
  """Tasks by size; one (task, pass) fails once half-way through its
  records and the bundle-based runner retries it; a plain build of each
  task alone gives the same bytes."""
  sp = spiece_path(shared)
  size_mb = 2.5
  plain = str(tmp_path / "plain")
  job = builder.prepare_job(three_files, CFG, plain, sp, task_size_mb=size_mb,
                            pass_ids=PASSES, seed=SEED,
                            max_batches=MAX_BATCHES)
  assert job.num_task > 3  # a file was cut
  for task in range(job.num_task):
    create_pretrain_data(three_files, CFG, plain, sp, task=task,
                         task_size_mb=size_mb, pass_ids=PASSES, seed=SEED,
                         max_batches=MAX_BATCHES)
  want = _sha256_tree(plain)

  marker = tmp_path / "failed-once"
  monkeypatch.setenv(beam_pipeline.FAIL_ONCE_ENV, f"{marker}:3:1")
  retried = str(tmp_path / "retried")
  job = builder.prepare_job(three_files, CFG, retried, sp,
                            task_size_mb=size_mb, pass_ids=PASSES, seed=SEED,
                            max_batches=MAX_BATCHES)
  beam_pipeline.run(job, beam_jobs.check_options(
      "BundleBasedDirectRunner", None))
  assert marker.exists()  # the unit did fail once
  assert _sha256_tree(retried) == want
  leftovers = [n for n in os.listdir(os.path.join(retried, "tfrecords"))
               if n.startswith(".tmp-xlnet-")]
  assert leftovers == []

  # a re-run keeps what is complete and builds what is missing
  def record(task, pass_id):
    return os.path.join(job.tfrecord_dir, builder.format_name(
        f"train-{task}-{pass_id}", CFG, "tfrecords"))
  os.remove(record(job.num_task - 1, 0))
  kept = record(0, 0)
  stamp = os.stat(kept).st_mtime_ns
  counters = beam_pipeline.run(job, beam_jobs.check_options(
      "DirectRunner", None))
  assert counters["files"] == 1
  assert counters["files_kept"] == job.num_task * len(PASSES) - 1
  assert os.stat(kept).st_mtime_ns == stamp
  assert _sha256_tree(retried) == want


def test_one_file_split_by_size_cuts_no_document(shared, tmp_path):
  corpus = os.path.join(shared, "data", "corpus", "gutenberg_state_union.txt")
  size = os.path.getsize(corpus)
  tasks = split_by_size([corpus], size / 4.2 / MIB)
  assert len(tasks) == 4
  ranges = [r for task in tasks for r in task]
  assert [len(t) for t in tasks] == [1, 1, 1, 1]
  assert ranges[0].begin == 0 and ranges[-1].end == size
  assert all(a.end == b.begin for a, b in zip(ranges, ranges[1:]))
  with open(corpus, "rb") as f:
    text = f.read()
  for r in ranges[:-1]:  # each cut is just after a blank line
    assert text[r.end - 1:r.end] == b"\n"
    assert text[text.rfind(b"\n", 0, r.end - 1) + 1:r.end].strip() == b""
  # every document is in exactly one task, whole
  documents = [d for d in text.split(b"\n\n") if d.strip()]
  owner = [[d in text[r.begin:r.end] for r in ranges] for d in documents]
  assert all(sum(o) == 1 for o in owner)

  # tokenized by range, the ids are the whole file's, in order
  tok = SentencePieceTokenizer(spiece_path(shared))
  parts = []
  for i, r in enumerate(ranges):
    path = str(tmp_path / f"{i}.ids")
    ids_cache.tokenize_range(r, tok.encode_ids, True, path)
    parts.append(ids_cache.read_ids(path)[0])
  with open(corpus, encoding="utf-8") as f:
    whole, _ = ref.lines_to_ids(f, tok.encode_ids, True)
  np.testing.assert_array_equal(np.concatenate(parts), whole)
  assert (np.concatenate(parts) == EOD_ID).sum() == (whole == EOD_ID).sum()


def test_memory_mapped_pass_equals_the_in_memory_build(three_files,
                                                       plain_cli, shared):
  """Task 1 of the plain CLI's build (ids cache, memory-mapped stream, fast
  path) against the in-memory reference: every file read whole into
  arrays, joined in memory, `reference_examples.host_steps` serialized by
  `example_bytes`, the same seed, task and pass."""
  tok = SentencePieceTokenizer(spiece_path(shared))
  is_start = pd.start_piece_table(
      [tok.id_to_piece(i) for i in range(tok.vocab_size)])
  task, files = 1, sorted(three_files)[1::3]
  shards = []
  for path in files:
    with open(path, encoding="utf-8") as f:
      shards.append(ref.lines_to_ids(f, tok.encode_ids, True))
  for pass_id in PASSES:
    order = np.random.default_rng([SEED, task, pass_id, 1]).permutation(
        len(shards))
    data, sent_ids = pd.concat_documents(shards, order)
    rng = np.random.default_rng([SEED, task, pass_id])
    want = []
    for _, step in zip(range(MAX_BATCHES),
                       ref.host_steps(data, sent_ids, CFG, is_start, rng)):
      want += [example_bytes({
          k: float_feature(v.tolist()) if v.dtype.kind == "f"
          else int_feature(v.tolist()) for k, v in example.items()})
               for example in step]
    path = os.path.join(plain_cli, "tfrecords", builder.format_name(
        f"train-{task}-{pass_id}", CFG, "tfrecords"))
    got = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    assert len(got) == MAX_BATCHES * CFG.bsz_per_host
    assert got == want


def test_a_bad_shard_is_named_and_finished_units_are_kept(shared, tmp_path):
  good = tmp_path / "a.txt"
  with open(os.path.join(shared, "data", "corpus",
                         "gutenberg_state_union.txt"), "rb") as f:
    good.write_bytes(f.read(400_000))
  bad = tmp_path / "b.txt"
  bad.write_bytes(b"fine line\nsecond line\nbad \xff byte\n")
  sp = spiece_path(shared)
  job = builder.prepare_job([str(good), str(bad)], CFG, str(tmp_path / "o"),
                            sp, num_task=2, pass_ids=[0], seed=SEED,
                            max_batches=5)
  builder.build_tasks(job, [0])
  with pytest.raises(pd.DataError) as e:
    beam_pipeline.run(job, beam_jobs.check_options("DirectRunner", None))
  assert str(e.value) == f"{bad}:3: not UTF-8 text (byte 0xff at column 5)"
  kept = [n for n in os.listdir(tmp_path / "o" / "tfrecords")
          if not n.startswith(".")]
  assert len(kept) == 2  # task 0's records and record-info
  assert set(_ledger(tmp_path / "o" / "tfrecords")) == set(kept)


@pytest.mark.parametrize("runner, options, message", [
    ("NoSuchRunner", None, "--runner=NoSuchRunner: "),
    ("DirectRunner", "--x='unclosed", "--pipeline_options=\"--x='unclosed\": "
                                      "No closing quotation"),
    ("DirectRunner", "--runner=Other", "--pipeline_options: give the runner "
                                       "as --runner"),
    (None, "--direct_num_workers=2", "--pipeline_options: needs --runner"),
])
def test_bad_runner_options_are_one_line(runner, options, message):
  with pytest.raises(UsageError) as e:
    beam_jobs.check_options(runner, options)
  assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_reader_takes_every_task_of_one_build_only(plain_cli, tmp_path):
  tfdir = tmp_path / "tfrecords"
  shutil.copytree(os.path.join(plain_cli, "tfrecords"), tfdir)
  expected = CFG.to_dict()
  info = load_record_infos(str(tfdir), "train", expected)
  assert len(info["filenames"]) == 3 * len(PASSES)
  assert info["num_batch"] == 3 * len(PASSES) * MAX_BATCHES

  other = tfdir / os.path.basename(builder.record_info_path(
      str(tfdir), "train", 2, 1, CFG))
  data = json.loads(other.read_text())
  other.write_text(json.dumps(dict(data, seed=SEED + 1)))
  first = os.path.basename(builder.record_info_path(str(tfdir), "train", 0,
                                                    0, CFG))
  with pytest.raises(pd.DataError) as e:
    load_record_infos(str(tfdir), "train", expected)
  assert str(e.value) == (f"{other}: built with seed={SEED + 1}, but {first} "
                          f"with seed={SEED} (records of two builds in one "
                          "place: keep one)")
  other.unlink()
  with pytest.raises(pd.DataError) as e:
    load_record_infos(str(tfdir), "train", expected)
  assert str(e.value) == (f"{tfdir}: pass 1 has no record-info for task(s) "
                          "[2] of the build's 3 (finish the build: a re-run "
                          "builds only what is missing)")
