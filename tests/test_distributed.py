"""Training under real strategies equals the same arithmetic on one device:
MultiWorkerMirroredStrategy with two local worker processes (TF_CONFIG over
loopback), and MirroredStrategy over two logical CPUs for pretraining, where
each replica carries its own memory and its own bi_data halves."""

import dataclasses
import glob
import os
import socket
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.reader import pretrain_dataset
from xlnet_tf.building import build_once
from xlnet_tf.training.optimizer import make_optimizer
from xlnet_tf.tasks import ClassifierTask, PretrainTask
from xlnet_tf.training import TrainOptions, Trainer
from conftest import corpus_slice, spiece_path, start
from linear_adam import LINEAR_ADAM

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "distributed_worker.py")
STEPS = 2
PER_REPLICA = 2
CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=32000)
RNG = np.random.RandomState(0)
FEATURES = {"input_ids": RNG.randint(5, 1000, (4, 10)).astype(np.int32),
            "segment_ids": np.zeros((4, 10), np.int32),
            "input_mask": np.zeros((4, 10), np.float32),
            "label": RNG.randint(0, 2, 4).astype(np.int32)}
PRETRAIN_DATA = pd.PretrainDataConfig(
    seq_len=32, reuse_len=16, bsz_per_host=2 * PER_REPLICA,
    num_core_per_host=2, bi_data=True, num_predict=6, perm_size=8)


def classifier_task():
  return ClassifierTask(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0), 2,
                        "t")


def classifier_options(model_dir, steps):
  return TrainOptions(model_dir=str(model_dir), train_steps=steps,
                      iterations=1, **LINEAR_ADAM)


def classifier_data(ctx, skip):
  """Input pipeline i (worker i) reads rows [2i, 2i + 2) at every step."""
  del skip
  return (tf.data.Dataset.from_tensor_slices(FEATURES).batch(PER_REPLICA)
          .shard(ctx.num_input_pipelines, ctx.input_pipeline_id).repeat())


def pretrain_task():
  return PretrainTask(CONFIG, xt.RunOptions(
      dropout=0.0, dropatt=0.0, mem_len=16, reuse_len=16, bi_data=True), 32)


def pretrain_options(model_dir, steps):
  return TrainOptions(model_dir=str(model_dir), train_steps=steps,
                      iterations=1, **LINEAR_ADAM)


def pretrain_data(records, skip):
  files = sorted(glob.glob(os.path.join(records, "*.tfrecords")))
  return pretrain_dataset(files, PRETRAIN_DATA, PER_REPLICA,
                          shuffle_files=False, skip_batches=skip)


def _initial_weights(task, path):
  model = task.build_model()
  build_once(model)
  weights = model.get_weights()
  np.savez(path, *weights)
  return weights


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _weights(npz):
  return [npz[f"arr_{k}"] for k in range(len(
      [f for f in npz.files if f.startswith("arr_")]))]


def test_multi_worker_two_processes_equal_one_device(tmp_path):
  init = _initial_weights(classifier_task(), tmp_path / "init.npz")
  ports = ",".join(str(p) for p in _free_ports(2))
  model_dir = tmp_path / "mw"
  procs = [start(
      [sys.executable, WORKER, "multi_worker", str(i), ports, str(model_dir),
       str(tmp_path / "init.npz"), str(tmp_path / f"worker{i}.npz")], 600)
           for i in range(2)]
  # One device, the same four rows in one batch, the same two steps (while
  # the workers run).
  trainer = Trainer(classifier_task(), classifier_options(tmp_path / "one",
                                                          STEPS))
  trainer.model.set_weights(init)
  data = tf.data.Dataset.from_tensor_slices(FEATURES).batch(4).repeat()
  logs = trainer.train(lambda ctx, skip: data, 4)
  for proc in procs:
    res = proc.result()
    assert res.returncode == 0, res.stderr[-3000:]
  workers = [np.load(tmp_path / f"worker{i}.npz") for i in range(2)]
  assert int(workers[0]["replicas"]) == 2
  for worker in workers:
    np.testing.assert_allclose(worker["loss"], logs["loss"], rtol=1e-5)
    np.testing.assert_allclose(worker["grad_norm"], logs["grad_norm"],
                               rtol=1e-4)
    for k, w in enumerate(trainer.model.weights):
      np.testing.assert_allclose(_weights(worker)[k], w.numpy(), atol=1e-5,
                                 err_msg=w.name)
  moved = sum(not np.allclose(a, b) for a, b in zip(_weights(workers[0]),
                                                    init))
  assert moved > 10
  # The chief wrote the checkpoint; the other worker's scratch copy is gone.
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{STEPS}")
  assert not glob.glob(str(model_dir / ".worker_*"))


