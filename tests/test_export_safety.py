"""SavedModel exports never destroy what is not a previous export of theirs:
the marker, the refusals (library and run_classifier's preflight), replacing
an export, ordinary permissions, stale temp cleanup. (`xlnet-saved-model-cli`:
test_saved_model_cli.py.)"""

import errno
import json
import os
import shutil
import subprocess
import sys
import time
import types

import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils import atomic
from data_utils.errors import UserError
from xlnet_tf.export import directory as export_dir_module
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.export.directory import EXPORT_MARKER, remove_stale_export_temps
from xlnet_tf.finetuning.driver import check_finetune_export
from xlnet_tf.tasks import ClassifierTask
from conftest import refused_line, rte_flags, tree_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
LABELS = ["contradiction", "entailment", "neutral"]


def temps(directory):
  return [n for n in os.listdir(directory) if n.startswith(".tmp-export-")]


def write(path, data=b"user data\n"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


@pytest.fixture(scope="module")
def model():
  m = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions()), n_class=3,
                         task_name="mnli")
  m.build(None)
  return m


@pytest.fixture(scope="module")
def previous(model, tmp_path_factory):
  """A classifier export (features signature only), to copy from."""
  path = str(tmp_path_factory.mktemp("previous") / "sm")
  return export_classifier(model, path, 8, False, labels=LABELS)


def _export(model, path):
  return export_classifier(model, str(path), 8, False, labels=LABELS)


# Refusals ------------------------------------------------------------------

def _user_dir(d):
  write(os.path.join(d, "notes.txt"))
  write(os.path.join(d, "sub", "data.bin"), bytes(range(256)))


def _legacy_export(d):
  write(os.path.join(d, "saved_model.pb"), b"\x08\x01")
  write(os.path.join(d, "variables", "variables.index"), b"index")


def _other_kind(d):
  write(os.path.join(d, "saved_model.pb"), b"\x08\x01")
  write(os.path.join(d, EXPORT_MARKER), json.dumps(
      {"format": 1, "kind": "regressor", "files": ["saved_model.pb"]}).encode())


def _extra_files(d):
  write(os.path.join(d, "saved_model.pb"), b"\x08\x01")
  write(os.path.join(d, EXPORT_MARKER), json.dumps(
      {"format": 1, "kind": "classifier",
       "files": ["saved_model.pb"]}).encode())
  write(os.path.join(d, "notes.txt"))


def _damaged_marker(d):
  write(os.path.join(d, "saved_model.pb"), b"\x08\x01")
  write(os.path.join(d, EXPORT_MARKER), b"{not json")


