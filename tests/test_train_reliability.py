"""Training reliability: a non-finite loss stops the run at its step without
saving it, a full disk keeps the last checkpoint, interrupted saves are
cleaned up, one seed gives one run, bad flags and a resume with other model
flags are one-line errors that leave model_dir as it was."""

import dataclasses
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from data_utils import pretrain_data as pd
from data_utils.create_pretrain_data import create_pretrain_data
from data_utils.errors import UsageError, UserError
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.config import ConfigError, check_vocab
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import (TrainOptions, Trainer, TrainTask,
                               remove_checkpoint_temps)
from xlnet_tf.workflows.finetune import check_finetune_training
from conftest import (corpus_slice, refused_line, rte_flags, spiece_path,
                      tree_digest)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# A tiny task: a linear model whose loss is multiplied by `bad` (nan, inf)
# in the batches whose `poison` feature is set.
class Linear(keras.Model):

  def build(self, input_shape):
    self.w = self.add_weight("w", shape=[2], initializer="zeros")
    self.built = True  # Model.build would want an input shape

  def call(self, x):
    return tf.reduce_sum(x * self.w, -1)


class PoisonTask(TrainTask):

  def __init__(self, bad=float("nan")):
    self.bad = bad

  def build_model(self):
    return Linear()

  def compute_loss(self, model, features, state, training):
    loss = tf.reduce_mean(tf.square(model(features["x"]) - features["y"]))
    factor = tf.where(tf.reduce_any(features["poison"] > 0),
                      tf.constant(self.bad), tf.constant(1.0))
    return loss * factor, None


def _poison_data(steps, bad_step=None, batch=4):
  """One batch per step; the batch of step `bad_step` (1-based) poisoned."""
  rng = np.random.RandomState(0)
  x = rng.randn(steps * batch, 2).astype(np.float32)
  poison = np.zeros(steps * batch, np.int32)
  if bad_step:
    poison[(bad_step - 1) * batch:bad_step * batch] = 1
  data = tf.data.Dataset.from_tensor_slices(
      {"x": x, "y": x @ np.float32([1.5, -2.0]) + 1.0, "poison": poison}
  ).batch(batch)
  return lambda ctx, skip: data.skip(skip)


def _checkpoint_files(model_dir):
  return tree_digest(model_dir, skip=("train",))  # summaries keep growing


@pytest.mark.parametrize("bad_step,bad,kept", [
    (37, float("nan"), "the last good checkpoint, step 30, is kept in {d}"),
    (3, float("inf"), "no checkpoint was saved in {d} before it")])
def test_non_finite_loss_stops_at_its_step_without_saving(tmp_path, bad_step,
                                                          bad, kept):
  d = str(tmp_path / "m")
  trainer = Trainer(PoisonTask(bad), TrainOptions(
      model_dir=d, train_steps=100, iterations=5, save_steps=10,
      learning_rate=1e-2))
  snapshots = {}
  with pytest.raises(UserError) as err:
    trainer.train(_poison_data(100, bad_step), 4,
                  on_save=lambda s: snapshots.update(
                      {s: _checkpoint_files(d)}))
  word = "nan" if np.isnan(bad) else "inf"
  assert str(err.value) == (f"training stopped at step {bad_step}: loss is "
                            f"{word} ({kept.format(d=d)})")
  saved = sorted(snapshots)
  assert saved == [s for s in (10, 20, 30) if s < bad_step]
  if saved:
    # Nothing written since the last good save; it restores, finite.
    assert _checkpoint_files(d) == snapshots[saved[-1]]
    latest = tf.train.latest_checkpoint(d)
    assert latest == os.path.join(d, f"ckpt-{saved[-1]}")
    model = Linear()
    model.build(None)
    tf.train.Checkpoint(model=model).restore(latest).expect_partial()
    assert np.isfinite(model.w.numpy()).all() and model.w.numpy().any()
  else:
    assert tf.train.latest_checkpoint(d) is None
    assert os.listdir(d) == ["train"]  # the summaries, no checkpoint


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device", "ckpt-20_temp/part"),
    tf.errors.ResourceExhaustedError(
        None, None, "ckpt-20_temp/part-00000-of-00001.data-00000-of-00001; "
        "No space left on device")])
