"""run_classifier end to end on real GLUE data, export round trips, the
golden classifier through the workflow's task, per-layer learning rates."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils.classification import features as cf
from data_utils.classification import reader as cd
from data_utils.classification.records import build_features
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.export.directory import EXPORT_MARKER
from xlnet_tf.tasks.classification.serving import (classifier_features,
                                                   export_classifier)
from xlnet_tf.training.optimizer import layer_lr_factor, make_optimizer
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions
from conftest import (cli_output, early_result, event_scalars, run,
                      shared_dir, spiece_path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)


def test_workflow_task_reproduces_golden_logits(golden):
  case = golden("case_finetune")
  for regression, key, out_key in ((False, "cls_logits", "logits"),
                                   (True, "reg_logits", "score")):
    task = ClassifierTask(case.config, case.options(), 3, "sts", regression)
    model = task.build_model()
    xt.load_original_checkpoint(model, case.ckpt)
    out = model({"input_ids": case["input_ids_bm"],
                 "segment_ids": case["seg_ids_bm"],
                 "input_mask": case["input_mask_bm"]})
    np.testing.assert_allclose(out[out_key], case[key], atol=1e-5, rtol=1e-5)


def test_layerwise_learning_rates_scale_each_layers_update():
  opts = TrainOptions(model_dir="/tmp/unused", train_steps=10,
                      learning_rate=1e-2)
  deltas = {}
  for rate in (1.0, 0.5):
    var0 = tf.Variable(tf.ones([3]), name="transformer/layer_0/ff/w")
    var1 = tf.Variable(tf.ones([3]), name="transformer/layer_1/ff/w")
    emb = tf.Variable(tf.ones([3]), name="transformer/word_embedding/t")
    opt = make_optimizer(TrainOptions(**dict(opts.__dict__,
                                             lr_layer_decay_rate=rate)),
                         {"transformer/layer_0/ff/w":
                          layer_lr_factor(0, 2, rate)})
    grads = [tf.constant([1.0, -2.0, 3.0])] * 3
    opt.apply_gradients(zip(grads, [var0, var1, emb]))
    deltas[rate] = [v.numpy() - 1.0 for v in (var0, var1, emb)]
  np.testing.assert_allclose(deltas[0.5][0], 0.5 * deltas[1.0][0], rtol=1e-6)
  np.testing.assert_allclose(deltas[0.5][1], deltas[1.0][1], rtol=1e-6)
  np.testing.assert_allclose(deltas[0.5][2], deltas[1.0][2], rtol=1e-6)
  assert np.abs(deltas[1.0][0]).min() > 0
  assert layer_lr_factor(0, 3, 0.5) == 0.25


def test_feature_cache_reuse_and_overwrite(shared, tmp_path):
  tok = SentencePieceTokenizer(spiece_path(shared))
  examples = cd.read_examples("rte", os.path.join(shared, "data", "glue",
                                                  "RTE"), "dev")
  labels = cd.labels_of("rte")

  def build(length, overwrite=False):
    return build_features(
        examples, lambda e: cf.example_features(e, tok.encode_ids, length,
                                                labels),
        length, False, str(tmp_path), {"task": "rte", "split": "dev"},
        pad_to_multiple=8, overwrite=overwrite)
  first = build(32)
  assert first["num_examples"] == 277 and first["num_records"] == 280
  mtime = os.path.getmtime(first["path"])
  again = build(32)
  assert again["path"] == first["path"]
  assert os.path.getmtime(first["path"]) == mtime
  assert build(48)["path"] != first["path"]
  assert build(32, overwrite=True)["path"] == first["path"]
  assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


@pytest.fixture(scope="module")
def exported(shared, tmp_path_factory):
  """A tiny random classifier over the real vocabulary, exported."""
  work = tmp_path_factory.mktemp("export")
  model = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions()), n_class=3,
                             task_name="mnli")
  model.build(None)
  path = export_classifier(model, str(work / "saved_model"), 24, False,
                           labels=["contradiction", "entailment", "neutral"],
                           sp_model_path=spiece_path(shared))
  return {"model": model, "path": path}


TEXTS_A = ["The cat sat on the mat.", "Born in 2000, he was naïve.",
           "``Quoted'' text with   spaces and a very long tail " * 3, "x"]
TEXTS_B = ["A cat is sitting.", "He was born in 2000.", "Short.", ""]


def _python_features(shared, a_texts, b_texts, length):
  tok = SentencePieceTokenizer(spiece_path(shared))
  rows = [cf.convert_example(tok.encode_ids(a),
                             tok.encode_ids(b) if b else None, length)
          for a, b in zip(a_texts, b_texts)]
  return {k: np.array([r[k] for r in rows], np.float32 if k == "input_mask"
                      else np.int32) for k in rows[0]}


def test_in_graph_features_equal_python_features(shared):
  tok = SentencePieceTokenizer(spiece_path(shared))
  from data_utils.graph_tokenizer import GraphTokenizer
  graph = GraphTokenizer(spiece_path(shared))
  for length in (8, 24, 64):
    want = _python_features(shared, TEXTS_A, TEXTS_B, length)
    got = classifier_features(graph.tokenize(tf.constant(TEXTS_A)),
                              graph.tokenize(tf.constant(TEXTS_B)), length)
    for key in want:
      np.testing.assert_array_equal(got[key].numpy(), want[key], err_msg=key)
    single = _python_features(shared, TEXTS_A, [""] * 4, length)
    got = classifier_features(graph.tokenize(tf.constant(TEXTS_A)), None,
                              length)
    for key in single:
      np.testing.assert_array_equal(got[key].numpy(), single[key])
  del tok


def test_saved_model_in_fresh_process(shared, exported, tmp_path):
  features = _python_features(shared, TEXTS_A, TEXTS_B, 24)
  expected = exported["model"](features)
  np.savez(tmp_path / "in.npz", **features)
  script = f"""
