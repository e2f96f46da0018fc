"""Task inputs are checked before any long work, each fault one line naming
the file (and line) or the flag: non-finite regression scores, a generic task
without its kind, sequence lengths that hold no text, non-UTF-8 files,
malformed RACE passages, SQuAD answers off their offsets and repeated ids,
binary SentencePiece input, and data files a later step needs."""

import contextlib
import io
import json
import logging
import os

import pytest

import xlnet_tf as xt
from data_utils import classifier_data as cd
from data_utils import race_data
from data_utils import squad_data as sd
from data_utils.create_pretrain_data import create_pretrain_data
from data_utils.errors import UsageError, UserError, run_main
from data_utils.pretrain_data import DataError, PretrainDataConfig
from data_utils.train_spiece import train_spiece
from xlnet_tf.config import ConfigError
from xlnet_tf.training import TrainOptions
from xlnet_tf.workflows.classifier import ClassifierOptions, ClassifierWorkflow
from xlnet_tf.workflows.race import RaceOptions, RaceWorkflow
from xlnet_tf.workflows.squad import SquadOptions, SquadWorkflow
from data_utils.tokenization import SentencePieceTokenizer
from conftest import corpus_slice, refused_line, spiece_path, tree_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000)
PRETRAIN_CFG = PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                                  num_core_per_host=1, bi_data=True,
                                  num_predict=6, perm_size=8)
STSB_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
               "sentence1\tsentence2\tscore")
RTE_HEADER = "index\tsentence1\tsentence2\tlabel"


def _options(cls, shared, tmp_path, **kw):
  values = dict(config=TINY, run=xt.RunOptions(),
                train=TrainOptions(model_dir=str(tmp_path / "model"),
                                   train_steps=1),
                task_name="sst-2", data_dir=str(tmp_path / "data"),
                output_dir=str(tmp_path / "proc"),
                spiece_model_file=spiece_path(shared))
  values.update(kw)
  return cls(**values)


def _stsb_row(k, score):
  return (f"{k}\tmain-captions\tMSRvid\t2012test\t{k}\tnone\tnone\t"
          f"A man plays.\tA dog runs.\t{score}")


def _rte_dir(directory, files=("train.tsv", "dev.tsv"), dev_rows=None):
  """An RTE folder with two rows per file (or `dev_rows` in dev.tsv)."""
  os.makedirs(directory, exist_ok=True)
  for name in files:
    rows = dev_rows if name == "dev.tsv" and dev_rows else [
        "0\tA man plays.\tA person plays.\tentailment",
        "1\tA dog runs.\tA cat sleeps.\tnot_entailment"]
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write("\n".join([RTE_HEADER] + rows) + "\n")
  return str(directory)


def _passage(**overrides):
  data = {"article": "Tom went to school by bus.", "questions": ["How?"],
          "options": [["By bus.", "By car.", "On foot.", "By train."]],
          "answers": ["A"], "id": "middle1.txt"}
  data.update(overrides)
  return data


def _race_dir(root, splits=("train", "dev"), levels=("middle", "high")):
  for split in splits:
    for level in levels:
      folder = os.path.join(root, split, level)
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, "1.txt"), "w", encoding="utf-8") as f:
        json.dump(_passage(), f)
  return str(root)


def _squad_file(path, qas, context="The cat sat on the mat."):
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}, f)
  return str(path)


def _qa(qid, text="cat", start=4):
  return {"id": qid, "question": "Who sat?",
          "answers": [{"text": text, "answer_start": start}]}