REFUSALS = {
    "user_dir": (_user_dir, "exists and is not an xlnet-tf classifier export "
                 "(no xlnet_tf_export.json); choose another directory or "
                 "remove it yourself"),
    "legacy_export": (_legacy_export, "holds a SavedModel without "
                      "xlnet_tf_export.json (older than this check, or not an "
                      "xlnet-tf export); remove it yourself or choose another "
                      "directory"),
    "other_kind": (_other_kind, "holds an xlnet-tf regressor export, not a "
                   "classifier export; choose another directory or remove it "
                   "yourself"),
    "extra_files": (_extra_files, "holds files the export did not write "
                    "(notes.txt); move them out or choose another directory"),
    "damaged_marker": (_damaged_marker, "its xlnet_tf_export.json is damaged; "
                       "choose another directory or remove it yourself"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_export_refuses_what_is_not_its_own_export(model, tmp_path, case):
  make, reason = REFUSALS[case]
  target = str(tmp_path / "target")
  make(target)
  before = tree_digest(target)
  with pytest.raises(UserError) as e:
    _export(model, target)
  assert str(e.value) == f"--export_dir={target}: {reason}"
  assert tree_digest(target) == before
  assert temps(tmp_path) == []


def test_export_refuses_a_file(model, tmp_path):
  target = str(tmp_path / "model.bin")
  write(target)
  with pytest.raises(UserError) as e:
    _export(model, target)
  assert str(e.value) == (f"--export_dir={target}: is a file, not an export "
                          "directory; choose another path")
  with open(target, "rb") as f:
    assert f.read() == b"user data\n"
  assert sorted(os.listdir(tmp_path)) == ["model.bin"]


def _opts(tmp_path, export_dir, model_dir=None):
  model_dir = model_dir or str(tmp_path / "model")
  return types.SimpleNamespace(
      do_train=True, export_dir=export_dir, export_tflite=False,
      output_dir=str(tmp_path / "data"),
      data_dir=str(tmp_path / "glue"), predict_dir=None,
      spiece_model_file=str(tmp_path / "spiece.model"),
      train=types.SimpleNamespace(model_dir=model_dir, init_checkpoint=None))


RELATIONS = {
    # export_dir, relative to tmp_path -> why it is refused
    "model": "is also --model_dir; the export would replace it; choose "
             "another directory",
    ".": "contains --model_dir={model}; the export would replace it; choose "
         "another directory",
    "model/checkpoint": "training writes 'checkpoint' in --model_dir={model}; "
                        "choose another directory",
}


@pytest.mark.parametrize("relative", sorted(RELATIONS))
def test_preflight_refuses_export_dir_over_model_dir(tmp_path, relative):
  # A fresh (empty) model_dir passes the generic check: the relation to
  # model_dir must refuse it, before training writes checkpoints there.
  model_dir = str(tmp_path / "model")
  os.makedirs(model_dir)
  export_dir = os.path.normpath(str(tmp_path / relative))
  task = ClassifierTask(TINY, xt.RunOptions(), 2, "rte")
  with pytest.raises(UserError) as e:
    check_finetune_export(_opts(tmp_path, export_dir), task)
  reason = RELATIONS[relative].format(model=model_dir)
  assert str(e.value) == f"--export_dir={export_dir}: {reason}"
  assert os.listdir(model_dir) == []


def test_preflight_default_export_dir_and_no_train(tmp_path):
  task = ClassifierTask(TINY, xt.RunOptions(), 1, "sts-b", regression=True)
  check_finetune_export(_opts(tmp_path, None), task)  # model/saved_model
  _other_kind(str(tmp_path / "model" / "saved_model"))
  opts = _opts(tmp_path, None)
  task = ClassifierTask(TINY, xt.RunOptions(), 2, "rte")
  with pytest.raises(UserError) as e:
    check_finetune_export(opts, task)
  assert str(e.value) == (
      f"--export_dir={tmp_path}/model/saved_model: holds an xlnet-tf "
      "regressor export, not a classifier export; choose another directory "
      "or remove it yourself")
  # Without --do_train the run exports nothing, so nothing to refuse.
  check_finetune_export(types.SimpleNamespace(**dict(vars(opts),
                                                     do_train=False)), task)
  with pytest.raises(UserError) as e:
    check_finetune_export(types.SimpleNamespace(**dict(
        vars(opts), do_train=False, export_tflite=True)), task)
  assert str(e.value) == ("--export_tflite: a run exports after training; "
                          "add --do_train")


# Replacing, permissions, interruptions --------------------------------------

def test_export_into_an_empty_directory(model, tmp_path):
  target = tmp_path / "empty"
  target.mkdir()
  _export(model, target)
  with open(target / EXPORT_MARKER) as f:
    marker = json.load(f)
  assert marker["kind"] == "classifier"
  assert marker["xlnet_tf_version"] == xt.__version__
  assert set(marker["files"]) >= {"saved_model.pb", "variables"}
  assert sorted(os.listdir(target)) == sorted(marker["files"] +
                                              [EXPORT_MARKER])
  assert temps(tmp_path) == []


@pytest.mark.parametrize("exchange", [True, False])
def test_export_replaces_its_previous_export(model, previous, tmp_path,
                                             monkeypatch, exchange):
  if not exchange:  # a file system without renameat2(RENAME_EXCHANGE)
    monkeypatch.setattr(export_dir_module, "_exchange", lambda a, b: False)
  target = tmp_path / "sm"
  shutil.copytree(previous, target)
  write(str(tmp_path / "beside.txt"))
  other = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions()), n_class=3,
                             task_name="mnli")  # new random weights
  other.build(None)
  old = tree_digest(str(target))
  _export(other, target)
  new = tree_digest(str(target))
  assert set(new) == set(old)
  assert new["variables/variables.data-00000-of-00001"] != \
      old["variables/variables.data-00000-of-00001"]
  assert sorted(os.listdir(tmp_path)) == ["beside.txt", "sm"]
  loaded = tf.saved_model.load(str(target))
  ids = tf.zeros([1, 8], tf.int32)
  got = loaded.signatures["serving_default"](
      input_ids=ids, segment_ids=ids, input_mask=tf.zeros([1, 8]))["logits"]
  want = other({"input_ids": ids, "segment_ids": ids,
                "input_mask": tf.zeros([1, 8])})["logits"]
  tf.debugging.assert_near(got, want, atol=1e-5)


