"""The segment recurrence in the shared training loop: gradient
accumulation equals one large batch and two mirrored replicas equal one
device, with memory carried across 2 segments and back-propagated through
both (`bptt_segments=2`)."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer

from linear_adam import LINEAR_ADAM

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
OPTIONS = xt.RunOptions(dropout=0.0, dropatt=0.0, mem_len=6)
RNG = np.random.RandomState(1)
# 2 segments of 6; rows padded on the left across the segment boundary.
LENGTHS = np.array([12, 9, 5, 12, 3, 7, 12, 10])
FEATURES = {
    "input_ids": RNG.randint(5, 50, (8, 12)).astype(np.int32),
    "segment_ids": np.zeros((8, 12), np.int32),
    "input_mask": (np.arange(12)[None, :] < 12 - LENGTHS[:, None]).astype(
        np.float32),
    "label": RNG.randint(0, 2, 8).astype(np.int32)}


def make_task():
  return ClassifierTask(CONFIG, OPTIONS, 2, "t", seq_len=12, segment_length=6,
                        bptt_segments=2)


_INIT = {}


def initial_weights():
  if "w" not in _INIT:
    model = make_task().build_model()
    model.build(None)
    _INIT["w"] = model.get_weights()
  return _INIT["w"]


def train_one_step(model_dir, per_replica, strategy=None, **train_kw):
  """`(weights after one step, the step's logs)`."""
  trainer = Trainer(make_task(), TrainOptions(
      model_dir=str(model_dir), train_steps=1, iterations=1, **LINEAR_ADAM,
      **train_kw), strategy=strategy)
  trainer.model.set_weights(initial_weights())
  data = tf.data.Dataset.from_tensor_slices(FEATURES).batch(per_replica)
  logs = trainer.train(lambda ctx, skip: data.skip(skip).repeat(), per_replica)
  return [w.numpy() for w in trainer.model.weights], logs


def test_gradient_accumulation_equals_one_large_batch(tmp_path):
  whole, whole_logs = train_one_step(tmp_path / "a", 8)
  accumulated, acc_logs = train_one_step(tmp_path / "b", 4,
                                         grad_accum_steps=2)
  np.testing.assert_allclose(acc_logs["loss"], whole_logs["loss"], rtol=1e-6)
  np.testing.assert_allclose(acc_logs["grad_norm"], whole_logs["grad_norm"],
                             rtol=1e-5)
  moved = 0
  for a, b, w0 in zip(whole, accumulated, initial_weights()):
    np.testing.assert_allclose(a, b, atol=1e-6)
    moved += not np.allclose(a, w0)
  assert moved > 10


MIRRORED = """
import sys, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
import test_segments_training as t
from xlnet_tf.training import make_strategy
strategy = make_strategy("mirrored")
assert strategy.num_replicas_in_sync == 2
weights, logs = t.train_one_step({model_dir!r}, 4, strategy=strategy)
np.savez({out!r}, *weights, loss=logs["loss"], grad_norm=logs["grad_norm"])
"""


def test_mirrored_two_replicas_equal_one_device(tmp_path):
  tests = os.path.dirname(os.path.abspath(__file__))
  out = str(tmp_path / "mirrored.npz")
  script = MIRRORED.format(root=os.path.dirname(tests), tests=tests,
                           model_dir=str(tmp_path / "m"), out=out)
  res = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  mirrored = np.load(out)
  weights, logs = train_one_step(tmp_path / "one", 8)
  np.testing.assert_allclose(mirrored["loss"], logs["loss"], rtol=1e-6)
  np.testing.assert_allclose(mirrored["grad_norm"], logs["grad_norm"],
                             rtol=1e-5)
  for k, w in enumerate(weights):
    np.testing.assert_allclose(mirrored[f"arr_{k}"], w, atol=1e-6)