def test_full_disk_while_saving_keeps_the_last_checkpoint(tmp_path, error):
  d = str(tmp_path / "m")
  trainer = Trainer(PoisonTask(), TrainOptions(
      model_dir=d, train_steps=30, iterations=10, save_steps=10,
      learning_rate=1e-2))
  real_save = trainer.manager.save
  temp = os.path.join(d, "ckpt-20_temp")

  def save(checkpoint_number=None, **kw):
    if checkpoint_number == 20:  # a save that ran out of space midway
      os.makedirs(temp)
      with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"
                             ".tempstate123"), "wb") as f:
        f.write(b"\0" * 4096)
      raise error
    return real_save(checkpoint_number=checkpoint_number, **kw)
  trainer.manager.save = save
  weights = {}
  with pytest.raises(UserError) as err:
    trainer.train(_poison_data(30), 4, on_save=lambda s: weights.update(
        {s: (trainer.model.w.numpy().copy(), _checkpoint_files(d))}))
  assert str(err.value) == (
      f"{d}: no space left on device while saving the checkpoint of step 20 "
      f"(the last good checkpoint, step 10, is kept in {d})")
  assert not os.path.exists(temp)  # the partial save is gone
  assert _checkpoint_files(d) == weights[10][1]
  model = Linear()
  model.build(None)
  tf.train.Checkpoint(model=model).restore(
      tf.train.latest_checkpoint(d)).expect_partial()
  np.testing.assert_array_equal(model.w.numpy(), weights[10][0])


def test_resume_from_a_damaged_checkpoint_is_one_line(tmp_path):
  d = str(tmp_path / "m")
  opts = TrainOptions(model_dir=d, train_steps=10, iterations=10,
                      learning_rate=1e-2)
  Trainer(PoisonTask(), opts).train(_poison_data(10), 4)
  data = os.path.join(d, "ckpt-10.data-00000-of-00001")
  with open(data, "rb") as f:
    damaged = f.read()[:-8]  # cut short: the last tensor loses its end
  with open(data, "wb") as f:
    f.write(damaged)
  before = _checkpoint_files(d)
  with pytest.raises(UserError) as err:
    Trainer(PoisonTask(), dataclasses.replace(opts, train_steps=20)).train(
        _poison_data(20), 4)
  assert re.fullmatch(
      re.escape(f"{d}/ckpt-10: damaged checkpoint: ckpt-10.data-00000-of-"
                "00001 is truncated (read less bytes than requested for ")
      + r"\S+\)", str(err.value)), str(err.value)
  assert _checkpoint_files(d) == before


def test_next_run_removes_only_interrupted_checkpoint_saves(tmp_path):
  d = tmp_path / "m"
  ours = d / "ckpt-7_temp"
  ours.mkdir(parents=True)
  for name in ("part-00000-of-00001.index",
               "part-00000-of-00001.data-00000-of-00001.tempstate99"):
    (ours / name).write_bytes(b"x" * 100)
  # Look-alikes that are not TensorFlow's leftovers of our checkpoints.
  (d / "ckpt-8_temp").mkdir()
  (d / "ckpt-8_temp" / "notes.txt").write_text("mine")
  (d / "ckpt-9_temp").write_text("a file")
  (d / "myckpt-3_temp").mkdir()
  (d / "myckpt-3_temp" / "part-00000-of-00001.index").write_text("x")
  (d / "ckpt-3_temp.bak").mkdir()
  (d / "ckpt-3_temp.bak" / "part-00000-of-00001.index").write_text("x")
  (d / "other.txt").write_text("keep")
  before = tree_digest(d)
  Trainer(PoisonTask(), TrainOptions(model_dir=str(d), train_steps=1,
                                     iterations=1)).train(_poison_data(1), 4)
  after = tree_digest(d, skip=("train",))
  assert not ours.exists()
  kept = {k: v for k, v in before.items() if not k.startswith("ckpt-7_temp")}
  assert {k: after[k] for k in kept} == kept
  assert remove_checkpoint_temps(str(tmp_path / "missing")) == []


CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
RNG = np.random.RandomState(0)
FEATURES = {"input_ids": RNG.randint(5, 50, (8, 10)).astype(np.int32),
            "segment_ids": np.zeros((8, 10), np.int32),
            "input_mask": np.zeros((8, 10), np.float32),
            "label": RNG.randint(0, 2, 8).astype(np.int32)}


def _seeded_run(model_dir, seed):
  """The weights as initialised, then the last loss and the weights after 3
  fine-tuning steps with dropout, from fresh weights."""
  task = ClassifierTask(CONFIG, xt.RunOptions(dropout=0.3, dropatt=0.3), 2,
                        "t")
  trainer = Trainer(task, TrainOptions(model_dir=str(model_dir), train_steps=3,
                                       iterations=1, learning_rate=1e-3,
                                       seed=seed))
  initial = [w.numpy() for w in trainer.model.weights]
  data = tf.data.Dataset.from_tensor_slices(FEATURES).batch(4)
  logs = trainer.train(lambda ctx, skip: data.skip(skip).repeat(), 4)
  return initial, logs["loss"], [w.numpy() for w in trainer.model.weights]


def test_same_seed_same_finetuning_run(tmp_path):
  init_a, loss_a, weights_a = _seeded_run(tmp_path / "a", 7)
  init_b, loss_b, weights_b = _seeded_run(tmp_path / "b", 7)
  init_c, loss_c, weights_c = _seeded_run(tmp_path / "c", 8)
  # What the seed draws (initial weights, dropout masks) is identical.
  for a, b in zip(init_a, init_b):
    np.testing.assert_array_equal(a, b)
  assert not all(np.array_equal(a, c) for a, c in zip(init_a, init_c))
  # Training then matches but for the last bit of a sum: two CPU threads
  # may add in either order (seen: 4 of 256 elements 1 ulp apart). The loss
  # line prints 4 decimals; another seed moves far more than that.
  assert f"{loss_a:.4f}" == f"{loss_b:.4f}" != f"{loss_c:.4f}"
  for a, b in zip(weights_a, weights_b):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_option_and_config_bounds():
  for kw, message in [
      (dict(iterations=0), "--iterations=0: must be at least 1"),
      (dict(save_steps=0), "--save_steps=0: must be at least 1"),
      (dict(seed=-1), "--seed=-1: must be in [0, 4294967295]"),
      (dict(warmup_steps=20), "--warmup_steps=20: must be in "
                              "[0, --train_steps=10]")]:
    with pytest.raises(UsageError) as err:
      TrainOptions(model_dir="m", train_steps=10, **kw).validate()
    assert str(err.value) == message
  with pytest.raises(ConfigError) as err:
    xt.XLNetConfig(n_layer=1, d_model=8, n_head=1, d_head=8, d_inner=8,
                   n_token=10 ** 12)
  assert str(err.value) == ("XLNetConfig: 'n_token' must be at most 16777216 "
                            "(2**24), got 1000000000000")


