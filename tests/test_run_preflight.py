"""A fine-tuning run checks its flags and every input a later step needs
before any long work, each fault one line naming the flag or file: a
generic task without its kind, sequence lengths that hold no text, split
files, a bad evaluation row or passage, a missing predict file."""

import json
import os
import sys

import pytest

from data_utils.classification import features as cf
from data_utils.classification import reader as cd
from data_utils.errors import UsageError, UserError
from data_utils.race import reader as race_data
from xlnet_tf.tasks.classification.workflow import ClassifierOptions, ClassifierWorkflow
from xlnet_tf.tasks.multiple_choice.workflow import RaceOptions, RaceWorkflow
from xlnet_tf.tasks.squad.workflow import SquadOptions, SquadWorkflow
from conftest import (early_result, refused, run, shared_dir, spiece_path,
                      tree_digest)
from input_cases import (TINY, race_dir, race_passage, rte_dir, squad_file,
                         squad_qa, workflow_options)


# 2. generic needs its kind ---------------------------------------------------
def test_generic_task_needs_label_list_or_is_regression(shared, tmp_path):
  with pytest.raises(UsageError) as e:
    ClassifierWorkflow(workflow_options(ClassifierOptions, shared, tmp_path,
                                task_name="generic",
                                generic=cd.GenericSpec()))
  assert str(e.value) == ("--task_name=generic: pass --label_list (the "
                          "labels, for classification) or --is_regression")
  # Either flag says what the task is.
  assert ClassifierWorkflow(workflow_options(
      ClassifierOptions, shared, tmp_path, task_name="generic",
      is_regression=True, generic=cd.GenericSpec())).regression
  assert not ClassifierWorkflow(workflow_options(
      ClassifierOptions, shared, tmp_path, task_name="generic",
      generic=cd.GenericSpec(labels=["0", "1"]))).regression
  with pytest.raises(UsageError) as e:
    ClassifierWorkflow(workflow_options(ClassifierOptions, shared, tmp_path,
                                task_name="rte", is_regression=True))
  assert str(e.value) == ("--is_regression: rte has labels (entailment, "
                          "not_entailment); a regression task has numeric "
                          "scores and no --label_list")


# 3. Sequence lengths that hold no text ---------------------------------------
@pytest.mark.parametrize("task,length,message", [
    ("sst-2", 2, "--max_seq_length=2: must be at least 3 for sst-2 (one "
     "token, <sep> and <cls>)"),
    ("sst-2", 0, "--max_seq_length=0: must be at least 3 for sst-2 (one "
     "token, <sep> and <cls>)"),
    ("imdb", -5, "--max_seq_length=-5: must be at least 3 for imdb (one "
     "token, <sep> and <cls>)"),
    ("rte", 4, "--max_seq_length=4: must be at least 5 for rte (a token of "
     "each text, two <sep> and <cls>)"),
])
def test_classifier_max_seq_length_minimum(shared, tmp_path, task, length,
                                           message):
  workflow = ClassifierWorkflow(workflow_options(
      ClassifierOptions, shared, tmp_path, task_name=task,
      max_seq_length=length, do_train=True))
  with pytest.raises(UsageError) as e:
    workflow.check_inputs()
  assert str(e.value) == message


def test_classifier_minimum_keeps_a_token_of_each_text():
  # At 5 a pair keeps both texts; at 4 truncation drops the second.
  assert cf.convert_example([11], [12], 5)["input_ids"] == [11, 4, 12, 4, 3]
  assert cf.convert_example([11], [12], 4)["input_ids"] == [0, 11, 4, 3]
  assert cf.convert_example([11, 12], None, 3)["input_ids"] == [11, 4, 3]


@pytest.mark.parametrize("seq,qa,message", [
    (64, 128, "--max_seq_length=64: must be at least 132 with "
     "--max_qa_length=128 (question and option, <sep> <sep> <cls> and one "
     "context token)"),
    (64, 0, "--max_qa_length=0: must be at least 1"),
    (0, 128, "--max_seq_length=0: must be at least 132 with "
     "--max_qa_length=128 (question and option, <sep> <sep> <cls> and one "
     "context token)"),
])
def test_race_lengths(shared, tmp_path, seq, qa, message):
  workflow = RaceWorkflow(workflow_options(RaceOptions, shared, tmp_path,
                                   task_name="race", max_seq_length=seq,
                                   max_qa_length=qa, do_train=True))
  with pytest.raises(UsageError) as e:
    workflow.check_inputs()
  assert str(e.value) == message