# 1. Non-finite regression scores -------------------------------------------
@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_non_finite_score_is_refused_naming_file_and_line(tmp_path, score):
  folder = tmp_path / "STS-B"
  folder.mkdir()
  (folder / "train.tsv").write_text("\n".join(
      [STSB_HEADER, _stsb_row(0, "1.5"), _stsb_row(1, score)]) + "\n")
  with pytest.raises(cd.TaskDataError) as e:
    cd.read_examples("sts-b", str(folder), "train")
  assert str(e.value) == (f"{folder}/train.tsv:3: score '{score}' is not a "
                          "finite number")
  # Your own regression data too.
  (tmp_path / "train.tsv").write_text(f"text\tscore\nfine\t0.5\nodd\t{score}\n")
  with pytest.raises(cd.TaskDataError) as e:
    cd.read_examples("generic", str(tmp_path), "train", cd.GenericSpec())
  assert str(e.value) == (f"{tmp_path}/train.tsv:3: score '{score}' is not "
                          "a finite number")


# 2. generic needs its kind ---------------------------------------------------
def test_generic_task_needs_label_list_or_is_regression(shared, tmp_path):
  with pytest.raises(UsageError) as e:
    ClassifierWorkflow(_options(ClassifierOptions, shared, tmp_path,
                                task_name="generic",
                                generic=cd.GenericSpec()))
  assert str(e.value) == ("--task_name=generic: pass --label_list (the "
                          "labels, for classification) or --is_regression")
  # Either flag says what the task is.
  assert ClassifierWorkflow(_options(
      ClassifierOptions, shared, tmp_path, task_name="generic",
      is_regression=True, generic=cd.GenericSpec())).regression
  assert not ClassifierWorkflow(_options(
      ClassifierOptions, shared, tmp_path, task_name="generic",
      generic=cd.GenericSpec(labels=["0", "1"]))).regression
  with pytest.raises(UsageError) as e:
    ClassifierWorkflow(_options(ClassifierOptions, shared, tmp_path,
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
  workflow = ClassifierWorkflow(_options(
      ClassifierOptions, shared, tmp_path, task_name=task,
      max_seq_length=length, do_train=True))
  with pytest.raises(UsageError) as e:
    workflow.check_inputs()
  assert str(e.value) == message


def test_classifier_minimum_keeps_a_token_of_each_text():
  # At 5 a pair keeps both texts; at 4 truncation drops the second.
  assert cd.convert_example([11], [12], 5)["input_ids"] == [11, 4, 12, 4, 3]
  assert cd.convert_example([11], [12], 4)["input_ids"] == [0, 11, 4, 3]
  assert cd.convert_example([11, 12], None, 3)["input_ids"] == [11, 4, 3]


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
  workflow = RaceWorkflow(_options(RaceOptions, shared, tmp_path,
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
    SquadWorkflow(_options(SquadOptions, shared, tmp_path, task_name="squad",
                           **kw))
  assert str(e.value) == message


# 4. Non-UTF-8 files: file, line and column -----------------------------------
def test_non_utf8_tsv_names_line_and_column(tmp_path):
  path = tmp_path / "dev.tsv"
  path.write_bytes(f"{RTE_HEADER}\n0\tA b.\tC d.\tentailment\n".encode() +
                   b"1\tCaf\xe9 au lait.\tA drink.\tentailment\n")
  with pytest.raises(cd.TaskDataError) as e:
    cd.read_examples("rte", str(tmp_path), "dev")
  assert str(e.value) == f"{path}:3: not UTF-8 text (byte 0xe9 at column 6)"


def test_non_utf8_imdb_review(tmp_path):
  for label in ("neg", "pos"):
    (tmp_path / "train" / label).mkdir(parents=True)
    (tmp_path / "train" / label / "0_7.txt").write_text("Fine film.")
  bad = tmp_path / "train" / "pos" / "1_9.txt"
  bad.write_bytes("Très bon.<br />Vu deux fois ".encode() + b"\xff !")
  with pytest.raises(cd.TaskDataError) as e:
    cd.read_examples("imdb", str(tmp_path), "train")
  assert str(e.value) == f"{bad}:1: not UTF-8 text (byte 0xff at column 29)"


def test_non_utf8_race_squad_and_config(tmp_path):
  race = _race_dir(tmp_path / "RACE", splits=("dev",))
  bad = os.path.join(race, "dev", "high", "1.txt")
  with open(bad, "wb") as f:
    f.write(b'{"article": "x",\n "questions": ["Qu\xe9?"]}\n')
  with pytest.raises(cd.TaskDataError) as e:
    race_data.read_race(race, "dev")
  assert str(e.value) == f"{bad}:2: not UTF-8 text (byte 0xe9 at column 19)"

  squad = tmp_path / "dev.json"
  squad.write_bytes(b'{"version": "1.1",\n\n  "data": ["\x80"]}')
  with pytest.raises(sd.SquadDataError) as e:
    sd.read_squad(str(squad))
  assert str(e.value) == f"{squad}:3: not UTF-8 text (byte 0x80 at column 13)"

  config = tmp_path / "xlnet_config.json"
  config.write_bytes(b'{"d_model": 16,\n "n_head": 2, \xc3(}')
  with pytest.raises(ConfigError) as e:
    xt.XLNetConfig.from_json(str(config))
  assert str(e.value) == f"{config}:2: not UTF-8 text (byte 0xc3 at column 15)"


def test_non_utf8_pretraining_corpus_names_the_right_line(shared, tmp_path):
  """The bad byte is on line 300, past the first 8 KiB block the text layer
  decodes ahead (the old message said line 295)."""
  lines = [f"Line {k} of a small corpus, with a few more words." for k in
           range(1, 401)]
  raw = [line.encode() for line in lines]
  raw[299] = raw[299][:5] + b"\xff" + raw[299][5:]
  corpus = tmp_path / "corpus.txt"
  corpus.write_bytes(b"\n".join(raw) + b"\n")
  assert len(b"\n".join(raw[:299])) > 8192
  cfg = PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                           num_core_per_host=1, num_predict=6, perm_size=8)
  with pytest.raises(DataError) as e:
    create_pretrain_data([str(corpus)], cfg, str(tmp_path / "out"),
                         spiece_path(shared))
  assert str(e.value) == (f"{corpus}:300: not UTF-8 text (byte 0xff at "
                          "column 6)")


# 5. RACE passages ------------------------------------------------------------
@pytest.mark.parametrize("content,message", [
    ([_passage()], "expected a JSON object with 'article', 'questions', "
     "'options' and 'answers' (the RACE layout), got a list"),
    (_passage(options=["ABCD"]), "question 0 needs 4 options (a list of 4 "
     "strings), got a string"),
    (_passage(options=[["a", "b", "c"]]), "question 0 needs 4 options (a "
     "list of 4 strings), got 3 entries"),
    (_passage(options=[["a", "b", 3, "d"]]), "question 0 needs 4 options (a "
     "list of 4 strings), got an entry that is a number"),
    (_passage(answers=["E"]), "question 0 needs an answer in A-D, got 'E'"),
    (_passage(answers=["AB"]), "question 0 needs an answer in A-D, got 'AB'"),
    (_passage(article=["Tom", "went"]), "'article' must be a string, got a "
     "list"),
    (_passage(questions=[7]), "question 0 needs its text as a string, got a "
     "number"),
    (_passage(answers="A"), "'answers' must be a list (one entry per "
     "question), got a string"),
    ({"article": "x", "questions": [], "options": []}, "missing key "
     "'answers'"),
])
def test_malformed_race_passage(tmp_path, content, message):
  race = _race_dir(tmp_path, splits=("dev",))
  bad = os.path.join(race, "dev", "middle", "1.txt")
  with open(bad, "w", encoding="utf-8") as f:
    json.dump(content, f)
  with pytest.raises(cd.TaskDataError) as e:
    race_data.read_race(race, "dev")
  assert str(e.value) == f"{bad}: {message}"


# 6. SQuAD answers and ids ----------------------------------------------------
def test_squad_answers_off_their_offset_are_counted(tmp_path, caplog):
  path = _squad_file(tmp_path / "train-v1.1.json", [
      _qa("q1"), _qa("q2", "mat", 3), _qa("q3", "the mat", 14),
      _qa("q4", "sat", 8)])
  with caplog.at_level(logging.WARNING):
    data = sd.read_squad(path, is_training=True)
  assert len(data.examples) == 4
  warnings = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING]
  assert warnings == [f"{path}: 2 answers do not match the context at "
                      "answer_start (first: q2, q3)"]
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    sd.read_squad(_squad_file(tmp_path / "ok.json", [_qa("q1")]))
  assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_squad_duplicate_question_id(tmp_path):
  path = tmp_path / "dev.json"
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "The cat sat.", "qas": [_qa("q1"), _qa("q2")]},
        {"context": "A cat ran.", "qas": [_qa("q3", "cat", 2),
                                          _qa("q2", "cat", 2)]}]}]}, f)
  with pytest.raises(sd.SquadDataError) as e:
    sd.read_squad(str(path))
  assert str(e.value) == (f"{path}: article 0 paragraph 1 question 1: "
                          "duplicate question id 'q2' (ids must be unique)")


