"""SQuAD reader: v1.1 dev, v2.0 records built here, unlabeled files, and
the one-line error for each kind of bad file."""

import json

import pytest

from data_utils.squad.reader import read_squad, SquadDataError
from squad_cases import squad_json, write_json


def test_read_dev_v11(squad_dev, squad_dev_path):
  assert squad_dev.version == "1.1" and squad_dev.labeled
  assert len(squad_dev.examples) == 10570
  assert len({e.paragraph_index for e in squad_dev.examples}) == 2067
  with open(squad_dev_path) as f:
    raw = json.load(f)
  qa = raw["data"][0]["paragraphs"][0]["qas"][0]
  first = squad_dev.examples[0]
  assert first.qas_id == qa["id"] and first.answers == [
      a["text"] for a in qa["answers"]]
  assert not any(e.is_impossible for e in squad_dev.examples)
  for e in squad_dev.examples[::97]:
    assert e.paragraph_text[e.start_position:e.start_position + len(
        e.orig_answer_text)] == e.orig_answer_text
  assert sum(len(e.answers) > 1 for e in squad_dev.examples) > 9000


def test_read_v2_records(tmp_path):
  context = "The Normans gave their name to Normandy in the 10th century."
  path = write_json(tmp_path / "v2.json", squad_json([{
      "context": context, "qas": [
      {"id": "a", "question": "Who named Normandy?", "is_impossible": False,
       "answers": [{"text": "The Normans", "answer_start": 0}]},
      {"id": "b", "question": "Who named Paris?", "is_impossible": True,
       "answers": [], "plausible_answers": [
           {"text": "Normans", "answer_start": 4}]},
  ]}]))
  data = read_squad(path, is_training=True)
  assert data.version == "2.0" and data.labeled
  a, b = data.examples
  assert not a.is_impossible and a.start_position == 0
  assert b.is_impossible and b.start_position == -1 and b.answers == []
  assert data.gold() == {"a": ["The Normans"], "b": []}


def test_unlabeled_questions_predict_only(tmp_path):
  path = write_json(tmp_path / "q.json", squad_json([{
      "context": "Some text.",
      "qas": [{"id": "q", "question": "What?", "answers": []}]}], "1.1"))
  assert not read_squad(path).labeled
  with pytest.raises(SquadDataError, match="no answer and not marked"):
    read_squad(path, is_training=True)


@pytest.mark.parametrize("content, message", [
    (None, r"missing\.json: no such file"),
    ("{not json", r"bad\.json: not valid JSON"),
    ([1, 2], r"bad\.json: expected a JSON object with a 'data' list"),
    ({"data": [{"paragraphs": [{"context": "x"}]}]},
     r"bad\.json: article 0 paragraph 0: expected an object with 'context'"),
    ({"data": [{"paragraphs": [{"context": "x", "qas": [
        {"id": "q1", "question": "?"}]}]}]},
     r"bad\.json: article 0 paragraph 0 question 0: missing or bad "
     r"'answers'"),
    ({"data": [{"paragraphs": [{"context": "short", "qas": [
        {"id": "q1", "question": "?", "answers": [
            {"text": "shorts", "answer_start": 0}]}]}]}]},
     r"bad\.json: question q1: answer_start 0 \+ 6 characters is outside "
     r"its context \(5 characters\)"),
])
def test_bad_files(tmp_path, content, message):
  if content is None:
    path = str(tmp_path / "missing.json")
  elif isinstance(content, str):
    path = str(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(content)
  else:
    path = write_json(tmp_path / "bad.json", content)
  with pytest.raises(SquadDataError, match=message) as info:
    read_squad(path)
  assert "\n" not in str(info.value)
