"""Data files are checked before any long work, each fault one line naming
the file (and line): non-finite regression scores, non-UTF-8 files,
malformed RACE passages, SQuAD answers off their offsets and repeated ids,
binary SentencePiece input. (Flags and the run's preflight:
test_run_preflight.py.)"""

import contextlib
import io
import json
import logging
import os

import pytest

import xlnet_tf as xt
from data_utils.classification import reader as cd
from data_utils.errors import UsageError, run_main
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.examples import DataError, PretrainDataConfig
from data_utils.race import reader as race_data
from data_utils.squad import reader as sd
from data_utils.tokenization import SentencePieceTokenizer
from data_utils.train_spiece import train_spiece
from xlnet_tf.config import ConfigError
from conftest import corpus_slice, spiece_path
from input_cases import (PRETRAIN_CFG, RTE_HEADER, STSB_HEADER, race_dir,
                         race_passage, squad_file, squad_qa, stsb_row)


# 1. Non-finite regression scores -------------------------------------------
@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_non_finite_score_is_refused_naming_file_and_line(tmp_path, score):
  folder = tmp_path / "STS-B"
  folder.mkdir()
  (folder / "train.tsv").write_text("\n".join(
      [STSB_HEADER, stsb_row(0, "1.5"), stsb_row(1, score)]) + "\n")
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
  race = race_dir(tmp_path / "RACE", splits=("dev",))
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
    ([race_passage()], "expected a JSON object with 'article', 'questions', "
     "'options' and 'answers' (the RACE layout), got a list"),
    (race_passage(options=["ABCD"]), "question 0 needs 4 options (a list of 4 "
     "strings), got a string"),
    (race_passage(options=[["a", "b", "c"]]), "question 0 needs 4 options (a "
     "list of 4 strings), got 3 entries"),
    (race_passage(options=[["a", "b", 3, "d"]]), "question 0 needs 4 options (a "
     "list of 4 strings), got an entry that is a number"),
    (race_passage(answers=["E"]), "question 0 needs an answer in A-D, got 'E'"),
    (race_passage(answers=["AB"]), "question 0 needs an answer in A-D, got 'AB'"),
    (race_passage(article=["Tom", "went"]), "'article' must be a string, got a "
     "list"),
    (race_passage(questions=[7]), "question 0 needs its text as a string, got a "
     "number"),
    (race_passage(answers="A"), "'answers' must be a list (one entry per "
     "question), got a string"),
    ({"article": "x", "questions": [], "options": []}, "missing key "
     "'answers'"),
])
def test_malformed_race_passage(tmp_path, content, message):
  race = race_dir(tmp_path, splits=("dev",))
  bad = os.path.join(race, "dev", "middle", "1.txt")
  with open(bad, "w", encoding="utf-8") as f:
    json.dump(content, f)
  with pytest.raises(cd.TaskDataError) as e:
    race_data.read_race(race, "dev")
  assert str(e.value) == f"{bad}: {message}"


# 6. SQuAD answers and ids ----------------------------------------------------
def test_squad_answers_off_their_offset_are_counted(tmp_path, caplog):
  path = squad_file(tmp_path / "train-v1.1.json", [
      squad_qa("q1"), squad_qa("q2", "mat", 3), squad_qa("q3", "the mat", 14),
      squad_qa("q4", "sat", 8)])
  with caplog.at_level(logging.WARNING):
    data = sd.read_squad(path, is_training=True)
  assert len(data.examples) == 4
  warnings = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING]
  assert warnings == [f"{path}: 2 answers do not match the context at "
                      "answer_start (first: q2, q3)"]
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    sd.read_squad(squad_file(tmp_path / "ok.json", [squad_qa("q1")]))
  assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_squad_duplicate_question_id(tmp_path):
  path = tmp_path / "dev.json"
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "The cat sat.", "qas": [squad_qa("q1"), squad_qa("q2")]},
        {"context": "A cat ran.", "qas": [squad_qa("q3", "cat", 2),
                                          squad_qa("q2", "cat", 2)]}]}]}, f)
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