# 7. SentencePiece training input ---------------------------------------------
@pytest.mark.parametrize("content,message", [
    (b"plain text\nab\x00c\x01\x02\n", "2: NUL byte at column 3 (a binary "
     "file, not text)"),
    (b"plain text\nmore text\n\xff\xfebinary", "3: not UTF-8 text (byte 0xff "
     "at column 1)"),
])
def test_train_spiece_refuses_binary_input(tmp_path, content, message):
  corpus = tmp_path / "corpus.bin"
  corpus.write_bytes(content)
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main("train_spiece", lambda: train_spiece(
        str(corpus), str(tmp_path / "out" / "spiece"), vocab_size=50))
  assert code == 2
  assert err.getvalue() == f"train_spiece: {corpus}:{message}\n"
  # Refused before anything was made, and the input is untouched.
  assert sorted(os.listdir(tmp_path)) == ["corpus.bin"]
  assert corpus.read_bytes() == content


def test_train_spiece_keeps_an_existing_model_and_checks_its_prefix(
    shared, tmp_path):
  corpus = corpus_slice(shared, tmp_path, 300)
  mine = tmp_path / "spiece.model"
  mine.write_bytes(b"the user's model")
  blocker = tmp_path / "a_file"
  blocker.write_bytes(b"x")
  cases = [
      (str(tmp_path / "spiece"), 200, f"--model_prefix={tmp_path}/spiece: "
       f"{tmp_path}/spiece.model exists; choose another prefix, or pass "
       "--overwrite to replace it"),
      (str(blocker / "spiece"), 200, f"--model_prefix={blocker}/spiece: "
       f"{blocker} exists and is not a directory"),
      (str(tmp_path / "new" / "spiece"), 3, "--vocab_size=3: must be at "
       "least 9"),
  ]
  for prefix, vocab, message in cases:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      code = run_main("train_spiece", lambda: train_spiece(
          corpus, prefix, vocab_size=vocab))
    assert (code, err.getvalue()) == (2, f"train_spiece: {message}\n")
  assert mine.read_bytes() == b"the user's model"
  assert not (tmp_path / "new").exists()
  # --overwrite replaces it with a real model.
  path = train_spiece(corpus, str(tmp_path / "spiece"), vocab_size=200,
                      overwrite=True)
  assert SentencePieceTokenizer(path).vocab_size == 200


