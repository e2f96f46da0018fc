"""run_classifier.py on IMDB reviews read as 4 segments of 32 tokens with
memory: trains, evaluates and predicts on ragged last batches, reports how
many reviews were longer than a segment, and exports a SavedModel whose
raw-text signature gives the Python model's probabilities."""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the raw-text signature's ops)

import xlnet_tf as xt
from data_utils.classification import reader as cd
from xlnet_tf.training import TrainOptions
from xlnet_tf.tasks.classification.workflow import (ClassifierOptions,
                                           ClassifierWorkflow)
from xlnet_tf.training import training_checkpoints
from conftest import early_result, run, shared_dir, spiece_path

TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
S, N = 32, 4


def _imdb_slice(shared, out):
  """A copy of aclImdb with, per split and label, the reader's first 4
  reviews and the 3 smallest files (short reviews: leading empty
  segments); 14 reviews per split."""
  src = os.path.join(shared, "data", "imdb", "aclImdb")
  for split in ("train", "test"):
    for label in ("neg", "pos"):
      files = cd.text_files(os.path.join(src, split, label), "aclImdb")
      keep = files[:4] + sorted(files[4:], key=os.path.getsize)[:3]
      os.makedirs(os.path.join(out, split, label))
      for path in keep:
        shutil.copy(path, os.path.join(out, split, label))
  return str(out)


def _options(shared, tmp_path, data_dir):
  return ClassifierOptions(
      config=TINY, run=xt.RunOptions(mem_len=32),
      train=TrainOptions(model_dir=str(tmp_path / "model"), train_steps=4),
      task_name="imdb", data_dir=data_dir, output_dir=str(tmp_path / "data"),
      spiece_model_file=spiece_path(shared), max_seq_length=S,
      max_segments=N, bptt_segments=2)


def imdb_run(tmp_path):
  """run_classifier.py on the slice (an early run: see conftest): the
  folder, the slice and the result."""
  shared = shared_dir()
  data_dir = _imdb_slice(shared, tmp_path / "aclImdb")
  config = tmp_path / "xlnet_config.json"
  TINY.to_json(str(config))
  return tmp_path, data_dir, run([
      sys.executable, "run_classifier.py", "--task_name=imdb",
      f"--data_dir={data_dir}", f"--model_config_path={config}",
      f"--spiece_model_file={spiece_path(shared)}",
      f"--output_dir={tmp_path}/data", f"--model_dir={tmp_path}/model",
      f"--max_segments={N}", f"--max_seq_length={S}", "--mem_len=32",
      "--bptt_segments=2", "--do_train", "--do_eval", "--do_predict",
      "--train_batch_size=4", "--train_steps=4", "--iterations=2",
      "--learning_rate=1e-3", "--eval_batch_size=4",
      "--predict_batch_size=8"])


@pytest.mark.early("imdb_run")
def test_imdb_in_segments_trains_evaluates_predicts_exports(shared,
                                                           sp_tokenizer):
  tmp_path, data_dir, res = early_result(imdb_run)
  assert res.returncode == 0, res.stderr[-3000:]

  # The counts, from the reviews' piece counts.
  examples = cd.read_examples("imdb", data_dir, "test")
  lengths = [len(sp_tokenizer.encode_ids(e.text_a)) for e in examples]
  docs = {"longer_than_segment": sum(n > S - 2 for n in lengths),
          "truncated": sum(n > N * S - 2 for n in lengths)}
  assert 0 < docs["truncated"] < docs["longer_than_segment"] < 14
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    results = json.load(f)
  assert results["documents"] == dict(docs, segment_length=S, max_segments=N,
                                      keep_end=False)
  best = results["best"]
  assert best["step"] == 4 and best["num_examples"] == 14
  assert re.search(
      rf"predict: 14 examples, {docs['longer_than_segment']} longer than one "
      rf"segment of {S} tokens, {docs['truncated']} truncated to {N} "
      r"segment\(s\)", res.stderr)

  # Predictions (test = dev for IMDB): one per review, same accuracy.
  with open(tmp_path / "model" / "predictions" / "imdb.tsv") as f:
    rows = [r.split("\t") for r in f.read().splitlines()]
  assert rows[0] == ["index", "prediction"]
  assert [r[0] for r in rows[1:]] == [e.guid for e in examples]
  predicted = [r[1] for r in rows[1:]]
  assert best["accuracy"] == np.mean(
      [p == e.label for p, e in zip(predicted, examples)])

  # Ragged last batches (14 reviews, batches of 4 records): the padding
  # records change no real review's outputs; each alone gives the same.
  wf = ClassifierWorkflow(_options(shared, tmp_path, data_dir))
  info = wf.features("test", pad_to=4)
  assert info["num_records"] == 16 and info["stats"] == docs
  model = wf.load_model(training_checkpoints(str(tmp_path / "model"))[-1])
  keys = ("input_ids", "segment_ids", "input_mask")
  batched = np.concatenate([
      model({k: batch[k] for k in keys})["probabilities"].numpy()
      for batch in wf.dataset(info, 4)])[:14]
  for k, example in enumerate(examples):
    feats = wf.featurize(example)
    alone = model({key: tf.constant([feats[key]]) for key in keys})
    np.testing.assert_allclose(alone["probabilities"][0], batched[k],
                               atol=1e-5, rtol=1e-5)
  assert [wf.labels[k] for k in batched.argmax(-1)] == predicted

  # The export reads whole reviews as the records do.
  # (Version 4: the last step; raw text is the text export's.)
  served = tf.saved_model.load(
      str(tmp_path / "model" / "saved_model" / "text" / "4"))
  out = served.signatures["serve_text"](
      text=tf.constant([e.text_a for e in examples]))
  np.testing.assert_allclose(out["probabilities"].numpy(), batched,
                             atol=1e-5, rtol=1e-5)
  assert [x.decode() for x in out["label"].numpy()] == predicted