def test_failed_export_keeps_the_previous_one(model, previous, tmp_path,
                                              monkeypatch):
  target = tmp_path / "sm"
  shutil.copytree(previous, target)
  before = tree_digest(str(target))

  def full_disk(module, path, signatures=None):
    write(os.path.join(path, "variables", "variables.index"), b"partial")
    raise OSError(errno.ENOSPC, "No space left on device", path)
  monkeypatch.setattr(tf.saved_model, "save", full_disk)
  with pytest.raises(UserError) as e:
    _export(model, target)
  assert str(e.value) == (f"{target}: no space left on device while "
                          "exporting (a previous export there is kept)")
  assert tree_digest(str(target)) == before
  assert temps(tmp_path) == []


@pytest.mark.parametrize("umask,dir_mode,file_mode",
                         [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_export_has_ordinary_permissions(model, tmp_path, umask, dir_mode,
                                         file_mode):
  old = os.umask(umask)
  try:
    _export(model, tmp_path / "sm")
  finally:
    os.umask(old)
  root = str(tmp_path / "sm")
  assert os.stat(root).st_mode & 0o777 == dir_mode
  modes = {rel: (os.stat(os.path.join(root, rel)).st_mode & 0o777, kind)
           for rel, kind in tree_digest(root).items()}
  assert modes["variables"] == (dir_mode, "dir")
  assert {m for m, kind in modes.values() if kind == "dir"} == {dir_mode}
  assert {m for m, kind in modes.values() if kind != "dir"} == {file_mode}


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_stale_export_temps_are_removed_and_nothing_else(model, tmp_path):
  host = atomic.host_name()
  dead = _dead_pid()
  ours_dead = tmp_path / f".tmp-export-{host}-{dead}-deadbeef"
  ours_dead_old = tmp_path / f".tmp-export-{host}-{dead}-0badcafe-old"
  legacy_old = tmp_path / ".tmp-export-ab_cd123"
  for d in (ours_dead, ours_dead_old, legacy_old):
    _legacy_export(str(d))
  day_ago = time.time() - 2 * 24 * 3600
  os.utime(legacy_old, (day_ago, day_ago))
  keep = {
      # a live writer (this process)
      f".tmp-export-{host}-{os.getpid()}-0123abcd": _legacy_export,
      # another host's, on a shared disk
      f".tmp-export-elsewhere-{dead}-deadbeef": _legacy_export,
      # ours by name, but holding a user's file
      f".tmp-export-{host}-{dead}-cafebabe": _user_dir,
      # a recent pre-marker temp: its writer may still be running
      ".tmp-export-recent12": _legacy_export,
  }
  for name, make in keep.items():
    make(str(tmp_path / name))
  write(str(tmp_path / ".tmp-export-notes"))  # a user's dotfile
  write(str(tmp_path / f".tmp-export-{host}-{dead}-feedf00d"))  # a file
  before = {n: tree_digest(str(tmp_path / n)) for n in os.listdir(tmp_path)
            if n not in (ours_dead.name, ours_dead_old.name, legacy_old.name)}
  _export(model, tmp_path / "sm")
  after = {n: tree_digest(str(tmp_path / n)) for n in os.listdir(tmp_path)
           if n != "sm"}
  assert after == before
  assert not os.path.exists(ours_dead) and not os.path.exists(ours_dead_old)
  assert not os.path.exists(legacy_old)
  assert remove_stale_export_temps(str(tmp_path)) == []


# run_classifier: refused in preflight ---------------------------------------

def test_run_classifier_refuses_export_dir_before_training(shared, tmp_path):
  config = str(tmp_path / "xlnet_config.json")
  TINY.to_json(config)
  export_dir = str(tmp_path / "mine")
  _user_dir(export_dir)
  before = tree_digest(export_dir)
  flags = rte_flags(shared, tmp_path, config)
  assert refused_line("run_classifier.py", flags + [
      f"--export_dir={export_dir}", "--do_train", "--max_seq_length=32",
      "--train_batch_size=8", "--train_steps=2", "--iterations=1"]) == (
      f"run_classifier: --export_dir={export_dir}: exists and is not an "
      "xlnet-tf classifier export (no xlnet_tf_export.json); choose another "
      "directory or remove it yourself")
  assert tree_digest(export_dir) == before
  model_dir = tmp_path / "model"
  assert not model_dir.exists() or not [
      n for n in os.listdir(model_dir)
      if n == "checkpoint" or n.startswith("ckpt-")]
  assert not (tmp_path / "data").exists()  # no features built either