@pytest.mark.parametrize("kw,message", [
    (dict(max_seq_length=64, max_query_length=64),
     "--max_seq_length=64: must be at least 68 with --max_query_length=64 "
     "(the question, <sep> <sep> <cls> and one paragraph piece)"),
    (dict(max_seq_length=-5, max_query_length=64),
     "--max_seq_length=-5: must be at least 68 with --max_query_length=64 "
     "(the question, <sep> <sep> <cls> and one paragraph piece)"),
    (dict(doc_stride=0), "--doc_stride=0: must be at least 1"),
    (dict(max_query_length=0), "--max_query_length=0: must be at least 1"),
])
def test_squad_lengths(shared, tmp_path, kw, message):
  with pytest.raises(UsageError) as e:
    SquadWorkflow(workflow_options(SquadOptions, shared, tmp_path, task_name="squad",
                           **kw))
  assert str(e.value) == message


# 8. Inputs a later step needs, checked first ---------------------------------
def test_split_files_name_what_a_split_reads():
  assert cd.split_files("mnli", "dev") == ["dev_matched.tsv"]
  assert cd.split_files("mnli-mm", "test") == ["test_mismatched.tsv"]
  assert cd.split_files("yelp-5", "dev") == ["test.csv"]
  assert cd.split_files("imdb", "train") == ["train/neg", "train/pos"]
  assert cd.split_files("generic", "test",
                        cd.GenericSpec(delimiter=",")) == ["test.csv"]
  assert race_data.split_files("dev", middle_only=True) == ["dev/middle"]
  with pytest.raises(cd.TaskDataError) as e:
    cd.split_files("rte", "validation")
  assert str(e.value) == "split must be train, dev or test, got 'validation'"


def test_classifier_missing_split_files(shared, tmp_path):
  data = rte_dir(tmp_path / "RTE", files=("train.tsv",))

  def check(**kw):
    kw.setdefault("data_dir", data)
    workflow = ClassifierWorkflow(workflow_options(ClassifierOptions, shared,
                                           tmp_path, task_name="rte", **kw))
    with pytest.raises(UsageError) as e:
      workflow.check_inputs()
    return str(e.value)
  assert check(do_train=True, do_eval=True) == (
      f"--data_dir={data}: dev.tsv not found (needed by --do_eval for split "
      "'dev')")
  assert check(do_predict=True) == (
      f"--data_dir={data}: test.tsv not found (needed by --do_predict for "
      "split 'test')")
  assert check(do_eval=True, eval_split="validation") == (
      "--eval_split=validation: must be one of train, dev, test")
  assert check(do_train=True, data_dir=str(tmp_path / "nope")) == (
      f"--data_dir={tmp_path}/nope: no such folder")


def test_classifier_bad_eval_row_fails_before_training(shared, tmp_path):
  data = rte_dir(tmp_path / "RTE", dev_rows=[
      "0\tA man plays.\tA person plays.\tentailment",
      "1\tA dog runs.\tA cat sleeps.\tmaybe"])
  workflow = ClassifierWorkflow(workflow_options(
      ClassifierOptions, shared, tmp_path, task_name="rte", data_dir=data,
      do_train=True, do_eval=True))
  with pytest.raises(cd.TaskDataError) as e:
    workflow.check_inputs()
  assert str(e.value) == (f"{data}/dev.tsv:3: label 'maybe' not in "
                          "['entailment', 'not_entailment']")


def test_race_and_squad_missing_inputs(shared, tmp_path):
  race = race_dir(tmp_path / "RACE", levels=("middle",))
  workflow = RaceWorkflow(workflow_options(RaceOptions, shared, tmp_path,
                                   task_name="race", data_dir=race,
                                   max_seq_length=64, max_qa_length=16,
                                   do_train=True, do_predict=True))
  with pytest.raises(UsageError) as e:
    workflow.check_inputs()
  assert str(e.value) == (f"--data_dir={race}: train/high not found (needed "
                          "by --do_train for split 'train')")

  train = squad_file(tmp_path / "train.json", [squad_qa("q1")])

  def squad_check(**kw):
    workflow = SquadWorkflow(workflow_options(SquadOptions, shared, tmp_path,
                                      task_name="squad", train_file=train,
                                      max_seq_length=96, max_query_length=16,
                                      **kw))
    with pytest.raises(UserError) as e:
      workflow.check_inputs()
    return str(e.value)
  assert squad_check(do_train=True, do_eval=True) == (
      "--predict_file is required by --do_eval")
  missing = str(tmp_path / "dev.json")
  assert squad_check(do_train=True, do_predict=True,
                     predict_file=missing) == (
      f"--predict_file={missing}: no such file (needed by --do_predict)")
  assert squad_check(do_train=True, start_n_top=200) == (
      "--start_n_top=200: must be at most --max_seq_length=96")
  unanswered = tmp_path / "questions.json"
  squad_file(unanswered, [{"id": "q1", "question": "Who?", "answers": []}])
  assert squad_check(do_train=True, do_eval=True,
                     predict_file=str(unanswered)) == (
      f"{unanswered}: some questions have no answer (nor is_impossible): "
      "nothing to evaluate against; use --do_predict")