def test_create_pretrain_data_checks_save_dir_first(shared, tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_bytes(b"x")
  with pytest.raises(UsageError) as e:
    create_pretrain_data([corpus_slice(shared, tmp_path, 10)], PRETRAIN_CFG,
                         str(blocker / "proc"), spiece_path(shared))
  assert str(e.value) == (f"--save_dir={blocker}/proc: {blocker} is a file, "
                          "not a directory")


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
  data = _rte_dir(tmp_path / "RTE", files=("train.tsv",))

  def check(**kw):
    kw.setdefault("data_dir", data)
    workflow = ClassifierWorkflow(_options(ClassifierOptions, shared,
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
  data = _rte_dir(tmp_path / "RTE", dev_rows=[
      "0\tA man plays.\tA person plays.\tentailment",
      "1\tA dog runs.\tA cat sleeps.\tmaybe"])
  workflow = ClassifierWorkflow(_options(
      ClassifierOptions, shared, tmp_path, task_name="rte", data_dir=data,
      do_train=True, do_eval=True))
  with pytest.raises(cd.TaskDataError) as e:
    workflow.check_inputs()
  assert str(e.value) == (f"{data}/dev.tsv:3: label 'maybe' not in "
                          "['entailment', 'not_entailment']")


def test_race_and_squad_missing_inputs(shared, tmp_path):
  race = _race_dir(tmp_path / "RACE", levels=("middle",))
  workflow = RaceWorkflow(_options(RaceOptions, shared, tmp_path,
                                   task_name="race", data_dir=race,
                                   max_seq_length=64, max_qa_length=16,
                                   do_train=True, do_predict=True))
  with pytest.raises(UsageError) as e:
    workflow.check_inputs()
  assert str(e.value) == (f"--data_dir={race}: train/high not found (needed "
                          "by --do_train for split 'train')")

  train = _squad_file(tmp_path / "train.json", [_qa("q1")])

  def squad_check(**kw):
    workflow = SquadWorkflow(_options(SquadOptions, shared, tmp_path,
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
  _squad_file(unanswered, [{"id": "q1", "question": "Who?", "answers": []}])
  assert squad_check(do_train=True, do_eval=True,
                     predict_file=str(unanswered)) == (
      f"{unanswered}: some questions have no answer (nor is_impossible): "
      "nothing to evaluate against; use --do_predict")


def _assert_refused_before_training(script, args, line, tmp_path, data,
                                    digests):
  assert refused_line(script, args) == line
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


def test_run_classifier_missing_dev_fails_before_training(shared, tmp_path):
  data = _rte_dir(tmp_path / "RTE", files=("train.tsv",))
  digests = tree_digest(data)
  _assert_refused_before_training(
      "run_classifier.py", _common_flags(shared, tmp_path) + [
          "--task_name=rte", f"--data_dir={data}", "--max_seq_length=16",
          "--do_train", "--do_eval"],
      f"run_classifier: --data_dir={data}: dev.tsv not found (needed by "
      "--do_eval for split 'dev')", tmp_path, data, digests)


def test_run_race_bad_dev_passage_fails_before_training(shared, tmp_path):
  data = _race_dir(tmp_path / "RACE")
  bad = os.path.join(data, "dev", "high", "1.txt")
  with open(bad, "w", encoding="utf-8") as f:
    json.dump(_passage(options=["ABCD"]), f)
  digests = tree_digest(data)
  _assert_refused_before_training(
      "run_race.py", _common_flags(shared, tmp_path) + [
          f"--data_dir={data}", "--max_seq_length=64", "--max_qa_length=16",
          "--do_train", "--do_eval"],
      f"run_race: {bad}: question 0 needs 4 options (a list of 4 "
      "strings), got a string", tmp_path, data, digests)


def test_run_squad_missing_predict_file_fails_before_training(shared,
                                                             tmp_path):
  data = tmp_path / "squad"
  data.mkdir()
  train = _squad_file(data / "train.json", [_qa("q1")])
  digests = tree_digest(data)
  missing = data / "dev-v1.1.json"
  _assert_refused_before_training(
      "run_squad.py", _common_flags(shared, tmp_path) + [
          f"--train_file={train}", f"--predict_file={missing}",
          "--max_seq_length=32", "--max_query_length=8", "--do_train",
          "--do_predict"],
      f"run_squad: --predict_file={missing}: no such file (needed by "
      "--do_predict)", tmp_path, data, digests)
