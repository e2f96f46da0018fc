"""Records under damage: killed builds' temp files are cleaned up (ours
only), a full disk keeps the previous cache, and corrupt or cut-short records
are one line naming the file and offset (or rebuilt, for our own caches)."""

import errno
import logging
import os
import struct
import subprocess

import pytest

from data_utils.atomic import atomic_path, remove_stale_temps, temp_prefix
from data_utils.classification.records import build_features
from data_utils.errors import UserError
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.examples import DataError
from data_utils.pretraining.reader import (check_record_files,
                                           load_record_infos)
from cache_cases import (CFG, LABELS, classifier_workflow, file_bytes,
                         tree_bytes, write_sst2)
from conftest import corpus_slice, refused_line, spiece_path

MODEL_FLAGS = ["--n_layer=2", "--d_model=32", "--n_head=4", "--d_head=8",
               "--d_inner=64", "--mem_len=16", "--ff_activation=gelu",
               "--untie_r", "--dropout=0.0", "--dropatt=0.0"]


def _record_starts(path):
  """Byte offset of each record (TFRecord framing: u64 length, u32 CRC,
  data, u32 CRC)."""
  with open(path, "rb") as f:
    data = f.read()
  starts, pos = [], 0
  while pos < len(data):
    starts.append(pos)
    pos += 8 + 4 + struct.unpack("<Q", data[pos:pos + 8])[0] + 4
  return starts


def _dead_pid():
  proc = subprocess.Popen(["true"])
  proc.wait()
  return proc.pid


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno >= logging.WARNING]


@pytest.fixture(scope="module")
def sp(shared):
  return spiece_path(shared)


# 3. Temp files ----------------------------------------------------------------
def test_only_our_dead_writers_temp_files_are_removed(tmp_path):
  live = subprocess.Popen(["sleep", "60"])
  try:
    ours = temp_prefix()
    mine = ours.replace(f"-{os.getpid()}-", "-{}-")
    names = {
        "dead": mine.format(_dead_pid()) + "k2x_9q1a",
        "live_child": mine.format(live.pid) + "abc",
        "live_self": ours + "abc",
        "other_host": f".tmp-xlnet-elsewhere-{_dead_pid()}-abc",
        "foreign": ".tmp-foo",
        "foreign2": ".tmp-xlnet-notes.txt",
        "old_style": ".tmp-q8z1k2mb",
    }
    for name in names.values():
      (tmp_path / name).write_bytes(b"x")
    removed = remove_stale_temps(str(tmp_path))
    assert removed == [str(tmp_path / names["dead"])]
    assert sorted(os.listdir(tmp_path)) == sorted(
        n for k, n in names.items() if k != "dead")
  finally:
    live.kill()
    live.wait()


def test_a_builder_removes_a_killed_builds_temp_file(tmp_path):
  with atomic_path(str(tmp_path / "x.tf_record")) as tmp:
    assert os.path.basename(tmp).startswith(temp_prefix())
    open(tmp, "w").close()
  stale = tmp_path / temp_prefix().replace(f"-{os.getpid()}-",
                                           f"-{_dead_pid()}-")
  stale = str(stale) + "abcd1234"
  with open(stale, "wb") as f:
    f.write(b"\0" * 1000)  # what a killed feature build leaves
  (tmp_path / ".tmp-foo").write_bytes(b"keep")
  build_features(["a"], lambda e: {"input_ids": [1], "segment_ids": [0],
                                   "input_mask": [0.0], "label": 0},
                 1, False, str(tmp_path), {"task": "t", "split": "dev"})
  assert not os.path.exists(stale)
  assert (tmp_path / ".tmp-foo").read_bytes() == b"keep"


def test_a_full_disk_keeps_the_previous_cache_and_leaves_no_temp(tmp_path):
  def feats(label):
    return {"input_ids": [1], "segment_ids": [0], "input_mask": [0.0],
            "label": label}
  settings = {"task": "t", "split": "dev"}
  info = build_features(["a"], lambda e: feats(0), 1, False, str(tmp_path),
                        settings)
  before = tree_bytes(tmp_path)

  def disk_full(example):
    raise OSError(errno.ENOSPC, "No space left on device")
  with pytest.raises(UserError) as e:
    build_features(["b"], disk_full, 1, False, str(tmp_path), settings)
  assert str(e.value) == (f"{info['path']}: no space left on device (not "
                          "written; what was there before is kept)")
  assert tree_bytes(tmp_path) == before  # old cache whole, no temp file


# 4. Corrupt and cut-short records ---------------------------------------------
def _damage(path, how):
  """Damages a record file; returns the problem text expected for it."""
  data = file_bytes(path)
  starts = _record_starts(path)
  if how == "flipped":  # a data byte of the 4th record
    pos = starts[3] + 12 + 5
    data = data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]
    problem = f"corrupted record at offset {starts[3] + 12}"
  elif how == "cut_inside":  # the disk filled mid-record
    data = data[:starts[-2] + 30]
    problem = f"truncated record at offset {starts[-2]}"
  else:  # cut at a record boundary: every CRC is fine, records are missing
    data = data[:starts[-2]]
    problem = f"{len(starts) - 2} records, expected {len(starts)} (cut short?)"
  with open(path, "wb") as f:
    f.write(data)
  return problem