@pytest.fixture(scope="module")
def records(shared, tmp_path_factory):
  work = tmp_path_factory.mktemp("distributed")
  corpus = corpus_slice(shared, work, 200)
  create_pretrain_data([corpus], PRETRAIN_DATA, str(work / "data"),
                       spiece_path(shared), pass_ids=[0], seed=3)
  return str(work / "data" / "tfrecords")


def _one_device_pretraining(records, init):
  """What two replicas must compute, one replica batch at a time: replica r
  takes batch 2t + r of the stream at step t and carries its own memory;
  gradients are averaged over replicas, clipped, applied once."""
  task = pretrain_task()
  model = task.build_model()
  build_once(model)
  model.set_weights(init)
  opts = pretrain_options("unused", STEPS)
  optimizer = make_optimizer(opts)  # lr_layer_decay_rate 1: no factors
  variables = model.trainable_variables
  mems = [[tf.zeros([PER_REPLICA, 16, CONFIG.d_model])] * CONFIG.n_layer
          for _ in range(2)]
  batches = iter(pretrain_data(records, 0))
  for _ in range(STEPS):
    total = [tf.zeros_like(v) for v in variables]
    losses = []
    for replica in range(2):
      with tf.GradientTape() as tape:
        loss, mems[replica] = task.compute_loss(model, next(batches),
                                                mems[replica], training=True)
      grads = tape.gradient(loss, variables)
      total = [t if g is None else t + tf.convert_to_tensor(g) / 2
               for t, g in zip(total, grads)]
      losses.append(float(loss))
    total, _ = tf.clip_by_global_norm(total, opts.clip)
    optimizer.apply_gradients(zip(total, variables))
  return model.get_weights(), mems, np.mean(losses)


def test_mirrored_pretraining_keeps_memory_and_bi_data_per_replica(
    records, tmp_path):
  init = _initial_weights(pretrain_task(), tmp_path / "init.npz")
  started = start(
      [sys.executable, WORKER, "mirrored_pretrain", records,
       str(tmp_path / "m"), str(tmp_path / "init.npz"),
       str(tmp_path / "out.npz")], 600)
  weights, mems, last_loss = _one_device_pretraining(records, init)
  res = started.result()
  assert res.returncode == 0, res.stderr[-3000:]
  mirrored = np.load(tmp_path / "out.npz")
  assert int(mirrored["replicas"]) == 2
  np.testing.assert_allclose(mirrored["loss"], last_loss, rtol=1e-5)
  for k, (w, ref) in enumerate(zip(_weights(mirrored), weights)):
    np.testing.assert_allclose(w, ref, atol=2e-5, err_msg=str(k))
  for replica in range(2):
    for layer in range(CONFIG.n_layer):
      np.testing.assert_allclose(
          mirrored[f"mem_{layer}_replica_{replica}"], mems[replica][layer],
          atol=2e-5)
  # The replicas' memories are their own streams, not copies.
  assert not np.allclose(mirrored["mem_0_replica_0"],
                         mirrored["mem_0_replica_1"])


def test_tpu_strategy_without_a_tpu_is_a_clear_error():
  from xlnet_tf.training import make_strategy
  with pytest.raises(ValueError, match=r"--strategy=tpu: no TPU found .*"
                     r"pass --tpu=NAME or run on a TPU VM"):
    make_strategy("tpu")


def test_pretraining_step_compiles_with_xla_as_on_tpu(records, tmp_path):
  """TPUs run every step through XLA: the two-stream step (gathers at target
  rows, memory, bi_data) must compile, with static shapes, to the same
  numbers."""
  init = _initial_weights(pretrain_task(), tmp_path / "init.npz")
  results = []
  for jit in (False, True):
    trainer = Trainer(pretrain_task(), dataclasses.replace(
        pretrain_options(tmp_path / f"jit{jit}", STEPS), jit_compile=jit))
    trainer.model.set_weights(init)
    logs = trainer.train(lambda ctx, skip: pretrain_data(records, skip),
                         PER_REPLICA)
    results.append((logs["loss"], trainer.model.get_weights()))
  assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
  for a, b in zip(results[0][1], results[1][1]):
    np.testing.assert_allclose(b, a, atol=1e-5)
