"""RACE: reader counts on the real dev set, features, the original's context
aliasing behind its flag, golden logits, errors, an end-to-end run."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

import xlnet_tf as xt
from data_utils.classification.reader import TaskDataError
from data_utils.race import reader as race_data
from data_utils.race.features import race_features
from data_utils.tokenization import CLS_ID, SEP_ID, SentencePieceTokenizer
from xlnet_tf.tasks import MultipleChoiceTask
from conftest import early_result, run, shared_dir, spiece_path


@pytest.fixture(scope="module")
def race_dir(shared):
  return os.path.join(shared, "data", "race", "RACE")


@pytest.fixture(scope="module")
def tok(shared):
  return SentencePieceTokenizer(spiece_path(shared))


def test_dev_counts(race_dir):
  middle = race_data.read_race(race_dir, "dev", middle_only=True)
  high = race_data.read_race(race_dir, "dev", high_only=True)
  assert len(middle) == 1436 and len(high) == 3451
  assert len({e.guid.rsplit("-", 1)[0] for e in middle}) == 368
  assert len({e.guid.rsplit("-", 1)[0] for e in high}) == 1021
  both = race_data.read_race(race_dir, "dev")
  assert len(both) == 4887 and both[0].level == "middle"
  assert all(len(e.qa_list) == 4 and 0 <= e.label < 4 for e in both)


def _original_rows(context, qas, length, qa_length):
  """The original run_race.py loop, transcribed with its list aliasing."""
  rows = []
  for qa in qas:
    tokens_qa = qa[-qa_length:]
    if len(context) + len(tokens_qa) > length - 3:
      tokens = context[:length - 3 - len(tokens_qa)]
    else:
      tokens = context
    segs = [0] * len(tokens) + [0]
    tokens.append(SEP_ID)
    tokens.extend(tokens_qa)
    segs += [1] * len(tokens_qa) + [1, 2]
    tokens.extend([SEP_ID, CLS_ID])
    pad = length - len(tokens)
    rows.append(([0] * pad + tokens, [4] * pad + segs))
  return rows


def test_features_on_real_passages(race_dir, tok):
  examples = race_data.read_race(race_dir, "dev")
  checked = {"cut": 0, "whole": 0}
  for example in examples[:150]:
    for length, qa_len in ((64, 16), (512, 128)):
      f = race_features(example, tok.encode_ids, length, qa_len)
      ids = np.array(f["input_ids"]).reshape(4, length)
      segs = np.array(f["segment_ids"]).reshape(4, length)
      mask = np.array(f["input_mask"]).reshape(4, length)
      context = tok.encode_ids(example.context)
      for row, qa in enumerate(example.qa_list):
        want = _original_rows(list(context), [tok.encode_ids(qa)], length,
                              qa_len)[0]
        np.testing.assert_array_equal(ids[row], want[0])
        np.testing.assert_array_equal(segs[row], want[1])
        pad = want[1].count(4)
        np.testing.assert_array_equal(mask[row], [1.0] * pad +
                                      [0.0] * (length - pad))
        assert ids[row, -1] == CLS_ID
        checked["cut" if len(context) + min(len(tok.encode_ids(qa)),
                                            qa_len) > length - 3
                else "whole"] += 1
  assert checked["cut"] > 100 and checked["whole"] > 100


def test_cloze_and_plain_questions_on_real_files(race_dir):
  examples = {e.guid: e for e in race_data.read_race(race_dir, "dev")}
  folder = os.path.join(race_dir, "dev", "high")
  kinds = set()
  for name in sorted(os.listdir(folder))[:40]:
    with open(os.path.join(folder, name)) as f:
      data = json.load(f)
    for i, question in enumerate(data["questions"]):
      example = examples[f"{name[:-4]}-{i}"]
      assert example.label == "ABCD".index(data["answers"][i])
      for option, qa in zip(data["options"][i], example.qa_list):
        if "_" in question:
          assert qa == question.replace("_", option)
        else:
          assert qa == question + " " + option
      kinds.add("_" in question)
  assert kinds == {True, False}


def test_qa_text_cloze_and_question():
  assert race_data.qa_text("The _ is red.", "apple") == "The apple is red."
  assert race_data.qa_text("What is red?", "An apple.") == \
      "What is red? An apple."


def test_original_aliasing_flag(race_dir, tok):
  short = next(e for e in race_data.read_race(race_dir, "dev")
               if len(tok.encode_ids(e.context)) < 200)
  context = tok.encode_ids(short.context)
  qas = [tok.encode_ids(q) for q in short.qa_list]
  aliased = _original_rows(list(context), qas, 512, 128)
  f = race_features(short, tok.encode_ids, 512, 128,
                    original_context_aliasing=True)
  ids = np.array(f["input_ids"]).reshape(4, 512)
  for row in range(4):
    np.testing.assert_array_equal(ids[row], aliased[row][0])
  # the bug: option 2's row also holds option 1's tokens, the fix does not
  fixed = np.array(race_features(
      short, tok.encode_ids, 512, 128)["input_ids"]).reshape(4, 512)
  assert (ids[1] != 0).sum() == (fixed[1] != 0).sum() + len(qas[0]) + 3
  assert (fixed[1] != 0).sum() == len(context) + len(qas[1]) + 3


def test_golden_race_through_the_task(golden):
  case = golden("case_race")
  model = MultipleChoiceTask(case.config, case.options()).build_model()
  xt.load_original_checkpoint(model, case.ckpt, strict=True)
  out = model({"input_ids": case["feat_input_ids"],
               "segment_ids": case["feat_segment_ids"],
               "input_mask": case["feat_input_mask"]})
  np.testing.assert_allclose(out["logits"], case["logits"], atol=1e-5,
                             rtol=1e-5)


def test_bad_inputs(tmp_path):
  with pytest.raises(TaskDataError, match=r"dev/middle: no such folder"):
    race_data.read_race(str(tmp_path), "dev")
  folder = tmp_path / "dev" / "middle"
  folder.mkdir(parents=True)
  (tmp_path / "dev" / "high").mkdir()
  (folder / "1.txt").write_text("{not json")
  with pytest.raises(TaskDataError, match=r"1.txt: not valid JSON"):
    race_data.read_race(str(tmp_path), "dev")
  (folder / "1.txt").write_text(json.dumps({
      "article": "a", "questions": ["q"], "options": [["x", "y", "z"]],
      "answers": ["A"], "id": "1"}))
  with pytest.raises(TaskDataError, match=r"1.txt: question 0 needs 4 "
                     r"options"):
    race_data.read_race(str(tmp_path), "dev")
  with pytest.raises(TaskDataError, match="exclude each other"):
    race_data.read_race(str(tmp_path), "dev", True, True)


def race_run(tmp_path):
  """run_race.py (an early run: see conftest): its folder, data and
  result."""
  shared = shared_dir()
  race_dir = os.path.join(shared, "data", "race", "RACE")
  data = tmp_path / "RACE"
  for split, picks in (("train", slice(0, 6)), ("dev", slice(6, 12))):
    for level in ("middle", "high"):
      src = os.path.join(race_dir, "dev", level)
      dst = data / split / level
      dst.mkdir(parents=True)
      for name in sorted(os.listdir(src))[picks]:
        shutil.copy(os.path.join(src, name), dst / name)
  config = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=32000)
  config.to_json(str(tmp_path / "xlnet_config.json"))
  return tmp_path, data, run([
      sys.executable, "run_race.py", f"--data_dir={data}",
      f"--output_dir={tmp_path}/proc", f"--model_dir={tmp_path}/model",
      f"--model_config_path={tmp_path}/xlnet_config.json",
      f"--spiece_model_file={spiece_path(shared)}", "--do_train",
      "--do_eval", "--do_predict", "--max_seq_length=64",
      "--max_qa_length=24", "--train_steps=4", "--train_batch_size=2",
      "--iterations=2", "--eval_batch_size=8", "--predict_batch_size=8"],
      600)


@pytest.mark.early("race_run")
@pytest.mark.usefixtures("shared")
def test_run_race_end_to_end():
  """Trains on a few dev passages copied as 'train', evaluates on others."""
  tmp_path, data, res = early_result(race_run)
  assert res.returncode == 0, res.stderr[-3000:]
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    best = json.load(f)["best"]
  n_mid = len(race_data.read_race(str(data), "dev", middle_only=True))
  n_high = len(race_data.read_race(str(data), "dev", high_only=True))
  assert best["num_middle"] == n_mid and best["num_high"] == n_high
  assert best["accuracy"] == pytest.approx(
      (best["accuracy_middle"] * n_mid + best["accuracy_high"] * n_high) /
      (n_mid + n_high))
  with open(tmp_path / "model" / "predictions" / "race_predictions.tsv") as f:
    rows = f.read().splitlines()
  assert rows[0] == "id\tprediction\tanswer\tlevel"
  assert len(rows) == n_mid + n_high + 1
  # RACE has no raw-text signatures: the features export alone, version 4.
  assert sorted(os.listdir(tmp_path / "model" / "saved_model")) == [
      "features", "xlnet_tf_export.json"]
  assert os.path.exists(tmp_path / "model" / "saved_model" / "features" /
                        "4" / "saved_model.pb")