@pytest.mark.parametrize("how", ["flipped", "cut_inside", "cut_between"])
def test_damaged_feature_cache_is_rebuilt_with_a_warning(tmp_path, sp, caplog,
                                                         how):
  write_sst2(tmp_path / "data", LABELS)
  wf = classifier_workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  path = wf.features("train")["path"]
  good = file_bytes(path)
  problem = _damage(path, how)
  caplog.set_level(logging.INFO)
  assert wf.features("train")["path"] == path
  assert _warnings(caplog) == [f"{path}: {problem}; building it again"]
  assert file_bytes(path) == good


@pytest.mark.parametrize("content,problem", [
    ('{"settings": {"task": "sst-2", "spl',  # cut short
     "unreadable cache info (Unterminated string starting at: line 1 "
     "column 32 (char 31))"),
    ("[1, 2]", "cache info is not a JSON object"),
])
def test_damaged_cache_info_is_rebuilt_with_a_warning(tmp_path, sp, caplog,
                                                      content, problem):
  write_sst2(tmp_path / "data", LABELS)
  wf = classifier_workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  path = wf.features("train")["path"]
  good = file_bytes(path + ".json")
  with open(path + ".json", "w") as f:
    f.write(content)
  caplog.set_level(logging.INFO)
  wf.features("train")
  assert _warnings(caplog) == [
      f"{path}.json: {problem}; building the cache again"]
  assert file_bytes(path + ".json") == good


@pytest.fixture
def pretrain_records(tmp_path, sp, shared):
  corpus = corpus_slice(shared, tmp_path, 400)
  create_pretrain_data([corpus], CFG, str(tmp_path / "data"), sp,
                       pass_ids=[0, 1], seed=1)
  tfdir = str(tmp_path / "data" / "tfrecords")
  info = load_record_infos(tfdir, "train", CFG.to_dict())
  return {"dir": tfdir, "info": info, "corpus": corpus, "sp": sp,
          "out": str(tmp_path / "data")}


@pytest.mark.parametrize("how", ["flipped", "cut_inside", "cut_between"])
def test_damaged_pretraining_records_are_one_line(pretrain_records, caplog,
                                                  how):
  check_record_files(pretrain_records["info"])  # whole: no error
  path = sorted(pretrain_records["info"]["filenames"])[1]
  good = file_bytes(path)
  problem = _damage(path, how)
  with pytest.raises(DataError) as e:
    check_record_files(pretrain_records["info"])
  assert str(e.value) == (
      f"{path}: {problem} (build it again: rerun python -m "
      "data_utils.pretraining.create_pretrain_data with the same flags)")
  # and that rerun does build it again
  caplog.set_level(logging.INFO)
  infos = create_pretrain_data([pretrain_records["corpus"]], CFG,
                               pretrain_records["out"], pretrain_records["sp"],
                               pass_ids=[0, 1], seed=1)
  assert [i["pass_id"] for i in infos] == [1]
  assert _warnings(caplog) == [f"{path}: {problem}; building it again"]
  assert file_bytes(path) == good


# `message` follows the path (a UTF-8 fault also names the line).
@pytest.mark.parametrize("content,message", [
    ("[1, 2]", ": not a record-info (a JSON list, expected an object)"),
    ('{"filenames": ["a"', ": not valid JSON (Expecting ',' delimiter at "
     "line 1 column 19)"),
    ('{"num_batch": 3}', ': not a record-info (no "filenames" list of file '
     'names)'),
    ('{"filenames": ["a"], "num_batch": "3"}',
     ": not a record-info ('num_batch' is '3', expected a count)"),
    (b"\xff\xfe{}", ":1: not UTF-8 text (byte 0xff at column 1)"),
])
def test_bad_record_info_is_one_line(tmp_path, content, message):
  path = tmp_path / "record_info-train-0-0.json"
  if isinstance(content, bytes):
    path.write_bytes(content)
  else:
    path.write_text(content)
  with pytest.raises(DataError) as e:
    load_record_infos(str(tmp_path), "train", {})
  assert str(e.value) == f"{path}{message}"


def test_run_pretrain_reports_a_corrupt_record_file(pretrain_records,
                                                    tmp_path):
  path = sorted(pretrain_records["info"]["filenames"])[0]
  problem = _damage(path, "flipped")
  assert refused_line("run_pretrain.py", [
      f"--record_info_dir={pretrain_records['dir']}",
      f"--model_dir={tmp_path / 'model'}", "--train_batch_size=4",
      "--seq_len=32", "--reuse_len=16", "--perm_size=8", "--num_predict=6",
      "--bi_data", "--train_steps=2", *MODEL_FLAGS], timeout=300) == (
      f"run_pretrain: {path}: {problem} (build it again: rerun python -m "
      "data_utils.pretraining.create_pretrain_data with the same flags)")
