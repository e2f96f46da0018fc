"""Caches keyed by content: a cache is kept when only paths and times change
and rebuilt when one input byte does; builds are byte-identical run to run
and to the bytes this project has always written (pinned digests)."""

import hashlib
import json
import os
import shutil

import pytest
import tensorflow as tf

from data_utils.classification.features import example_features
from data_utils.classification.reader import read_examples
from data_utils.classification.records import build_features
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.race.features import race_features
from data_utils.race.reader import RaceExample, qa_text
from data_utils.squad.features import FeatureSettings
from data_utils.squad.reader import read_squad
from data_utils.squad.records import cached_features
from data_utils.tokenization import SentencePieceTokenizer
from cache_cases import (CFG, LABELS, classifier_workflow, file_bytes,
                         tree_bytes, write_sst2)
from conftest import corpus_slice, spiece_path


def _record_labels(path):
  return [tf.train.Example.FromString(raw).features.feature["label"]
          .int64_list.value[0]
          for raw in tf.data.TFRecordDataset(path).as_numpy_iterator()]


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
  write_sst2(tmp_path / "data", LABELS)
  first = classifier_workflow(tmp_path, tmp_path / "data", sp,
                              tmp_path / "out").features("train")
  os.utime(first["path"], (1, 1))  # a rebuild would change this
  # the same bytes elsewhere, newer: TSV and SentencePiece model
  shutil.copytree(tmp_path / "data", tmp_path / "moved")
  os.utime(tmp_path / "moved" / "train.tsv", (2e9, 2e9))
  sp_copy = str(tmp_path / "copy.model")
  shutil.copy(sp, sp_copy)
  again = classifier_workflow(tmp_path, tmp_path / "moved", sp_copy,
                              tmp_path / "out").features("train")
  assert again["path"] == first["path"]
  assert os.path.getmtime(first["path"]) == 1
  assert _record_labels(again["path"]) == LABELS


def test_feature_cache_rebuilt_when_one_label_changes(tmp_path, sp):
  write_sst2(tmp_path / "data", LABELS)
  wf = classifier_workflow(tmp_path, tmp_path / "data", sp, tmp_path / "out")
  first = wf.features("train")
  os.utime(first["path"], (1, 1))
  changed = list(LABELS)
  changed[5] = 1 - changed[5]
  write_sst2(tmp_path / "data", changed)  # same rows, one label differs
  again = wf.features("train")
  assert again["path"] == first["path"]  # replaced in place
  assert os.path.getmtime(again["path"]) != 1
  assert _record_labels(again["path"]) == changed
  assert again["inputs"]["examples_sha256"] != \
      first["inputs"]["examples_sha256"]
  assert again["inputs"]["spiece_sha256"] == first["inputs"]["spiece_sha256"]


def test_squad_cache_follows_content(tmp_path, sp):
  tok = SentencePieceTokenizer(sp)
  settings = FeatureSettings(max_seq_length=64, doc_stride=32,
                             max_query_length=16)

  def build(path):
    return cached_features(read_squad(path), tok, settings,
                           str(tmp_path / "out"), "predict", False)
  path = _squad_file(tmp_path / "dev.json")
  first = build(path)
  old_records = file_bytes(first["path"])
  os.utime(first["path"], (1, 1))
  os.utime(path, (2e9, 2e9))  # touched, same bytes: kept
  assert build(path)["path"] == first["path"]
  assert os.path.getmtime(first["path"]) == 1
  _squad_file(tmp_path / "dev.json", "Where was the movie made?")
  again = build(path)
  assert again["path"] == first["path"]
  assert os.path.getmtime(again["path"]) != 1
  assert file_bytes(again["path"]) != old_records
  assert again["num_examples"] == 2


