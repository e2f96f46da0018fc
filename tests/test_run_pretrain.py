"""run_pretrain.py end to end on real records: falling loss, a run with
memory on two replicas killed and resumed exactly, the original-layout
export loading into a classifier.

The runs are early runs (see conftest): the records first, then each run
the tests check."""

import glob
import os
import re
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils.fingerprint import file_sha256
from data_utils.outputs import read_ledger
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.reader import pretrain_dataset
from xlnet_tf.tasks.language_model.original_export import (
    check_original_export)
from conftest import (corpus_slice, early_result, event_scalars,
                      killed_after_save, refused, run, shared_dir,
                      spiece_path)

CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)
MODEL_FLAGS = ["--n_layer=2", "--d_model=32", "--n_head=4", "--d_head=8",
               "--d_inner=64", "--mem_len=16", "--ff_activation=gelu",
               "--untie_r", "--dropout=0.0", "--dropatt=0.0"]
# The same model as a config file (--model_config_path) and the run flags.
CONFIG = xt.XLNetConfig(n_layer=2, d_model=32, n_head=4, d_head=8,
                        d_inner=64, n_token=32000, ff_activation="gelu",
                        untie_r=True)
RUN_FLAGS = ["--mem_len=16", "--dropout=0.0", "--dropatt=0.0"]
# Every test reads the records.
pytestmark = pytest.mark.early("pretrain_records")


def pretrain_records(work):
  """The first 800 lines of the corpus, two passes: the records folder."""
  corpus = corpus_slice(shared_dir(), work, 800)
  create_pretrain_data([corpus], CFG, str(work / "data"),
                       spiece_path(shared_dir()), pass_ids=[0, 1], seed=1)
  return str(work / "data" / "tfrecords")


@pytest.fixture(scope="module")
def records(shared):  # pylint: disable=unused-argument  (without ../shared)
  return early_result(pretrain_records)


def _cmd(records, model_dir, steps, extra=(), model=tuple(MODEL_FLAGS)):
  return [sys.executable, "run_pretrain.py", f"--record_info_dir={records}",
          f"--model_dir={model_dir}", "--train_batch_size=4", "--seq_len=32",
          "--reuse_len=16", "--perm_size=8", "--num_predict=6", "--bi_data",
          f"--train_steps={steps}", "--learning_rate=2e-3",
          "--warmup_steps=10", *model, *extra]


def _losses(text):
  return [(int(s), float(l)) for s, l in
          re.findall(r"step (\d+)/\d+ loss ([0-9.]+)", text)]


def loss_run(work):
  """150 steps of the model of a config file: the model folder and the
  result."""
  model_dir = work / "model"
  CONFIG.to_json(str(work / "config.json"))
  return model_dir, run(_cmd(
      early_result(pretrain_records), model_dir, 150,
      ["--iterations=25", f"--model_config_path={work}/config.json"],
      model=RUN_FLAGS), 600)


@pytest.mark.early("loss_run")
@pytest.mark.usefixtures("records")
def test_loss_falls_and_export_loads_into_classifier():
  model_dir, res = early_result(loss_run)
  assert res.returncode == 0, res.stderr[-2000:]
  losses = _losses(res.stderr)
  assert [s for s, _ in losses] == [25, 50, 75, 100, 125, 150]
  assert losses[-1][1] < losses[0][1] - 0.5, losses
  assert np.log(32000) - 1 > losses[0][1] - 5  # started near uniform
  export = model_dir / "original"
  config = xt.XLNetConfig.from_json(str(export / "xlnet_config.json"))
  assert config == CONFIG  # the --model_config_path file's
  clf = xt.XLNetClassifier(xt.XLNetModel(config), n_class=2, task_name="sst-2")
  report = xt.load_original_checkpoint(clf, str(export))
  assert report.missing == ["model/classification_sst-2/logit/bias",
                            "model/classification_sst-2/logit/kernel",
                            "model/sequnece_summary/summary/bias",
                            "model/sequnece_summary/summary/kernel"]
  assert report.unused == ["model/lm_loss/bias",
                           "model/transformer/mask_emb/mask_emb"]
  # The export is in its folder's ledger, so a later run may replace it.
  names = sorted(os.listdir(export))
  assert {n: e["sha256"] for n, e in read_ledger(str(export)).items()} == {
      n: file_sha256(str(export / n)) for n in names if not n.startswith(".")}
  assert len(read_ledger(str(export))) == 4  # no --spiece_model_file
  check_original_export(str(model_dir), overwrite=False)
  # the loaded encoder is the trained one, not a fresh init
  native = xt.XLNetPretrainer(xt.XLNetModel(config))
  assert xt.load_checkpoint(native, str(model_dir)) is None  # native layout
  np.testing.assert_array_equal(clf.encoder.word_embedding.numpy(),
                                native.encoder.word_embedding.numpy())