import json, numpy as np, tensorflow as tf
import tensorflow_text  # registers the TF Text ops the raw-text signatures use
m = tf.saved_model.load({exported['path']!r})
f = dict(np.load({str(tmp_path / 'in.npz')!r}))
a = m.signatures["serving_default"](**{{k: tf.constant(v) for k, v in f.items()}})
b = m.signatures["serve_text_pair"](text_a=tf.constant({TEXTS_A!r}),
                                    text_b=tf.constant({TEXTS_B!r}))
print(json.dumps({{"ids": a["logits"].numpy().tolist(),
                  "text": b["logits"].numpy().tolist(),
                  "label": [x.decode() for x in b["label"].numpy()]}}))
"""
  res = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  np.testing.assert_allclose(out["ids"], expected["logits"], atol=1e-5)
  np.testing.assert_allclose(out["text"], expected["logits"], atol=1e-5)
  labels = ["contradiction", "entailment", "neutral"]
  assert out["label"] == [labels[i] for i in
                          expected["logits"].numpy().argmax(-1)]


def test_saved_model_cli_answers_raw_text(exported):
  cli = os.path.join(os.path.dirname(sys.executable), "xlnet-saved-model-cli")
  res = subprocess.run(
      [cli, "run", "--dir", exported["path"], "--tag_set", "serve",
       "--signature_def", "serve_text",
       "--input_exprs", 'text=["a great movie", "awful"]'],
      capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  assert "probabilities" in res.stdout
  probs = re.search(r"Result for output key probabilities:\s*\[\[(.*?)\]\]",
                    res.stdout, re.S).group(1)
  rows = [list(map(float, r.replace("[", "").split()))
          for r in probs.split("]")]
  assert len(rows) == 2 and all(abs(sum(r) - 1) < 1e-5 for r in rows)


def _config_file(tmp_path):
  path = tmp_path / "xlnet_config.json"
  TINY.to_json(str(path))
  return str(path)


def _run(args, timeout=900):
  return run([sys.executable, "run_classifier.py", *args], timeout)


def rte_run(tmp_path):
  """RTE trained, evaluated, predicted, exported (an early run: see
  conftest): its folder and result."""
  shared = shared_dir()
  return tmp_path, _run([
      "--task_name=rte", f"--data_dir={shared}/data/glue/RTE",
      f"--model_config_path={_config_file(tmp_path)}",
      f"--spiece_model_file={spiece_path(shared)}",
      f"--output_dir={tmp_path}/data", f"--model_dir={tmp_path}/model",
      "--do_train", "--do_eval", "--do_predict", "--eval_all_ckpt",
      "--max_seq_length=32", "--train_batch_size=8", "--train_steps=20",
      "--save_steps=10", "--iterations=10", "--learning_rate=1e-4",
      "--eval_batch_size=64", "--predict_batch_size=64", "--export_tflite"])


@pytest.mark.early("rte_run")
def test_run_classifier_train_eval_predict_export(shared):
  tmp_path, res = early_result(rte_run)
  assert res.returncode == 0, res.stderr[-3000:]
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    results = json.load(f)
  assert [r["step"] for r in results["results"]] == [10, 20]
  assert all(r["num_examples"] == 277 for r in results["results"])
  assert results["best"]["accuracy"] == max(r["accuracy"]
                                            for r in results["results"])
  # TensorBoard: every checkpoint's metrics at its step (float32 there).
  scalars = event_scalars(tmp_path / "model" / "eval_dev")
  assert set(scalars) == {"accuracy", "main", "majority_baseline"}
  for r in results["results"]:
    for key in scalars:
      assert scalars[key][r["step"]] == pytest.approx(r[key], abs=1e-7)
  with open(tmp_path / "model" / "predictions" / "RTE.tsv") as f:
    rows = f.read().splitlines()
  assert rows[0] == "index\tprediction" and len(rows) == 3001
  assert rows[1].split("\t")[0] == "0"
  assert {r.split("\t")[1] for r in rows[1:]} <= {"entailment",
                                                 "not_entailment"}
  assert re.search(r"best checkpoint: step \d+", res.stdout)
  # The exports: version 20 (the last checkpoint) of each servable.
  exports = tmp_path / "model" / "saved_model"
  assert sorted(os.listdir(exports)) == ["features", "text", "tflite",
                                         EXPORT_MARKER]
  for servable in ("features", "text", "tflite"):
    assert os.listdir(exports / servable) == ["20"]
  _batch_entries(shared, exports)
  assert sorted(os.listdir(exports / "tflite" / "20")) == [
      "float32.tflite", "int8.tflite", EXPORT_MARKER]
  _features_export_without_tf_text(shared, exports, tmp_path)


def _batch_entries(shared, exports):
  """Both exports carry the SentencePiece model and the marker's `batch`
  entry; only the text one has the raw-text signatures."""
  with open(spiece_path(shared), "rb") as f:
    spiece = f.read()
  for servable, signatures in (
      ("features", ["serve_features", "serving_default"]),
      ("text", ["serve_features", "serve_text", "serve_text_pair",
                "serving_default"])):
    with open(exports / servable / "20" / EXPORT_MARKER) as f:
      marker = json.load(f)
    assert marker["signatures"] == signatures
    batch = marker["batch"]
    assert {k: v for k, v in batch.items() if k != "spiece_model_sha256"} == {
        "spiece_model": "assets.extra/spiece.model", "lower": False,
        "max_seq_length": 32, "signature": "serve_features",
        "labels": ["entailment", "not_entailment"], "regression": False}
    with open(exports / servable / "20" / batch["spiece_model"], "rb") as f:
      assert f.read() == spiece


# Run in a process that never imports tensorflow_text: the features export
# through plain TensorFlow, TensorFlow's own TFLite converter and
# interpreter, and the exported .tflite files.
_NO_TF_TEXT = """
import json, sys
import numpy as np, tensorflow as tf
features_dir, tflite_dir, npz = sys.argv[1:4]
f = dict(np.load(npz))
m = tf.saved_model.load(features_dir)
out = m.signatures["serving_default"](**{k: tf.constant(v)
                                         for k, v in f.items()})
