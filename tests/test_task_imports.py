"""Importing a task loads that task: the registry and the specs are light
(each task's `spec` and `formats` only), one task's model loads no other
task, and a batch worker loads its own kind and no tensorflow_text (the
exports it reads are plain TensorFlow ops). Each case imports in a fresh
interpreter and reads its `sys.modules`."""

import json
import os
import subprocess
import sys

import pytest
import tf_keras as keras

import xlnet_tf as xt
from xlnet_tf.tasks.registry import TASKS, batch_specs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = sorted({s.model_at.split(".")[2] for s in TASKS})
# What the registry loads of every task package.
LIGHT = ("spec", "formats")


def _loaded(*modules, then: str = "None") -> tuple:
  """`(modules loaded once `modules` are imported, those loaded once the
  expression `then` is evaluated after)`, in a new process."""
  code = ("import importlib, json, sys\n"
          f"for name in {list(modules)!r}:\n"
          "  importlib.import_module(name)\n"
          "before = sorted(sys.modules)\n"
          f"{then}\n"
          "print(json.dumps([before, sorted(sys.modules)]))")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_USE_LEGACY_KERAS", None)  # a user's process: the package sets it
  done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  before, after = json.loads(done.stdout.strip().splitlines()[-1])
  return set(before), set(after)


def _heavy(loaded: set, package: str) -> list:
  """The modules of task `package` loaded beyond the light ones."""
  prefix = f"xlnet_tf.tasks.{package}."
  return sorted(m for m in loaded if m.startswith(prefix)
                and m[len(prefix):] not in LIGHT)


def _others(loaded: set, package: str) -> dict:
  """{other task package: its modules loaded beyond the light ones}."""
  return {p: _heavy(loaded, p) for p in PACKAGES if p != package
          and _heavy(loaded, p)}


def test_the_registry_loads_no_task_and_a_public_name_its_own():
  """`xlnet_tf`, `xlnet_tf.tasks` and the registry load every spec and no
  task; `xlnet_tf.XLNetForQuestionAnswering` loads its task alone."""
  before, after = _loaded("xlnet_tf", "xlnet_tf.tasks",
                          "xlnet_tf.tasks.registry",
                          then="xlnet_tf = importlib.import_module('xlnet_tf')"
                          "; xlnet_tf.XLNetForQuestionAnswering")
  assert _others(before, None) == {}
  assert {f"xlnet_tf.tasks.{p}.spec" for p in PACKAGES} <= before
  assert "tensorflow_text" not in before
  assert "xlnet_tf.tasks.squad.model" in after
  assert _others(after, "squad") == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_a_task_and_its_batch_worker_load_no_other_task(package):
  """A task's model, and a batch worker's modules with its kind (the Beam
  pipeline, the model handler), load neither another task nor
  tensorflow_text."""
  kinds = [s.batch_at.partition(":")[0] for s in batch_specs()
           if s.model_at.split(".")[2] == package]
  worker = ["xlnet_tf.batch_predict.pipeline"] + kinds[:1] if kinds else []
  loaded, _ = _loaded(f"xlnet_tf.tasks.{package}.model", *worker)
  assert f"xlnet_tf.tasks.{package}.model" in loaded
  assert set(worker) <= loaded
  assert _others(loaded, package) == {}
  assert "tensorflow_text" not in loaded
  # TensorFlow loaded, Keras 3 not (`data_utils` sets TF_USE_LEGACY_KERAS).
  assert "tensorflow" in loaded and not {"keras", "keras.src"} & loaded


def test_a_saved_task_model_deserializes_after_a_bare_import(tmp_path):
  """Keras finds a task model by its registered name before its task is
  imported: a fresh process that only imported `xlnet_tf` rebuilds it
  (the same class and config), loading that task and no other."""
  config = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4,
                          d_inner=16, n_token=20)
  model = xt.XLNetForQuestionAnswering(xt.XLNetModel(config))
  (tmp_path / "m.json").write_text(json.dumps(keras.layers.serialize(model)))
  rebuilt = ("import tf_keras\n"
             f"m = tf_keras.layers.deserialize(json.load(open({str(tmp_path / 'm.json')!r})))\n"
             f"assert type(m).__name__ == {type(model).__name__!r}, m\n"
             f"assert m.get_config() == {model.get_config()!r}")
  before, after = _loaded("xlnet_tf", "json", then=rebuilt)
  assert _others(before, None) == {}
  assert _heavy(after, "squad") and _others(after, "squad") == {}
