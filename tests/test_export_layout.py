"""The versioned export root (`xlnet_tf.export.layout`): what it accepts and
refuses (nothing written on a refusal), versions added beside each other and
the same step replaced, permissions of every directory. (One export's
directory: test_export_safety.py; a whole run: test_run_classifier.py.)"""

import json
import os

import pytest

import xlnet_tf as xt
from data_utils.errors import UserError
from xlnet_tf.export.directory import EXPORT_MARKER, read_export_marker
from xlnet_tf.export.layout import (check_export_root, prepare_export_root,
                                    version_dir)
from xlnet_tf.tasks.classification.serving import export_classifier
from conftest import tree_digest

TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000)


def write(path, data=b"user data\n"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


def marker(d, kind="classifier", **fields):
  write(os.path.join(d, EXPORT_MARKER),
        json.dumps(dict(fields, kind=kind)).encode())


def _version(d, kind="classifier"):
  write(os.path.join(d, "saved_model.pb"), b"\x08\x01")
  marker(d, kind, format=1, files=["saved_model.pb"])


def _root(d, kind="classifier"):
  marker(d, kind, layout="versioned")
  _version(os.path.join(d, "features", "10"), kind)


def _unversioned(d):
  _version(d)


def _user_file_in_root(d):
  _root(d)
  write(os.path.join(d, "notes.txt"))


def _named_version(d):
  _root(d)
  _version(os.path.join(d, "features", "best"))


def _other_kind_version(d):
  _root(d)
  _version(os.path.join(d, "text", "20"), kind="regressor")


def _user_file_in_version(d):
  _root(d)
  write(os.path.join(d, "features", "10", "notes.txt"))


REFUSALS = {
    "unversioned": (_unversioned, "{d}: holds an xlnet-tf classifier export "
                    "in the unversioned layout of earlier versions; move it "
                    "aside or choose another directory"),
    "user_file_in_root": (_user_file_in_root, "{d}: holds files the export "
                          "did not write (notes.txt); move them out or "
                          "choose another directory"),
    "named_version": (_named_version, "{d}: features/best is not a version "
                      "the export wrote; move it out or choose another "
                      "directory"),
    "other_kind_version": (_other_kind_version, "{d}/text/20: holds an "
                           "xlnet-tf regressor export, not a classifier "
                           "export; choose another directory or remove it "
                           "yourself"),
    "user_file_in_version": (_user_file_in_version, "{d}/features/10: holds "
                             "files the export did not write (notes.txt); "
                             "move them out or choose another directory"),
    "user_dir": (lambda d: write(os.path.join(d, "a", "b.txt")),
                 "{d}: exists and is not an xlnet-tf classifier export (no "
                 "xlnet_tf_export.json); choose another directory or remove "
                 "it yourself"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_root_refuses_what_it_did_not_write(tmp_path, case):
  make, reason = REFUSALS[case]
  root = str(tmp_path / "exports")
  make(root)
  before = tree_digest(root)
  for check in (check_export_root, prepare_export_root):
    with pytest.raises(UserError) as e:
      check(root, "classifier")
    assert str(e.value) == "--export_dir=" + reason.format(d=root)
  assert tree_digest(root) == before


def test_root_accepts_its_own_layout_and_interrupted_temps(tmp_path):
  root = str(tmp_path / "exports")
  _root(root)
  os.makedirs(os.path.join(root, "features", ".tmp-export-h-1-0123abcd"))
  write(os.path.join(root, ".tmp-xlnet-h-1-abc"))
  check_export_root(root, "classifier")
  check_export_root(str(tmp_path / "new" / "exports"), "classifier")
  os.makedirs(tmp_path / "empty")
  check_export_root(str(tmp_path / "empty"), "classifier")


@pytest.fixture
def umask_022():
  old = os.umask(0o022)
  yield
  os.umask(old)


def test_versions_sit_beside_each_other_and_a_step_is_replaced(tmp_path,
                                                               umask_022):
  root = str(tmp_path / "exports")
  model = xt.XLNetClassifier(xt.XLNetModel(TINY), n_class=2,
                             task_name="sst-2")
  model.build(None)
  prepare_export_root(root, "classifier")
  for step in (10, 20):
    export_classifier(model, version_dir(root, "features", step), 8, False,
                      labels=["0", "1"])
  first = tree_digest(version_dir(root, "features", 20))
  prepare_export_root(root, "classifier")  # a later run, the same root
  export_classifier(model, version_dir(root, "features", 20), 8, False,
                    labels=["neg", "pos"])
  assert sorted(os.listdir(os.path.join(root, "features"))) == ["10", "20"]
  assert tree_digest(version_dir(root, "features", 20)) != first
  with open(os.path.join(root, EXPORT_MARKER)) as f:
    assert json.load(f)["layout"] == "versioned"
  assert read_export_marker(version_dir(root, "features", 10))["kind"] == \
      "classifier"
  check_export_root(root, "classifier")
  # Readable and traversable by other users, every directory and file.
  for dirpath, _, files in os.walk(root):
    assert os.stat(dirpath).st_mode & 0o755 == 0o755, dirpath
    for name in files:
      path = os.path.join(dirpath, name)
      assert os.stat(path).st_mode & 0o644 == 0o644, path