def foreign_export_run(work):
  """A run into a model_dir whose original/spiece.model is the user's."""
  model_dir = work / "theirs"
  (model_dir / "original").mkdir(parents=True)
  (model_dir / "original" / "spiece.model").write_bytes(b"my model")
  return model_dir, run(_cmd(early_result(pretrain_records), model_dir, 10,
                             [f"--spiece_model_file={spiece_path(shared_dir())}"]),
                        300)


@pytest.mark.early("foreign_export_run")
@pytest.mark.usefixtures("records")
def test_a_file_of_yours_in_the_export_folder_stops_the_run_first():
  model_dir, res = early_result(foreign_export_run)
  assert refused(res) == (
      f"run_pretrain: --model_dir={model_dir}: original/spiece.model exists "
      "and was not written by xlnet-tf (or was changed since); move it, or "
      "pass --overwrite to replace it")
  assert os.listdir(model_dir) == ["original"]  # before any training
  assert os.listdir(model_dir / "original") == ["spiece.model"]
  assert (model_dir / "original" / "spiece.model").read_bytes() == b"my model"


def test_skip_resumes_the_exact_input_position(records):
  files = sorted(glob.glob(os.path.join(records, "*.tfrecords")))
  full = pretrain_dataset(files, CFG, 4, seed=3)
  first = [b["input_ids"] for b in full.take(9).as_numpy_iterator()]
  resumed = pretrain_dataset(files, CFG, 4, seed=3, skip_batches=6)
  again = [b["input_ids"] for b in resumed.take(3).as_numpy_iterator()]
  for a, b in zip(first[6:], again):
    np.testing.assert_array_equal(a, b)


def bad_flags_run(work):
  """--seq_len=64 on records built with 32 (model flags left out)."""
  return run(_cmd(early_result(pretrain_records), work / "m",
                  10)[:-len(MODEL_FLAGS)] + ["--seq_len=64"], 300)


@pytest.mark.early("bad_flags_run")
@pytest.mark.usefixtures("records")
def test_bad_flags_are_one_line_errors():
  res = early_result(bad_flags_run)
  res_text = res.stderr.strip().splitlines()[-1]
  assert res.returncode == 2
  assert re.match(r"run_pretrain: .*record_info-train-0-0.*built with "
                  r"seq_len=32, this run asks seq_len=64", res_text), res_text
  assert "Traceback" not in res.stderr


def model_size_runs(work):
  """run_pretrain with a named config, against a model_dir that holds a
  run of CONFIG: what each run said."""
  model_dir = work / "m"
  os.makedirs(model_dir)
  CONFIG.to_json(str(model_dir / "xlnet_config.json"))
  cmd = _cmd(early_result(pretrain_records), model_dir, 10, model=())
  return {"model_dir": model_dir, "runs": [run(cmd + extra, 300) for extra in (
      ["--model_config_path=base", "--n_layer=6"],
      ["--model_config_path=base"],
      [])]}


@pytest.mark.early("model_size_runs")
@pytest.mark.usefixtures("records")
def test_model_size_by_name_and_the_tiny_default_said():
  """`base` is XLNet-Base (checked against a recorded run before any
  work); a model flag must agree with it; the original's tiny defaults are
  named in the run's first log line."""
  out = early_result(model_size_runs)
  model_dir, (disagree, base, tiny) = out["model_dir"], out["runs"]
  assert refused(disagree) == (
      "run_pretrain: --n_layer=6 disagrees with base: n_layer 12")
  assert refused(base) == (
      f"run_pretrain: base: n_layer=12 but model_dir {model_dir} holds a run "
      "with n_layer=2 (use another --model_dir, or the same flags to resume)")
  # The run's own log lines (not TensorFlow's C++ ones, timestamped first).
  lines = [line for line in tiny.stderr.strip().splitlines()
           if not re.match(r"\d{4}-\d\d-\d\d ", line)]
  assert re.search(
      r"training the original's tiny default model \(d_head 8, d_inner 32, "
      r"d_model 32, ff_activation relu, n_head 4, n_layer 6, n_token 32000, "
      r"untie_r False\); pass --model_config_path=base or large, or a config "
      r"file, for a real size$", lines[0]), lines[0]
  assert refused(tiny) == (
      f"run_pretrain: --n_layer=6 but model_dir {model_dir} holds a run "
      "with n_layer=2 (use another --model_dir, or the same flags to "
      "resume)")
  assert os.listdir(model_dir) == ["xlnet_config.json"]


