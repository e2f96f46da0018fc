"""Entry-point reliability: option and config bounds, the fine-tuning
preflight, one seed gives one pretraining run, and bad flags or a resume
with other model flags are one-line errors that leave model_dir as it was."""

import json
import os
import re
import shutil
import subprocess
import sys
import types

import pytest

import xlnet_tf as xt
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.errors import UsageError, UserError
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.config import ConfigError, check_vocab
from xlnet_tf.training import TrainOptions
from xlnet_tf.finetuning.driver import check_finetune_training
from conftest import (corpus_slice, early_result, refused, rte_flags, run,
                      shared_dir, spiece_path, start, tree_digest)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)


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


def small_config_run(tmp_path):
  """(An early run: see conftest.)"""
  config = tmp_path / "c.json"
  config.write_text(json.dumps(dict(CONFIG.to_dict(), n_token=1000)))
  flags = rte_flags(shared_dir(), tmp_path, config)
  return tmp_path, config, run([
      sys.executable, "run_classifier.py", *flags, "--do_train",
      "--max_seq_length=32", "--train_steps=2"], 600)


@pytest.mark.early("small_config_run")
def test_run_classifier_refuses_a_config_smaller_than_the_vocabulary(shared):
  tmp_path, config, res = early_result(small_config_run)
  assert refused(res) == (
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


def _pretrain_losses(started):
  """The loss lines of a run begun with `start`, once it ended well."""
  res = started.result()
  assert res.returncode == 0, res.stderr[-2000:]
  return re.findall(r"step \d+/\d+ loss [0-9.]+", res.stderr)


@pytest.fixture(scope="module", autouse=True)
def runs(records, tmp_path_factory):
  """Three 3-step runs side by side (CI has 2 cores), begun with the
  module's first test: seed 1 (`trained`), seed 1 again and seed 2;
  name -> (model_dir, the started run)."""
  work = tmp_path_factory.mktemp("run")
  return {name: (str(work / name), start(
      [sys.executable, "run_pretrain.py",
       *_pretrain_flags(records, str(work / name), seed)], 600))
          for name, seed in (("m", 1), ("a", 1), ("b", 2))}


@pytest.fixture(scope="module")
def trained(runs):
  """A finished 3-step run (seed 1) and its loss lines."""
  model_dir, started = runs["m"]
  return model_dir, _pretrain_losses(started)


def test_same_seed_same_pretraining_run(runs, trained):
  _, lines = trained
  assert [l.split(" loss")[0] for l in lines] == [
      "step 1/3", "step 2/3", "step 3/3"]
  assert _pretrain_losses(runs["a"][1]) == lines
  other = _pretrain_losses(runs["b"][1])
  assert other[0] != lines[0]


# Runs run_pretrain's body in one process for many flag sets (each a fresh
# parse): `[[exit code, last stderr line], ...]` as JSON on stdout.
CHECKER = """
import contextlib, io, json, sys
sys.argv = ["run_pretrain"]
import run_pretrain
from absl import flags
from data_utils.errors import run_main
run_pretrain.define_flags()
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
