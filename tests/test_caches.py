"""Caches and records: every cache is keyed by the content of its inputs,
builds are byte-identical run to run, killed builds' temp files are cleaned
up (ours only), and corrupt or cut-short records are one line naming the
file and offset (or rebuilt, for our own caches)."""

import errno
import json
import logging
import os
import shutil
import struct
import subprocess

import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils import pretrain_data as pd
from data_utils import squad_data as sd
from data_utils.atomic import (atomic_path, remove_stale_temps, temp_prefix)
from data_utils.create_pretrain_data import create_pretrain_data
from data_utils.errors import UserError
from data_utils.feature_records import build_features
from data_utils.pretrain_reader import check_record_files, load_record_infos
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.training import TrainOptions
from xlnet_tf.workflows.classifier import ClassifierOptions, ClassifierWorkflow
from conftest import corpus_slice, refused_line, spiece_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)
MODEL_FLAGS = ["--n_layer=2", "--d_model=32", "--n_head=4", "--d_head=8",
               "--d_inner=64", "--mem_len=16", "--ff_activation=gelu",
               "--untie_r", "--dropout=0.0", "--dropatt=0.0"]
LABELS = [k % 2 for k in range(20)]


# Helpers ---------------------------------------------------------------------
def _write_sst2(directory, labels):
  """A 20-row SST-2 train.tsv; returns its path."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "train.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n")
    for k, label in enumerate(labels):
      f.write(f"the film number {k} is {'fine' if label else 'dull'} .\t"
              f"{label}\n")
  return path


def _workflow(tmp_path, data_dir, spiece, output_dir):
  return ClassifierWorkflow(ClassifierOptions(
      config=TINY, run=xt.RunOptions(),
      train=TrainOptions(model_dir=str(tmp_path / "model"), train_steps=1),
      task_name="sst-2", data_dir=str(data_dir), output_dir=str(output_dir),
      spiece_model_file=spiece, max_seq_length=16))


def _record_labels(path):
  return [tf.train.Example.FromString(raw).features.feature["label"]
          .int64_list.value[0]
          for raw in tf.data.TFRecordDataset(path).as_numpy_iterator()]


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


def _bytes(path):
  with open(path, "rb") as f:
    return f.read()


def _tree_bytes(directory):
  """{relative path: bytes} of every file under `directory`."""
  out = {}
  for base, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(base, name)
      out[os.path.relpath(path, directory)] = _bytes(path)
  return out


def _dead_pid():
  proc = subprocess.Popen(["true"])
  proc.wait()
  return proc.pid


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno >= logging.WARNING]


def _squad_file(path, question="Where was the film made?"):
  context = ("The film was made in Paris in 1990 by a small crew. It ran for "
             "two hours and was shown in forty cities.")
  data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": [
          {"id": "q1", "question": question,
           "answers": [{"text": "Paris", "answer_start": 21}]},
          {"id": "q2", "question": "How long did it run?",
           "answers": [{"text": "two hours", "answer_start": 62}]}]}]}]}
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f)
  return str(path)


@pytest.fixture(scope="module")
def sp(shared):
  return spiece_path(shared)


@pytest.fixture(scope="module")
def corpus(shared, tmp_path_factory):
  return corpus_slice(shared, tmp_path_factory.mktemp("corpus"), 400)


# 1. Caches keyed by content ---------------------------------------------------
def test_feature_cache_kept_when_only_paths_and_times_change(tmp_path, sp):
  _write_sst2(tmp_path / "data", LABELS)
  first = _workflow(tmp_path, tmp_path / "data", sp,
                    tmp_path / "out").features("train")
  os.utime(first["path"], (1, 1))  # a rebuild would change this
  # the same bytes elsewhere, newer: TSV and SentencePiece model
  shutil.copytree(tmp_path / "data", tmp_path / "moved")
  os.utime(tmp_path / "moved" / "train.tsv", (2e9, 2e9))
  sp_copy = str(tmp_path / "copy.model")
  shutil.copy(sp, sp_copy)
  again = _workflow(tmp_path, tmp_path / "moved", sp_copy,
                    tmp_path / "out").features("train")
  assert again["path"] == first["path"]
  assert os.path.getmtime(first["path"]) == 1
  assert _record_labels(again["path"]) == LABELS


def test_feature_cache_rebuilt_when_one_label_changes(tmp_path, sp):
  _write_sst2(tmp_path / "data", LABELS)
  wf = _workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  first = wf.features("train")
  os.utime(first["path"], (1, 1))
  changed = list(LABELS)
  changed[5] = 1 - changed[5]
  _write_sst2(tmp_path / "data", changed)  # same rows, one label differs
  again = wf.features("train")
  assert again["path"] == first["path"]  # replaced in place
  assert os.path.getmtime(again["path"]) != 1
  assert _record_labels(again["path"]) == changed
  assert again["inputs"]["examples_sha256"] != \
      first["inputs"]["examples_sha256"]
  assert again["inputs"]["spiece_sha256"] == first["inputs"]["spiece_sha256"]


def test_squad_cache_follows_content(tmp_path, sp):
  tok = SentencePieceTokenizer(sp)
  settings = sd.FeatureSettings(max_seq_length=64, doc_stride=32,
                                max_query_length=16)

  def build(path):
    return sd.cached_features(sd.read_squad(path), tok, settings,
                              str(tmp_path / "out"), "predict", False)
  path = _squad_file(tmp_path / "dev.json")
  first = build(path)
  old_records = _bytes(first["path"])
  os.utime(first["path"], (1, 1))
  os.utime(path, (2e9, 2e9))  # touched, same bytes: kept
  assert build(path)["path"] == first["path"]
  assert os.path.getmtime(first["path"]) == 1
  _squad_file(tmp_path / "dev.json", "Where was the movie made?")
  again = build(path)
  assert again["path"] == first["path"]
  assert os.path.getmtime(again["path"]) != 1
  assert _bytes(again["path"]) != old_records
  assert again["num_examples"] == 2


def test_pretrain_data_rebuilt_only_when_the_corpus_changes(tmp_path, sp,
                                                            corpus):
  text = tmp_path / "corpus.txt"
  shutil.copy(corpus, text)
  first = create_pretrain_data([str(text)], CFG, str(tmp_path / "out"), sp,
                               seed=3)
  record = os.path.join(tmp_path, "out", "tfrecords", first[0]["filenames"][0])
  old = _bytes(record)
  os.utime(record, (1, 1))
  os.utime(text, (2e9, 2e9))
  assert create_pretrain_data([str(text)], CFG, str(tmp_path / "out"), sp,
                              seed=3) == []
  assert os.path.getmtime(record) == 1
  lines = text.read_text(encoding="utf-8").splitlines(keepends=True)
  k = next(i for i, line in enumerate(lines) if " the " in line)
  lines[k] = lines[k].replace(" the ", " a ", 1)  # same number of lines
  text.write_text("".join(lines), encoding="utf-8")
  again = create_pretrain_data([str(text)], CFG, str(tmp_path / "out"), sp,
                               seed=3)
  assert len(again) == 1
  assert again[0]["input_sha256"] != first[0]["input_sha256"]
  assert _bytes(record) != old


# 2. Same seed, same bytes -----------------------------------------------------
def test_serialization_sorts_the_feature_map():
  def example(keys):
    ex = tf.train.Example()
    for key in keys:
      ex.features.feature[key].int64_list.value.append(len(key))
    return ex.SerializeToString(deterministic=True)
  keys = ["input_ids", "segment_ids", "input_mask", "label",
          "is_real_example", "a"]
  serialized = example(keys)
  assert serialized == example(keys[::-1]) == example(sorted(keys))
  positions = [serialized.index(k.encode()) for k in sorted(keys)]
  assert positions == sorted(positions)


def test_builders_are_byte_identical(tmp_path, sp, corpus):
  tok = SentencePieceTokenizer(sp)
  examples = [f"sentence {k} of the test" for k in range(30)]

  def featurize(text):
    ids = tok.encode_ids(text)[:12]
    pad = 12 - len(ids)
    return {"input_ids": ids + [0] * pad, "segment_ids": [0] * 12,
            "input_mask": [0.0] * len(ids) + [1.0] * pad,
            "label": len(text) % 3}

  def features(out, overwrite=False):
    return build_features(examples, featurize, 12, False, str(out),
                          {"task": "t", "split": "train"}, pad_to_multiple=8,
                          num_passes=3, seed=5, overwrite=overwrite)
  squad = sd.read_squad(_squad_file(tmp_path / "train.json"),
                        is_training=True)
  settings = sd.FeatureSettings(max_seq_length=48, doc_stride=16,
                                max_query_length=12)

  def build(out, overwrite=False):
    features(out / "features", overwrite)
    sd.cached_features(squad, tok, settings, str(out / "squad"), "train",
                       True, overwrite=overwrite, seed=5)
    create_pretrain_data([corpus], CFG, str(out / "pretrain"), sp,
                         pass_ids=[0, 1], seed=5)
    return _tree_bytes(out)
  a = build(tmp_path / "a")
  b = build(tmp_path / "b")
  assert sorted(a) == sorted(b) and len(a) == 9
  for name in a:
    assert a[name] == b[name], name
  # built again into the same place (our own outputs deleted or
  # overwritten), the same bytes
  shutil.rmtree(tmp_path / "a" / "pretrain")
  assert build(tmp_path / "a", overwrite=True) == b


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
  before = _tree_bytes(tmp_path)

  def disk_full(example):
    raise OSError(errno.ENOSPC, "No space left on device")
  with pytest.raises(UserError) as e:
    build_features(["b"], disk_full, 1, False, str(tmp_path), settings)
  assert str(e.value) == (f"{info['path']}: no space left on device (not "
                          "written; what was there before is kept)")
  assert _tree_bytes(tmp_path) == before  # old cache whole, no temp file


# 4. Corrupt and cut-short records ---------------------------------------------
def _damage(path, how):
  """Damages a record file; returns the problem text expected for it."""
  data = _bytes(path)
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
  _write_sst2(tmp_path / "data", LABELS)
  wf = _workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  path = wf.features("train")["path"]
  good = _bytes(path)
  problem = _damage(path, how)
  caplog.set_level(logging.INFO)
  assert wf.features("train")["path"] == path
  assert _warnings(caplog) == [f"{path}: {problem}; building it again"]
  assert _bytes(path) == good


@pytest.mark.parametrize("content,problem", [
    ('{"settings": {"task": "sst-2", "spl',  # cut short
     "unreadable cache info (Unterminated string starting at: line 1 "
     "column 32 (char 31))"),
    ("[1, 2]", "cache info is not a JSON object"),
])
def test_damaged_cache_info_is_rebuilt_with_a_warning(tmp_path, sp, caplog,
                                                      content, problem):
  _write_sst2(tmp_path / "data", LABELS)
  wf = _workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  path = wf.features("train")["path"]
  good = _bytes(path + ".json")
  with open(path + ".json", "w") as f:
    f.write(content)
  caplog.set_level(logging.INFO)
  wf.features("train")
  assert _warnings(caplog) == [
      f"{path}.json: {problem}; building the cache again"]
  assert _bytes(path + ".json") == good


@pytest.fixture
def pretrain_records(tmp_path, sp, corpus):
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
  good = _bytes(path)
  problem = _damage(path, how)
  with pytest.raises(pd.DataError) as e:
    check_record_files(pretrain_records["info"])
  assert str(e.value) == (
      f"{path}: {problem} (build it again: rerun python -m "
      "data_utils.create_pretrain_data with the same flags)")
  # and that rerun does build it again
  caplog.set_level(logging.INFO)
  infos = create_pretrain_data([pretrain_records["corpus"]], CFG,
                               pretrain_records["out"], pretrain_records["sp"],
                               pass_ids=[0, 1], seed=1)
  assert [i["pass_id"] for i in infos] == [1]
  assert _warnings(caplog) == [f"{path}: {problem}; building it again"]
  assert _bytes(path) == good


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
  with pytest.raises(pd.DataError) as e:
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
      "data_utils.create_pretrain_data with the same flags)")