def tflite(content):
  runner = tf.lite.Interpreter(model_content=content).get_signature_runner(
      "serving_default")
  return runner(**f)["logits"].tolist()
with open(tflite_dir + "/float32.tflite", "rb") as g:
  exported = tflite(g.read())
converted = tflite(tf.lite.TFLiteConverter.from_saved_model(
    features_dir, signature_keys=["serving_default"]).convert())
assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
print(json.dumps({"saved_model": out["logits"].numpy().tolist(),
                  "converted": converted, "float32": exported}))
"""


def _features_export_without_tf_text(shared, exports, tmp_path):
  features = _python_features(shared, TEXTS_A, TEXTS_B, 32)
  np.savez(tmp_path / "in.npz", **features)
  text = tf.saved_model.load(str(exports / "text" / "20"))
  expected = text.signatures["serve_text_pair"](
      text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))["logits"]
  res = subprocess.run(
      [sys.executable, "-c", _NO_TF_TEXT, str(exports / "features" / "20"),
       str(exports / "tflite" / "20"), str(tmp_path / "in.npz")],
      capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  for key in ("saved_model", "converted", "float32"):
    np.testing.assert_allclose(out[key], expected, atol=1e-5, err_msg=key)
  # TensorFlow's own saved_model_cli, as docs/serving.md prints it.
  npz = tmp_path / "in.npz"
  res = subprocess.run(
      [os.path.join(os.path.dirname(sys.executable), "saved_model_cli"),
       "run", "--dir", str(exports / "features" / "20"), "--tag_set",
       "serve", "--signature_def", "serving_default", "--inputs",
       ";".join(f"{k}={npz}[{k}]" for k in features)],
      capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  np.testing.assert_allclose(cli_output(res.stdout, "logits"), expected,
                             atol=1e-5)


def regression_run(tmp_path):
  """STS-B, a regression task (an early run: see conftest): its folder and
  result."""
  shared = shared_dir()
  return tmp_path, _run([
      "--task_name=sts-b", f"--data_dir={shared}/data/glue/STS-B",
      f"--model_config_path={_config_file(tmp_path)}",
      f"--spiece_model_file={spiece_path(shared)}",
      f"--output_dir={tmp_path}/data", f"--model_dir={tmp_path}/model",
      "--do_train", "--do_eval", "--do_predict", "--max_seq_length=32",
      "--train_batch_size=8", "--train_steps=10", "--iterations=10",
      "--eval_batch_size=100", "--predict_batch_size=100",
      # The memory/precision flags reach the model through the whole run.
      "--recompute", "--use_bfloat16"])


@pytest.mark.bfloat16_compute  # the run takes --use_bfloat16
@pytest.mark.early("regression_run")
@pytest.mark.usefixtures("shared")
def test_run_classifier_regression_predictions():
  tmp_path, res = early_result(regression_run)
  assert res.returncode == 0, res.stderr[-3000:]
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    best = json.load(f)["best"]
  assert set(best) >= {"pearson", "spearman"} and best["num_examples"] == 1500
  with open(tmp_path / "model" / "predictions" / "STS-B.tsv") as f:
    rows = f.read().splitlines()[1:]
  assert len(rows) == 1379
  assert all(re.fullmatch(r"\d+\t-?\d+\.\d{3}", r) for r in rows)


# The two refusals below are early runs (see conftest).
def bad_task_run(tmp_path):
  shared = shared_dir()
  return _run(["--task_name=nope", f"--data_dir={tmp_path}",
              f"--model_config_path={_config_file(tmp_path)}",
              f"--spiece_model_file={spiece_path(shared)}",
              f"--output_dir={tmp_path}/d", f"--model_dir={tmp_path}/m",
              "--do_train"])


@pytest.mark.early("bad_task_run")
@pytest.mark.usefixtures("shared")
def test_run_classifier_bad_input_is_one_line():
  res = early_result(bad_task_run)
  assert res.returncode == 2 and "Traceback" not in res.stderr
  assert res.stderr.strip().splitlines()[-1].startswith(
      "run_classifier: unknown task 'nope'; known: ")


def two_sixteen_bit_run(tmp_path):
  shared = shared_dir()
  return _run(["--task_name=rte", f"--data_dir={shared}/data/glue/RTE",
              f"--model_config_path={_config_file(tmp_path)}",
              f"--spiece_model_file={spiece_path(shared)}",
              f"--output_dir={tmp_path}/d", f"--model_dir={tmp_path}/m",
              "--do_train", "--use_bfloat16", "--use_float16"])


@pytest.mark.early("two_sixteen_bit_run")
@pytest.mark.usefixtures("shared")
def test_run_classifier_two_sixteen_bit_flags_is_one_line():
  res = early_result(two_sixteen_bit_run)
  assert res.returncode == 2 and "Traceback" not in res.stderr
  assert res.stderr.strip().splitlines()[-1] == (
      "run_classifier: RunOptions: 'use_bfloat16' and 'use_float16' exclude "
      "each other")