def mirrored_records(work):
  """Records of the same corpus built for two cores per host."""
  records = early_result(pretrain_records)
  cfg2 = pd.PretrainDataConfig(**dict(CFG.to_dict(), num_core_per_host=2))
  corpus = os.path.join(os.path.dirname(os.path.dirname(records)),
                        "corpus.txt")
  create_pretrain_data([corpus], cfg2, str(work / "data"),
                       spiece_path(shared_dir()), seed=1)
  return str(work / "data" / "tfrecords")


# run_pretrain.py, SIGKILLed by itself right after saving a checkpoint.
_KILLED_AFTER_SAVE = killed_after_save()


def _mirrored(model_dir, kill_at=0):
  """20 steps of two replicas of batch 2 (memory, bi_data, dropout),
  a checkpoint every 10, killed right after the one of step `kill_at`."""
  cmd = _cmd(early_result(mirrored_records), model_dir, 20, [
      "--iterations=5", "--save_steps=10", "--strategy=mirrored",
      "--num_cpu_devices=2", "--dropout=0.1", "--dropatt=0.1"])
  return run([sys.executable, "-c", _KILLED_AFTER_SAVE, cmd[1], str(kill_at),
              *cmd[2:]], 600)


def mirrored_run(work):
  """The uninterrupted run."""
  return work / "m", _mirrored(work / "m")


def killed_mirrored_run(work):
  """The same run killed right after its checkpoint of step 10, then the
  same command again."""
  return work / "m", [_mirrored(work / "m", kill_at=10),
                      _mirrored(work / "m")]


def _final_weights(model_dir):
  """Every variable of the last checkpoint, the memory included (not its
  object graph, which names optimizer slots by where they were made)."""
  reader = tf.train.load_checkpoint(str(model_dir / "ckpt-20"))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


@pytest.mark.early("mirrored_records", "mirrored_run")
@pytest.mark.usefixtures("records")
def test_mirrored_over_two_logical_cpus():
  """Each replica gets its own forward/backward halves: records built for
  two cores per host, two replicas of batch 2."""
  _, res = early_result(mirrored_run)
  assert res.returncode == 0, res.stderr[-2000:]
  assert [s for s, _ in _losses(res.stderr)] == [5, 10, 15, 20]
  assert re.search(r"Using MirroredStrategy with devices \(.*device:CPU:0.*"
                   r"device:CPU:1", res.stderr)


@pytest.mark.early("mirrored_records", "mirrored_run", "killed_mirrored_run")
@pytest.mark.usefixtures("records")
def test_killed_run_with_memory_resumes_exactly():
  """Killed after a checkpoint and run again: every step's loss and every
  final weight equal the uninterrupted run's, bit for bit. The memory
  (per replica, both bi_data streams) is in the checkpoint."""
  whole_dir, whole = early_result(mirrored_run)
  model_dir, (killed, resumed) = early_result(killed_mirrored_run)
  assert whole.returncode == 0, whole.stderr[-2000:]
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert f"resumed from {model_dir}/ckpt-10 at step 10" in resumed.stderr
  assert [s for s, _ in _losses(resumed.stderr)] == [15, 20]
  expected = event_scalars(whole_dir / "train")["loss"]
  assert sorted(expected) == [5, 10, 15, 20]
  assert event_scalars(model_dir / "train")["loss"] == expected
  want, got = _final_weights(whole_dir), _final_weights(model_dir)
  assert sorted(got) == sorted(want)
  memory = [n for n in want if n.startswith("carried_state/")]
  assert len(memory) == 2  # one per layer, [replicas, batch, mem_len, d]
  assert want[memory[0]].shape == (2, 2, 16, 32)
  assert np.abs(want[memory[0]]).max() > 0
  for name, value in want.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)