def test_pretrain_data_rebuilt_only_when_the_corpus_changes(tmp_path, sp,
                                                            corpus):
  text = tmp_path / "corpus.txt"
  shutil.copy(corpus, text)
  first = create_pretrain_data([str(text)], CFG, str(tmp_path / "out"), sp,
                               seed=3)
  record = os.path.join(tmp_path, "out", "tfrecords", first[0]["filenames"][0])
  old = file_bytes(record)
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
  assert file_bytes(record) != old


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
  squad = read_squad(_squad_file(tmp_path / "train.json"),
                     is_training=True)
  settings = FeatureSettings(max_seq_length=48, doc_stride=16,
                             max_query_length=12)

  def build(out, overwrite=False):
    features(out / "features", overwrite)
    cached_features(squad, tok, settings, str(out / "squad"), "train",
                    True, overwrite=overwrite, seed=5)
    create_pretrain_data([corpus], CFG, str(out / "pretrain"), sp,
                         pass_ids=[0, 1], seed=5)
    return tree_bytes(out)
  a = build(tmp_path / "a")
  b = build(tmp_path / "b")
  # + the ids cache, the two output ledgers and the tfrecords ledger lock
  assert sorted(a) == sorted(b) and len(a) == 13
  for name in a:
    assert a[name] == b[name], name
  # built again into the same place (our own outputs deleted or
  # overwritten), the same bytes
  shutil.rmtree(tmp_path / "a" / "pretrain")
  assert build(tmp_path / "a", overwrite=True) == b


# Name and sha256 of each task's records built below, as this project has
# written them since their formats were set (checked against the code before
# issue 17 moved it). Caches are keyed by content: a change here means every
# existing cache no longer matches what its key says.
PINNED = {
    "classification": (
        "sst-2.train.len-16.27c715ef5de9.tf_record",
        "380aba35ae6289a97035fba12843614dfe00a070ddaeff473eac1555ff13fd15"),
    "race": (
        "race.dev.len-96.358956aca473.tf_record",
        "564bc34233c4c7da00b07f74071501287e8e83b5e5ed2c6ca31452ccc09b19b3"),
    "squad": (
        "squad.train.len-48.61483a64bf60.tf_record",
        "7e1e95ced6ea6d42d4e857ca2c7ed8d1cea8cf82aca5fd3ba607c21645c165b5"),
    "pretraining": (
        "train-0-0.bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.perm-8"
        ".tfrecords",
        "c8674554e6b171d1a9e608ac9b5b09d1be383af0f2895ebff9a94ee5dea957f3"),
}


def test_record_names_and_bytes_are_pinned(tmp_path, sp, corpus):
  tok = SentencePieceTokenizer(sp)
  write_sst2(tmp_path / "sst", LABELS)
  cls = build_features(
      read_examples("sst-2", str(tmp_path / "sst"), "train"),
      lambda e: example_features(e, tok.encode_ids, 16, ["0", "1"]), 16,
      False, str(tmp_path / "cls"), {"task": "sst-2", "split": "train"},
      pad_to_multiple=8)
  race = RaceExample("r-0", "The cat sat on the mat. It was warm.",
                     [qa_text("Where did the cat _?", o)
                      for o in ("sit", "run", "eat", "sleep")], 0, "middle")
  race = build_features([race], lambda e: race_features(
      e, tok.encode_ids, 24, 8), 4 * 24, False, str(tmp_path / "race"),
      {"task": "race", "split": "dev"})
  squad = cached_features(
      read_squad(_squad_file(tmp_path / "dev.json"), is_training=True), tok,
      FeatureSettings(max_seq_length=48, doc_stride=16, max_query_length=12),
      str(tmp_path / "squad"), "train", True, seed=5)
  pre = create_pretrain_data([corpus], CFG, str(tmp_path / "pre"), sp,
                             seed=5)
  paths = {"classification": cls["path"], "race": race["path"],
           "squad": squad["path"],
           "pretraining": os.path.join(tmp_path, "pre", "tfrecords",
                                       pre[0]["filenames"][0])}
  got = {k: (os.path.basename(p), hashlib.sha256(file_bytes(p)).hexdigest())
         for k, p in paths.items()}
  assert got == PINNED