def test_finetune_preflight_checks(shared, tmp_path):
  sp = spiece_path(shared)
  vocab = SentencePieceTokenizer(sp).vocab_size
  path = tmp_path / "c.json"
  path.write_text(json.dumps(dict(CONFIG.to_dict(), n_token=1000)))
  small = xt.XLNetConfig.from_json(str(path))
  with pytest.raises(ConfigError) as err:
    check_vocab(small, vocab, sp)
  assert str(err.value) == (
      f"--model_config_path={path}: n_token 1000 is smaller than the "
      f"vocabulary of --spiece_model_file={sp} ({vocab} pieces)")
  blocker = tmp_path / "file"
  blocker.write_text("x")
  base = dict(config=xt.XLNetConfig(**dict(CONFIG.to_dict(), n_token=vocab)),
              spiece_model_file=sp, do_train=True, do_eval=False,
              train_batch_size=8,
              train=TrainOptions(model_dir=str(tmp_path / "m"),
                                 train_steps=10))
  check_finetune_training(types.SimpleNamespace(**base), vocab)  # fine
  for change, message in [
      (dict(train_batch_size=0), "--train_batch_size=0: must be at least 1"),
      (dict(train=TrainOptions(model_dir=str(blocker / "m"), train_steps=10)),
       f"--model_dir={blocker}/m: {blocker} is a file, not a directory"),
      (dict(train=TrainOptions(model_dir="m", train_steps=10, iterations=0)),
       "--iterations=0: must be at least 1")]:
    with pytest.raises(UserError) as err:
      check_finetune_training(types.SimpleNamespace(**dict(base, **change)),
                              vocab)
    assert str(err.value) == message
  assert sorted(os.listdir(tmp_path)) == ["c.json", "file"]


def test_run_classifier_refuses_a_config_smaller_than_the_vocabulary(
    shared, tmp_path):
  config = tmp_path / "c.json"
  config.write_text(json.dumps(dict(CONFIG.to_dict(), n_token=1000)))
  flags = rte_flags(shared, tmp_path, config)
  assert refused_line("run_classifier.py", flags + [
      "--do_train", "--max_seq_length=32", "--train_steps=2"]) == (
      f"run_classifier: --model_config_path={config}: n_token 1000 is smaller "
      f"than the vocabulary of --spiece_model_file={spiece_path(shared)} "
      "(32000 pieces)")
  assert sorted(os.listdir(tmp_path)) == ["c.json"]


# run_pretrain ------------------------------------------------------------

CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)


@pytest.fixture(scope="module")
def records(shared, tmp_path_factory):
  work = tmp_path_factory.mktemp("reliability")
  corpus = corpus_slice(shared, work, 400)
  create_pretrain_data([corpus], CFG, str(work / "data"), spiece_path(shared),
                       pass_ids=[0], seed=1)
  return str(work / "data" / "tfrecords")


def _pretrain_flags(records, model_dir, seed=1):
  return [f"--record_info_dir={records}", f"--model_dir={model_dir}",
          "--train_batch_size=4", "--seq_len=32", "--reuse_len=16",
          "--perm_size=8", "--num_predict=6", "--bi_data", "--train_steps=3",
          "--iterations=1", "--learning_rate=2e-3", "--n_layer=2",
          "--d_model=32", "--n_head=4", "--d_head=8", "--d_inner=64",
          "--mem_len=16", "--dropout=0.1", "--dropatt=0.1", f"--seed={seed}"]