def _assert_refused_before_training(res, line, tmp_path, data, digests):
  assert refused(res) == line
  # Nothing was trained or cached; the user's files are as they were.
  assert not os.path.exists(tmp_path / "model")
  assert not os.path.exists(tmp_path / "proc")
  assert tree_digest(data) == digests


def _common_flags(shared, tmp_path):
  config = tmp_path / "xlnet_config.json"
  TINY.to_json(str(config))
  return [f"--model_config_path={config}",
          f"--spiece_model_file={spiece_path(shared)}",
          f"--output_dir={tmp_path}/proc", f"--model_dir={tmp_path}/model",
          "--train_steps=2", "--iterations=1", "--train_batch_size=2"]


# The three runs below are early runs (see conftest): each returns its
# folder, data, the data's digests and the result.
def classifier_missing_dev(tmp_path):
  data = rte_dir(tmp_path / "RTE", files=("train.tsv",))
  digests = tree_digest(data)
  return tmp_path, data, digests, run([
      sys.executable, "run_classifier.py",
      *_common_flags(shared_dir(), tmp_path), "--task_name=rte",
      f"--data_dir={data}", "--max_seq_length=16", "--do_train",
      "--do_eval"], 600)


@pytest.mark.early("classifier_missing_dev")
@pytest.mark.usefixtures("shared")
def test_run_classifier_missing_dev_fails_before_training():
  tmp_path, data, digests, res = early_result(classifier_missing_dev)
  _assert_refused_before_training(
      res, f"run_classifier: --data_dir={data}: dev.tsv not found (needed by "
      "--do_eval for split 'dev')", tmp_path, data, digests)


def race_bad_dev_passage(tmp_path):
  data = race_dir(tmp_path / "RACE")
  bad = os.path.join(data, "dev", "high", "1.txt")
  with open(bad, "w", encoding="utf-8") as f:
    json.dump(race_passage(options=["ABCD"]), f)
  digests = tree_digest(data)
  return tmp_path, data, digests, run([
      sys.executable, "run_race.py", *_common_flags(shared_dir(), tmp_path),
      f"--data_dir={data}", "--max_seq_length=64", "--max_qa_length=16",
      "--do_train", "--do_eval"], 600)


@pytest.mark.early("race_bad_dev_passage")
@pytest.mark.usefixtures("shared")
def test_run_race_bad_dev_passage_fails_before_training():
  tmp_path, data, digests, res = early_result(race_bad_dev_passage)
  bad = os.path.join(data, "dev", "high", "1.txt")
  _assert_refused_before_training(
      res, f"run_race: {bad}: question 0 needs 4 options (a list of 4 "
      "strings), got a string", tmp_path, data, digests)


def squad_missing_predict_file(tmp_path):
  data = tmp_path / "squad"
  data.mkdir()
  train = squad_file(data / "train.json", [squad_qa("q1")])
  digests = tree_digest(data)
  missing = data / "dev-v1.1.json"
  return tmp_path, data, digests, run([
      sys.executable, "run_squad.py", *_common_flags(shared_dir(), tmp_path),
      f"--train_file={train}", f"--predict_file={missing}",
      "--max_seq_length=32", "--max_query_length=8", "--do_train",
      "--do_predict"], 600)


@pytest.mark.early("squad_missing_predict_file")
@pytest.mark.usefixtures("shared")
def test_run_squad_missing_predict_file_fails_before_training():
  tmp_path, data, digests, res = early_result(squad_missing_predict_file)
  missing = data / "dev-v1.1.json"
  _assert_refused_before_training(
      res, f"run_squad: --predict_file={missing}: no such file (needed by "
      "--do_predict)", tmp_path, data, digests)
