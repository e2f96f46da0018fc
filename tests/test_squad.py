"""SQuAD, the model side: golden QA-head outputs through the task and the
SavedModel, the workflow's preprocessing and v2.0 answers, and a tiny
end-to-end run of run_squad.py. The data side (reader, alignment, features,
records, postprocessing, official metrics) is in tests/test_squad_*.py."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils.squad.records import read_feature_meta
from xlnet_tf.tasks.squad.model import SquadTask
from xlnet_tf.tasks.squad.serving import export_squad
from xlnet_tf.training import TrainOptions
from xlnet_tf.tasks.squad.workflow import SquadOptions, SquadWorkflow
from conftest import assert_close, early_result, run, shared_dir, spiece_path
from squad_cases import squad_json as _squad, write_json as _write


@pytest.fixture(scope="module")
def dev_path(shared):
  return os.path.join(shared, "data", "squad", "dev-v1.1.json")


# Golden ---------------------------------------------------------------------
def _golden_features(case):
  return {"input_ids": case["input_ids_bm"], "segment_ids": case["seg_ids_bm"],
          "input_mask": case["input_mask_bm"], "p_mask": case["p_mask"],
          "cls_index": case["cls_index"]}


def test_golden_through_the_task_and_saved_model(golden, tmp_path):
  case = golden("case_squad")
  task = SquadTask(case.config, case.options(), start_n_top=3, end_n_top=3)
  model = task.build_model()
  xt.load_original_checkpoint(model, case.ckpt, strict=True)
  out = model(_golden_features(case))
  keys = ("start_top_log_probs", "end_top_log_probs", "cls_logits")
  for key in keys:
    assert_close(out[key], case[key], name=key)
  for key in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(out[key], case[key])
  # The training loss: the original's on the golden training path.
  train_model = SquadTask(case.config, case.options(dropout=0.0, dropatt=0.0),
                          3, 3).build_model()
  xt.load_original_checkpoint(train_model, case.ckpt, strict=True)
  end = case["train_end_log_probs"].argmax(axis=1).astype(np.int32)
  impossible = np.array([0, 1, 0, 1], np.float32)
  features = dict(_golden_features(case),
                  start_positions=case["start_positions"],
                  end_positions=end, is_impossible=impossible)
  loss, state = task.compute_loss(train_model, features, None, True)
  rows = np.arange(4)
  logits = case["train_cls_logits"].astype(np.float64)
  bce = np.maximum(logits, 0) - logits * impossible + np.log1p(
      np.exp(-np.abs(logits)))
  want = 0.5 * (-case["train_start_log_probs"][rows,
                                               case["start_positions"]].mean()
                - case["train_end_log_probs"][rows, end].mean()) + \
      0.5 * bce.mean()
  assert state is None
  assert_close(loss, want)
  # The SavedModel signature answers the same.
  path = export_squad(model, str(tmp_path / "sm"), 16, 3, 3)
  served = tf.saved_model.load(path).signatures["serving_default"](
      **{k: tf.constant(v) for k, v in _golden_features(case).items()})
  for key in keys:
    assert_close(served[key], case[key], name=key)
  np.testing.assert_array_equal(served["end_top_index"], case["end_top_index"])
  with pytest.raises(ValueError, match="beam is 3 x 3"):
    export_squad(model, str(tmp_path / "sm2"), 16, 5, 5)


# End to end -----------------------------------------------------------------
def _tiny_files(dev_path, tmp_path):
  with open(dev_path) as f:
    raw = json.load(f)
  paragraphs = raw["data"][0]["paragraphs"]
  train = json.loads(json.dumps(paragraphs[:5]))
  for p in train:
    for qa in p["qas"]:
      qa["answers"] = qa["answers"][:1]
      qa["is_impossible"] = False
  # Two v2.0-style unanswerable questions.
  train[0]["qas"].append({"id": "x1", "question": "Who won Super Bowl 70?",
                          "answers": [], "is_impossible": True})
  train[1]["qas"].append({"id": "x2", "question": "What is on the moon?",
                          "answers": [], "is_impossible": True})
  predict = paragraphs[5:8]
  return (_write(tmp_path / "train.json", _squad(train)),
          _write(tmp_path / "predict.json", _squad(predict, "1.1")),
          {qa["id"] for p in predict for qa in p["qas"]})


def test_workflow_prepro_and_v2_answers(shared, dev_path, tmp_path):
  """--do_prepro through the workflow (process pool), then v2.0 answers,
  metrics and prediction files from gold-position outputs (no model)."""
  train, _, _ = _tiny_files(dev_path, tmp_path)
  with open(dev_path) as f:
    paragraphs = json.load(f)["data"][1]["paragraphs"][:3]
  impossible = set()
  for p in paragraphs:
    for k, qa in enumerate(p["qas"]):
      qa["is_impossible"] = k % 3 == 0
      if qa["is_impossible"]:
        qa["answers"] = []
        impossible.add(qa["id"])
  predict = _write(tmp_path / "dev-v2.json", _squad(paragraphs))
  opts = SquadOptions(
      config=xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                            d_inner=32, n_token=32000),
      run=xt.RunOptions(), train=TrainOptions(model_dir=str(tmp_path / "m"),
                                              train_steps=1),
      task_name="squad", data_dir="", output_dir=str(tmp_path / "proc"),
      spiece_model_file=spiece_path(shared), train_file=train,
      predict_file=predict, max_seq_length=96, doc_stride=32,
      max_query_length=16, num_proc=2, predict_dir=str(tmp_path / "pred"))
  workflow = SquadWorkflow(opts)
  built = workflow.prepro()
  assert built["train"]["stats"]["examples"] == len(
      built["train"]["data"].examples)
  train_meta = read_feature_meta(built["train"]["path"])
  assert sum(m.is_impossible for m in train_meta) >= 2
  info = built["predict"]
  assert info["data"].version == "2.0"
  meta = read_feature_meta(info["path"])
  qid = [info["data"].examples[m.example_index].qas_id for m in meta]
  out = {"unique_ids": np.array([m.unique_id for m in meta]),
         "start_top_log_probs": np.zeros([len(meta), 1]),
         "start_top_index": np.array([[m.start_position] for m in meta]),
         "end_top_log_probs": np.zeros([len(meta), 1]),
         "end_top_index": np.array([[m.end_position] for m in meta]),
         "cls_logits": np.array([5.0 if q in impossible else -5.0
                                 for q in qid])}
  predictions, nbest, null_odds = workflow.answers(out, info)
  metrics = workflow.metrics(predictions, null_odds, info["data"])
  assert metrics["NoAns_total"] == len(impossible)
  assert metrics["best_f1"] >= 99.0 and metrics["best_f1_thresh"] == -5.0
  assert metrics["main"] == metrics["best_f1"] > metrics["f1"] - 1e-9
  workflow.write_answers(predictions, nbest, null_odds, metrics, "2.0")
  with open(tmp_path / "pred" /
            "dev-v2.json.predictions_best_thresh.json") as f:
    thresholded = json.load(f)
  assert {q for q, t in thresholded.items() if not t} == impossible
  # Each file keeps the input's whole name (and the ledger records them).
  assert sorted(os.listdir(tmp_path / "pred")) == sorted(
      [".xlnet_tf_outputs.json"] + [f"dev-v2.json.{name}.json" for name in (
          "predictions", "nbest_predictions", "null_odds",
          "predictions_best_thresh", "results")])


def squad_run(tmp_path):
  """run_squad.py trains, evaluates and predicts (an early run: see
  conftest): its folder, files, question ids, flags and result."""
  shared = shared_dir()
  dev_path = os.path.join(shared, "data", "squad", "dev-v1.1.json")
  train, predict, qids = _tiny_files(dev_path, tmp_path)
  config = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=32000)
  config.to_json(str(tmp_path / "xlnet_config.json"))
  common = [sys.executable, "run_squad.py",
            f"--model_config_path={tmp_path}/xlnet_config.json",
            f"--spiece_model_file={spiece_path(shared)}",
            f"--output_dir={tmp_path}/proc", f"--model_dir={tmp_path}/model",
            f"--train_file={train}", "--max_seq_length=128",
            "--doc_stride=64", "--max_query_length=32"]
  return tmp_path, predict, qids, common, run(common + [
      f"--predict_file={predict}", "--do_train", "--do_eval", "--do_predict",
      "--train_steps=4", "--train_batch_size=4", "--iterations=2",
      "--eval_batch_size=16", "--predict_batch_size=16", "--num_proc=2"],
      600)


@pytest.mark.early("squad_run")
@pytest.mark.usefixtures("shared")
def test_run_squad_end_to_end():
  tmp_path, predict, qids, common, res = early_result(squad_run)
  assert res.returncode == 0, res.stderr[-3000:]
  out = tmp_path / "model" / "predictions"
  name = os.path.basename(predict)
  with open(out / f"{name}.predictions.json") as f:
    predictions = json.load(f)
  with open(out / f"{name}.nbest_predictions.json") as f:
    nbest = json.load(f)
  with open(out / f"{name}.null_odds.json") as f:
    null_odds = json.load(f)
  assert set(predictions) == set(nbest) == set(null_odds) == qids
  assert all(1 <= len(v) <= 5 for v in nbest.values())
  assert all(predictions[q] == nbest[q][0]["text"] for q in qids)
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    best = json.load(f)["best"]
  assert best["num_examples"] == len(qids) and best["main"] == best["best_f1"]
  assert 0 <= best["exact_match"] <= best["f1"] <= 100
  # SQuAD has no raw-text signatures: the features export alone.
  assert sorted(os.listdir(tmp_path / "model" / "saved_model")) == [
      "features", "xlnet_tf_export.json"]
  assert os.path.exists(tmp_path / "model" / "saved_model" / "features" /
                        "4" / "saved_model.pb")
  records = [n for n in os.listdir(tmp_path / "proc")
             if n.endswith(".tf_record")]
  assert len(records) == 2
  # A user mistake: one line on stderr, exit 2.
  res = run(common + [f"--predict_file={tmp_path}/nope.json", "--do_predict"],
            600)
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_squad: --predict_file={tmp_path}/nope.json: no such file (needed "
      "by --do_predict)")
