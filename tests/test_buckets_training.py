"""Training and fine-tuning with their paths in a bucket (issue 36), against
real servers (tests/object_stores.py): run_classifier.py with data_dir,
output_dir, model_dir, init_checkpoint, the SentencePiece model and the
export on gs://, and run_pretrain.py reading records from gs:// into a gs://
model_dir (killed and resumed there), each compared with the same run on
local paths: the same bytes, the same checkpoint values. And the one line of
a bad path, with no folder named `gs:` left behind.

Anything touching a bucket runs in a subprocess with the fixture's env
(gcsfs and TF read their settings when they start)."""

import hashlib
import json
import os
import re
import signal
import sys
import uuid

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import ROOT, corpus_slice, refused, run, shared_dir, spiece_path
from conftest import killed_after_save, start
from data_utils.outputs import LEDGER_ENTRIES, read_ledger
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from object_stores import make_gcs_bucket, make_s3_bucket

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=32000)

# Copies every file below argv[1] to below argv[2] (either may be a URL);
# the folder objects TF makes in a bucket ("<key>/", empty) are no files.
_COPY = """
import sys
from data_utils import paths
source, target = sys.argv[1:3]
for rel in paths.walk_files(source):
  if not rel or rel.endswith("/"):
    continue
  to = paths.join(target, *rel.split("/"))
  paths.makedirs(paths.dirname(to))
  paths.copy(paths.join(source, *rel.split("/")), to)
"""

# An entry script SIGKILLed by itself right after saving a checkpoint.
_KILLED_AFTER_SAVE = killed_after_save()


def _bucket(store):
  name = f"train-{uuid.uuid4().hex[:12]}"
  make_gcs_bucket(store, name)
  return f"gs://{name}"


def _copy(source, target, env):
  res = run([sys.executable, "-c", _COPY, source, target], 300, env)
  assert res.returncode == 0, res.stderr[-3000:]


