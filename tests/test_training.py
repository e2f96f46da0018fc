"""The shared training loop: gradient accumulation equals one large batch,
XLA gives the same step, mirrored over two logical CPUs equals one device;
the first and the last also for a classifier reading 2 segments with memory
and back-propagating through both (`bptt_segments=2`)."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer

from conftest import start
from linear_adam import LINEAR_ADAM

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
OPTIONS = xt.RunOptions(dropout=0.0, dropatt=0.0)
RNG = np.random.RandomState(0)
FEATURES = {"input_ids": RNG.randint(5, 50, (8, 10)).astype(np.int32),
            "segment_ids": np.zeros((8, 10), np.int32),
            "input_mask": np.zeros((8, 10), np.float32),
            "label": RNG.randint(0, 2, 8).astype(np.int32)}
# 2 segments of 6 with memory; rows padded on the left across the boundary.
LENGTHS = np.array([12, 9, 5, 12, 3, 7, 12, 10])
SEGMENT_FEATURES = dict(
    FEATURES, input_ids=RNG.randint(5, 50, (8, 12)).astype(np.int32),
    segment_ids=np.zeros((8, 12), np.int32),
    input_mask=(np.arange(12)[None, :] < 12 - LENGTHS[:, None]).astype(
        np.float32))


def _task(case):
  if case == "segments":
    return ClassifierTask(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0,
                                                mem_len=6),
                          2, "t", seq_len=12, segment_length=6,
                          bptt_segments=2)
  return ClassifierTask(CONFIG, OPTIONS, 2, "t")


def _train_one_step(model_dir, per_replica, case="one_window", strategy=None,
                    **train_kw):
  """`(weights after one step, the step's logs)`."""
  trainer = Trainer(_task(case), TrainOptions(model_dir=str(model_dir),
                                              train_steps=1, iterations=1,
                                              **LINEAR_ADAM, **train_kw),
                    strategy=strategy)
  trainer.model.set_weights(_initial_weights())
  features = SEGMENT_FEATURES if case == "segments" else FEATURES
  data = tf.data.Dataset.from_tensor_slices(features).batch(per_replica)
  logs = trainer.train(lambda ctx, skip: data.skip(skip).repeat(), per_replica)
  weights = [w.numpy() for w in trainer.model.weights]
  return weights, logs


_INIT = {}


def _initial_weights():
  """The same weights for both cases (one model, read two ways)."""
  if "w" not in _INIT:
    model = ClassifierTask(CONFIG, OPTIONS, 2, "t").build_model()
    model.build(None)
    _INIT["w"] = model.get_weights()
  return _INIT["w"]


_ONE_DEVICE = {}


def _one_device(tmp_path, case):
  """`_train_one_step` of all 8 examples on one device (several tests
  compare with it: computed once per case)."""
  if case not in _ONE_DEVICE:
    _ONE_DEVICE[case] = _train_one_step(tmp_path / "one", 8, case)
  return _ONE_DEVICE[case]


@pytest.mark.parametrize("case", ["one_window", "segments"])
def test_gradient_accumulation_equals_one_large_batch(tmp_path, case):
  whole, whole_logs = _one_device(tmp_path, case)
  accumulated, acc_logs = _train_one_step(tmp_path / "b", 4, case,
                                          grad_accum_steps=2)
  np.testing.assert_allclose(acc_logs["loss"], whole_logs["loss"], rtol=1e-6)
  np.testing.assert_allclose(acc_logs["grad_norm"], whole_logs["grad_norm"],
                             rtol=1e-5)
  moved = 0
  for a, b, w0 in zip(whole, accumulated, _initial_weights()):
    np.testing.assert_allclose(a, b, atol=1e-6)
    moved += not np.allclose(a, w0)
  assert moved > 10  # the step really changed the weights


def test_xla_step_equals_plain_step(tmp_path):
  plain, _ = _one_device(tmp_path, "one_window")
  xla, _ = _train_one_step(tmp_path / "b", 8, jit_compile=True)
  for a, b in zip(plain, xla):
    np.testing.assert_allclose(a, b, atol=1e-5)


# Both cases, each into <work>/<case>.npz.
MIRRORED = """
import os, sys, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
import test_training as t
from xlnet_tf.training import make_strategy
strategy = make_strategy("mirrored")
assert strategy.num_replicas_in_sync == 2
init = np.load({init!r})
t._INIT["w"] = [init[f"arr_{{k}}"] for k in range(len(init.files))]
for case in ("one_window", "segments"):
  weights, logs = t._train_one_step(os.path.join({work!r}, case), 4, case,
                                    strategy)
  np.savez(os.path.join({work!r}, case + ".npz"), *weights, loss=logs["loss"],
           grad_norm=logs["grad_norm"])
