"""RACE reading comprehension: the reader.

The release layout `{train,dev,test}/{middle,high}/*.txt`, one JSON passage
per file (`article`, `questions`, `options` (4 per question), `answers`
("A".."D"), `id`); one `RaceExample` per question, its options already
turned into question-option texts (`qa_text`). The feature layout is in
`data_utils/race/features.py`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List

from data_utils import paths
from data_utils.classification.reader import TaskDataError, text_files
from data_utils.text_files import read_json

LEVELS = ("middle", "high")
N_CHOICE = 4


@dataclasses.dataclass
class RaceExample:
  guid: str            # "<file id>-<question index>"
  context: str
  qa_list: List[str]   # one text per option
  label: int           # index of the right option
  level: str           # "middle" or "high"


def qa_text(question: str, option: str) -> str:
  """Example:
    >>> qa_text("He went to _ by bus.", "school")
    'He went to school by bus.'
    >>> qa_text("Where did he go?", "To school.")
    'Where did he go? To school.'
  """
  if "_" in question:
    return question.replace("_", option)
  return " ".join([question, option])


def split_files(split: str, high_only: bool = False,
                middle_only: bool = False) -> List[str]:
  """The folders reading `split` opens, relative to data_dir.

  Example:
    >>> split_files("dev"), split_files("test", high_only=True)
    (['dev/middle', 'dev/high'], ['test/high'])
  """
  if high_only and middle_only:
    raise TaskDataError("high_only and middle_only exclude each other")
  return [f"{split}/{lv}" for lv in LEVELS
          if not (lv == "middle" and high_only)
          and not (lv == "high" and middle_only)]


ANSWERS = "ABCD"[:N_CHOICE]


def _type_name(value) -> str:
  """What a JSON value is, for messages."""
  if value is None:
    return "null"
  if isinstance(value, bool):
    return "a boolean"
  if isinstance(value, (int, float)):
    return "a number"
  return {str: "a string", list: "a list", dict: "an object"}.get(
      type(value), type(value).__name__)


def _passage(path: str) -> dict:
  """The checked JSON of one passage file; a fault is one line naming the
  file (and the question)."""
  data = read_json(path, TaskDataError)
  if not isinstance(data, dict):
    raise TaskDataError(f"{path}: expected a JSON object with 'article', "
                        "'questions', 'options' and 'answers' (the RACE "
                        f"layout), got {_type_name(data)}")
  for key in ("article", "questions", "options", "answers"):
    if key not in data:
      raise TaskDataError(f"{path}: missing key '{key}'")
  if not isinstance(data["article"], str):
    raise TaskDataError(f"{path}: 'article' must be a string, got "
                        f"{_type_name(data['article'])}")
  for key in ("questions", "options", "answers"):
    if not isinstance(data[key], list):
      raise TaskDataError(f"{path}: '{key}' must be a list (one entry per "
                          f"question), got {_type_name(data[key])}")
  questions, options, answers = (data["questions"], data["options"],
                                 data["answers"])
  if not len(answers) == len(options) == len(questions):
    raise TaskDataError(f"{path}: {len(questions)} questions, "
                        f"{len(options)} option lists, {len(answers)} "
                        "answers")
  for i, (question, opts, answer) in enumerate(zip(questions, options,
                                                   answers)):
    if not isinstance(question, str):
      raise TaskDataError(f"{path}: question {i} needs its text as a "
                          f"string, got {_type_name(question)}")
    # A string of four letters would otherwise pass as four options.
    if not isinstance(opts, list):
      got = _type_name(opts)
    elif len(opts) != N_CHOICE:
      got = f"{len(opts)} entries"
    else:
      got = next((f"an entry that is {_type_name(o)}" for o in opts
                  if not isinstance(o, str)), None)
    if got is not None:
      raise TaskDataError(f"{path}: question {i} needs {N_CHOICE} options "
                          f"(a list of {N_CHOICE} strings), got {got}")
    if not (isinstance(answer, str) and len(answer) == 1 and
            answer in ANSWERS):
      raise TaskDataError(f"{path}: question {i} needs an answer in "
                          f"{ANSWERS[0]}-{ANSWERS[-1]}, got {answer!r}")
  return data


def read_race(data_dir: str, split: str, high_only: bool = False,
              middle_only: bool = False) -> List[RaceExample]:
  """Examples of `split`, middle school first, files in name order."""
  examples = []
  for folder in split_files(split, high_only, middle_only):
    level = folder.rsplit("/", 1)[1]
    for path in text_files(paths.join(data_dir, folder),
                           "RACE layout {train,dev,test}/{middle,high}/*.txt"):
      name = paths.basename(path)
      data = _passage(path)
      for i, answer in enumerate(data["answers"]):
        examples.append(RaceExample(
            f"{os.path.splitext(name)[0]}-{i}", data["article"],
            [qa_text(data["questions"][i], o) for o in data["options"][i]],
            ord(answer) - ord("A"), level))
  return examples