def _sha(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _variables(prefix):
  """Every tensor of a checkpoint but its object graph (which names
  optimizer slots by where they were made)."""
  reader = tf.train.load_checkpoint(str(prefix))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _assert_same_values(got, want):
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def _files(root):
  return sorted(os.path.relpath(os.path.join(top, n), root)
                for top, _, names in os.walk(root) for n in names)


# run_classifier.py -----------------------------------------------------------

def _glue_like_data(folder):
  """A tiny task of our own (task_name=generic): labels a/b."""
  os.makedirs(folder)
  words = ["good", "bad", "fine", "awful", "great", "poor", "nice", "grim"]
  for split, n in (("train", 24), ("dev", 10), ("test", 10)):
    with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
      f.write("text\tlabel\n")
      for i in range(n):
        w = words[(i * 3 + len(split)) % len(words)]
        f.write(f"the film was {w} and {words[i % 8]} {i}\t"
                f"{'a' if words.index(w) % 2 else 'b'}\n")


def _classifier_flags(data, init, out, predict_dir):
  """A released-layout folder given once: its config and SentencePiece
  model are read from it, in the bucket too."""
  return [sys.executable, os.path.join(ROOT, "run_classifier.py"),
          "--task_name=generic",
          "--label_list=a,b", f"--data_dir={data}",
          f"--init_checkpoint={init}",
          f"--output_dir={out}/data", f"--model_dir={out}/model",
          f"--export_dir={out}/export", f"--predict_dir={predict_dir}",
          "--do_train", "--do_eval",
          "--do_predict", "--max_seq_length=16", "--train_batch_size=4",
          "--train_steps=4", "--save_steps=2", "--iterations=2",
          "--eval_batch_size=8", "--predict_batch_size=8", "--seed=3",
          "--learning_rate=1e-2", "--eval_all_ckpt"]


@pytest.mark.long("a fine-tuning run in buckets and the same run on disk")
def test_run_classifier_with_its_paths_in_buckets(gcs_server, gcs_tf_proxy,
                                              s3_server, tmp_path):
  """Every path in gs://, and the predictions (which TF does not touch) in
  s3://."""
  env, bucket = {**gcs_tf_proxy.env, **s3_server.env}, _bucket(gcs_server)
  s3 = f"s3://{bucket[5:]}"
  make_s3_bucket(s3_server, bucket[5:])
  local = tmp_path / "local"
  _glue_like_data(local / "task")
  xt.save_original_checkpoint(xt.XLNetModel(CONFIG, xt.RunOptions()),
                              str(local / "init" / "xlnet_model.ckpt"))
  CONFIG.to_json(str(local / "init" / "xlnet_config.json"))
  os.link(spiece_path(shared_dir()), local / "init" / "spiece.model")
  _copy(str(local), bucket, env)
  cwd = tmp_path / "cwd"
  os.makedirs(cwd)
  runs = [start(_classifier_flags(
      f"{root}/task", f"{root}/init", root, predict_dir),
      900, env, cwd) for root, predict_dir in (
          (str(local), local / "predictions"), (bucket, f"{s3}/predictions"))]
  for res in (r.result() for r in runs):
    assert res.returncode == 0, res.stderr[-3000:]
  assert os.listdir(cwd) == []  # no folder named gs: (nor anything else)
  back = tmp_path / "back"
  _copy(bucket, str(back), env)
  _copy(f"{s3}/predictions", str(back / "predictions"), env)

  _check_classifier_outputs(local, back, bucket)


def _check_classifier_outputs(local, back, bucket):
  """The run in `bucket` (copied back to `back`) made what the run in
  `local` made."""
  # The same predictions, byte for byte; the same evaluation once the
  # checkpoint paths it names are the same.
  assert _sha(back / "predictions/generic.tsv") == _sha(
      local / "predictions/generic.tsv")
  with open(back / "predictions/.xlnet_tf_outputs.d/generic.tsv.json") as f:
    assert json.load(f)["sha256"] == _sha(back / "predictions/generic.tsv")
  results = {}
  for root, name in ((local, str(local)), (back, bucket)):
    with open(root / "model/eval_results_dev.json") as f:
      results[name] = f.read().replace(f"{name}/model/", "MODEL_DIR/")
  assert results[bucket] == results[str(local)]
  assert [r["checkpoint"] for r in json.loads(results[bucket])["results"]] \
      == ["MODEL_DIR/ckpt-2", "MODEL_DIR/ckpt-4"]
  # The output ledger in a bucket: one object per file, its sha256.
  with open(back / "model/.xlnet_tf_outputs.d/eval_results_dev.json.json") as f:
    entry = json.load(f)
  assert entry["sha256"] == _sha(back / "model/eval_results_dev.json")

  # Training from a gs:// init checkpoint into a gs:// model_dir: the same
  # values in every checkpoint (weights, optimizer slots, step).
  for step in (2, 4):
    _assert_same_values(_variables(back / f"model/ckpt-{step}"),
                        _variables(local / f"model/ckpt-{step}"))
  # The cached feature records, in the bucket and locally: the same bytes.
  records = sorted(n for n in os.listdir(local / "data")
                   if n.endswith(".tf_record"))
  assert len(records) == 3 and sorted(
      n for n in os.listdir(back / "data") if n.endswith(".tf_record")) \
      == records
  for name in records:
    assert _sha(back / "data" / name) == _sha(local / "data" / name)

  # The export: the same files, markers (uploaded last) and weights; no
  # upload-in-progress object left.
  assert _files(back / "export") == _files(local / "export")
  assert "features/4/xlnet_tf_export.json" in _files(back / "export")
  for marker in ("xlnet_tf_export.json", "features/4/xlnet_tf_export.json",
                 "text/4/xlnet_tf_export.json"):
    assert _sha(back / "export" / marker) == _sha(local / "export" / marker)
  for servable in ("features", "text"):
    _assert_same_values(
        _variables(back / f"export/{servable}/4/variables/variables"),
        _variables(local / f"export/{servable}/4/variables/variables"))


# run_pretrain.py -------------------------------------------------------------

PRETRAIN_CFG = pd.PretrainDataConfig(
    seq_len=32, reuse_len=16, bsz_per_host=4, num_core_per_host=1,
    bi_data=True, num_predict=6, perm_size=8)


def _pretrain_flags(records, model_dir):
  return [f"--record_info_dir={records}", f"--model_dir={model_dir}",
          "--train_batch_size=4", "--seq_len=32", "--reuse_len=16",
          "--perm_size=8", "--num_predict=6", "--bi_data", "--train_steps=6",
          "--save_steps=3", "--iterations=3", "--learning_rate=2e-3",
          "--warmup_steps=2", "--n_layer=2", "--d_model=32", "--n_head=4",
          "--d_head=8", "--d_inner=64", "--dropout=0.1", "--dropatt=0.1",
          "--seed=2"]  # mem_len 0: a resumed run starts with no memory


def _losses(text):
  """(step, loss) of the log lines, and the final loss in full."""
  return re.findall(r"step (\d+)/\d+ loss ([0-9.]+)|final loss (\S+);",
                    text)


@pytest.mark.long("a pretraining run on disk, one killed and resumed in a "
                  "bucket")
def test_run_pretrain_from_gs_records_into_gs_model_dir(gcs_server,
                                                        gcs_tf_proxy,
                                                        tmp_path):
  env, bucket = gcs_tf_proxy.env, _bucket(gcs_server)
  corpus = corpus_slice(shared_dir(), tmp_path, 300)
  create_pretrain_data([corpus], PRETRAIN_CFG, str(tmp_path / "data"),
                       spiece_path(shared_dir()), pass_ids=[0], seed=1)
  records = str(tmp_path / "data" / "tfrecords")
  _copy(records, f"{bucket}/records", env)
  script = os.path.join(ROOT, "run_pretrain.py")
  cwd = tmp_path / "cwd"
  os.makedirs(cwd)
  gs_flags = _pretrain_flags(f"{bucket}/records", f"{bucket}/model")
  local, killed = (start(cmd, 600, env, cwd) for cmd in (
      [sys.executable, script, *_pretrain_flags(records, tmp_path / "model")],
      [sys.executable, "-c", _KILLED_AFTER_SAVE, script, "3", *gs_flags]))
  local, killed = local.result(), killed.result()
  assert local.returncode == 0, local.stderr[-3000:]
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  resumed = run([sys.executable, script, *gs_flags], 600, env, cwd)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from {bucket}/model/ckpt-3 at step 3" in resumed.stderr
  assert os.listdir(cwd) == []

  # The same losses, killed and resumed in the bucket as in one local run.
  assert _losses(local.stderr) == _losses(killed.stderr) + _losses(
      resumed.stderr)
  assert [s for s, _, _ in _losses(local.stderr)] == ["3", "6", ""]
  back = tmp_path / "back"
  _copy(f"{bucket}/model", str(back), env)
  _check_pretrain_outputs(tmp_path / "model", back)


def _check_pretrain_outputs(local_dir, back):
  """The model_dir of the run in a bucket (copied back to `back`) holds
  what the local run's holds."""
  _assert_same_values(_variables(back / "ckpt-6"),
                      _variables(local_dir / "ckpt-6"))
  # The run's files and the original-layout weights, written last.
  for name in ("xlnet_config.json", "run_options.json",
               "original/xlnet_config.json", "original/checkpoint"):
    assert _sha(back / name) == _sha(local_dir / name), name
  _assert_same_values(_variables(back / "original/xlnet_model.ckpt"),
                      _variables(local_dir / "original/xlnet_model.ckpt"))
  # Both exports are in their folder's ledger (in a bucket, one object per
  # file, here copied back), so a later run may replace them.
  names = ("checkpoint", "xlnet_config.json",
           "xlnet_model.ckpt.data-00000-of-00001", "xlnet_model.ckpt.index")
  local = read_ledger(str(local_dir / "original"))
  assert {n: e["sha256"] for n, e in local.items()} == {
      n: _sha(local_dir / "original" / n) for n in names}
  bucket = [json.loads(p.read_text())
            for p in (back / "original" / LEDGER_ENTRIES).iterdir()]
  assert {e["name"]: e["sha256"] for e in bucket} == {
      n: _sha(back / "original" / n) for n in names}


# Bad paths: one line, exit 2, before any work ------------------------------

def test_bad_bucket_paths_are_one_line(gcs_server, gcs_tf_proxy, tmp_path):
  env = gcs_tf_proxy.env
  shared = shared_dir()
  config = tmp_path / "xlnet_config.json"
  CONFIG.to_json(str(config))
  missing = f"no-such-{uuid.uuid4().hex[:12]}"
  classifier = [os.path.join(ROOT, "run_classifier.py"), "--task_name=sst-2",
                f"--data_dir={shared}/data/glue/SST-2",
                f"--model_config_path={config}",
                f"--spiece_model_file={spiece_path(shared)}",
                f"--output_dir={tmp_path}/data", "--do_train"]
  pretrain = [os.path.join(ROOT, "run_pretrain.py"),
              f"--record_info_dir={tmp_path}/records", "--seq_len=32",
              "--reuse_len=16", "--num_predict=6"]
  s3_line = ("--model_dir=s3://b/m: TensorFlow 2.20 has no s3:// filesystem "
             "(it reads and writes this path itself); use gs:// or a local "
             "path")
  gone_line = (f"--model_dir=gs://{missing}/m: bucket {missing} does not "
               "exist (or these credentials cannot see it)")
  cwd = tmp_path / "cwd"
  os.makedirs(cwd)
  runs = [start([sys.executable, *cmd, f"--model_dir={model_dir}"], 300, env,
                cwd)
          for cmd in (classifier, pretrain)
          for model_dir in ("s3://b/m", f"gs://{missing}/m")]
  lines = [refused(r.result()) for r in runs]
  assert lines == [f"{program}: {line}"
                   for program in ("run_classifier", "run_pretrain")
                   for line in (s3_line, gone_line)]
  assert os.listdir(cwd) == []