"""


@pytest.fixture(scope="module", autouse=True)
def two_replicas(tmp_path_factory):
  """The two-replica runs (a process with two logical CPUs), begun with the
  module's first test so that they overlap its work: their folder and the
  started run."""
  tests = os.path.dirname(os.path.abspath(__file__))
  work = tmp_path_factory.mktemp("mirrored")
  init = str(work / "init.npz")
  np.savez(init, *_initial_weights())  # the same start in both processes
  script = MIRRORED.format(root=os.path.dirname(tests), tests=tests,
                           work=str(work), init=init)
  return work, start([sys.executable, "-c", script], 600)


@pytest.mark.parametrize("case", ["one_window", "segments"])
def test_mirrored_two_replicas_equal_one_device(tmp_path, two_replicas,
                                                case):
  """Two replicas of 4 give the loss, gradient norm and update of one device
  with the same 8 examples (replica r takes the r-th batch of 4)."""
  work, started = two_replicas
  res = started.result()
  assert res.returncode == 0, res.stderr[-3000:]
  mirrored = np.load(work / f"{case}.npz")
  weights, logs = _one_device(tmp_path, case)
  np.testing.assert_allclose(mirrored["loss"], logs["loss"], rtol=1e-6)
  np.testing.assert_allclose(mirrored["grad_norm"], logs["grad_norm"],
                             rtol=1e-5)
  for k, w in enumerate(weights):
    np.testing.assert_allclose(mirrored[f"arr_{k}"], w, atol=1e-6)


def test_frozen_layers_do_not_move(tmp_path):
  after, _ = _train_one_step(tmp_path / "f", 8, freeze_layers=1)
  model = ClassifierTask(CONFIG, OPTIONS, 2, "t").build_model()
  model.build(None)
  names = [w.name for w in model.weights]
  for name, a, w0 in zip(names, after, _initial_weights()):
    frozen = "layer_0/" in name or "word_embedding" in name
    if frozen or "mask_emb" in name:
      np.testing.assert_array_equal(a, w0, err_msg=name)
    elif "layer_1/" in name and "kernel" in name:
      assert not np.array_equal(a, w0), name


def test_layer_hooks_drive_layer_rates_and_weight_decay(tmp_path):
  """Per-layer rates follow the task's `layer_of`; the decay exclusions
  match on variable paths, which a model built by the loop must carry."""
  from xlnet_tf.training.optimizer import variable_key
  trainer = Trainer(ClassifierTask(CONFIG, OPTIONS, 2, "t"),
                    TrainOptions(model_dir=str(tmp_path), train_steps=1,
                                 weight_decay=0.01, lr_layer_decay_rate=0.5))
  names = [v.name for v in trainer.model.trainable_variables]
  opt = trainer.optimizer
  factors = {n: opt.layer_factors.get(variable_key(n), 1.0) for n in names}
  assert {f for n, f in factors.items()
          if "transformer/layer_0/" in n} == {0.5}
  assert {f for n, f in factors.items()
          if "transformer/layer_1/" in n} == {1.0}
  assert factors[[n for n in names if "word_embedding" in n][0]] == 1.0
  decayed = {n for n in names if opt._do_use_weight_decay(n)}  # pylint: disable=protected-access
  assert all("LayerNorm" not in n and "bias" not in n for n in decayed)
  assert any("rel_attn/q/kernel" in n for n in decayed)
  assert any("LayerNorm/gamma" in n for n in names)