def _pretrain_losses(records, model_dir, seed):
  res = subprocess.run([sys.executable, "run_pretrain.py",
                        *_pretrain_flags(records, model_dir, seed)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-2000:]
  return re.findall(r"step \d+/\d+ loss [0-9.]+", res.stderr)


@pytest.fixture(scope="module")
def trained(records, tmp_path_factory):
  """A finished 3-step run (seed 1) and its loss lines."""
  model_dir = str(tmp_path_factory.mktemp("run") / "m")
  return model_dir, _pretrain_losses(records, model_dir, 1)


def test_same_seed_same_pretraining_run(records, trained, tmp_path):
  _, lines = trained
  assert [l.split(" loss")[0] for l in lines] == [
      "step 1/3", "step 2/3", "step 3/3"]
  assert _pretrain_losses(records, str(tmp_path / "a"), 1) == lines
  other = _pretrain_losses(records, str(tmp_path / "b"), 2)
  assert other[0] != lines[0]


# Runs run_pretrain's body in one process for many flag sets (each a fresh
# parse): `[[exit code, last stderr line], ...]` as JSON on stdout.
CHECKER = """
import contextlib, io, json, sys
sys.argv = ["run_pretrain"]
import run_pretrain
from absl import flags
from data_utils.errors import run_main
out = []
for argv in json.loads(sys.stdin.read()):
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["run_pretrain"] + argv)
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main("run_pretrain",
                    lambda: run_pretrain._pretrain(flags.FLAGS))
  lines = err.getvalue().strip().splitlines()
  out.append([code, lines[-1] if lines else ""])
print(json.dumps(out))
"""


def test_run_pretrain_one_line_errors_leave_model_dir_alone(records, trained,
                                                            tmp_path):
  model_dir, _ = trained
  bare = str(tmp_path / "bare")  # the run's checkpoints, no json files
  shutil.copytree(model_dir, bare)
  os.remove(os.path.join(bare, "xlnet_config.json"))
  os.remove(os.path.join(bare, "run_options.json"))
  blocker = tmp_path / "file"
  blocker.write_text("x")
  fresh = str(tmp_path / "new")
  info = os.path.join(records, sorted(
      n for n in os.listdir(records) if n.startswith("record_info"))[0])
  again = "(use another --model_dir, or the same flags to resume)"
  cases = [
      (fresh, ["--train_batch_size=0"],
       "--train_batch_size=0: must be at least 1"),
      (fresh, ["--seq_len=0"], "--seq_len=0: must be at least 1"),
      (fresh, ["--reuse_len=-5"], "--reuse_len=-5: must be at least 1"),
      (fresh, ["--num_predict=0"], "--num_predict=0: must be at least 1"),
      (fresh, ["--mem_len=-1"], "--mem_len=-1: must be at least 0"),
      (fresh, ["--iterations=0"], "--iterations=0: must be at least 1"),
      (fresh, ["--save_steps=0"], "--save_steps=0: must be at least 1"),
      (fresh, ["--n_layer=0"], "--n_layer=0: must be at least 1"),
      (fresh, ["--d_model=-5"], "--d_model=-5: must be at least 1"),
      (fresh, ["--n_head=0"], "--n_head=0: must be at least 1"),
      (fresh, ["--n_token=1000000000000"], "--n_token=1000000000000: must "
       "be at most 16777216 (2**24; see xlnet_tf/config.py)"),
      (fresh, ["--n_token=1000"], "--n_token=1000: smaller than the "
       f"vocabulary the records were built with (32000 pieces, {info})"),
      (str(blocker / "m"), [],
       f"--model_dir={blocker}/m: {blocker} is a file, not a directory"),
      (model_dir, ["--d_model=64"], f"--d_model=64 but model_dir "
       f"{model_dir} holds a run with d_model=32 {again}"),
      (model_dir, ["--mem_len=0"], f"--mem_len=0 but model_dir {model_dir} "
       f"holds a run with mem_len=16 {again}"),
      (model_dir, ["--dropout=0.2"], f"--dropout=0.2 but model_dir "
       f"{model_dir} holds a run with dropout=0.1 {again}"),
      (bare, ["--d_model=64"], f"--d_model=64 but model_dir {bare} holds a "
       f"run with d_model=32 {again}"),
      (bare, ["--untie_r"], f"--untie_r=true but model_dir {bare} holds "
       f"a run with untie_r=false {again}"),
  ]
  argvs = [_pretrain_flags(records, d) + extra for d, extra, _ in cases]
  before = {d: tree_digest(d) for d in (model_dir, bare)}
  res = subprocess.run([sys.executable, "-c", CHECKER], cwd=ROOT,
                       input=json.dumps(argvs), capture_output=True,
                       text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  got = json.loads(res.stdout.strip().splitlines()[-1])
  assert got == [[2, f"run_pretrain: {m}"] for _, _, m in cases]
  for d, hashes in before.items():
    assert tree_digest(d) == hashes  # nothing written, nothing removed
  assert not os.path.exists(fresh)
  assert sorted(os.listdir(tmp_path)) == ["bare", "file"]
