"""SQuAD v1.1 / v2.0 reader.

The official JSON (`data[].paragraphs[].{context, qas[]}`, each qa with
`id`, `question`, `answers[{text, answer_start}]` and, in v2.0,
`is_impossible`). One `SquadExample` per question; training positions come
from the first listed answer, every answer text is kept for evaluation.
Malformed files raise `SquadDataError` (one line naming the file and what is
wrong).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from absl import logging

from data_utils import paths
from data_utils.errors import UserError
from data_utils.text_files import read_json


class SquadDataError(UserError):
  """A SQuAD file cannot be used; the message names the file and the fault."""


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question_text: str
  paragraph_text: str
  paragraph_index: int              # paragraphs are aligned once, by index
  answers: List[str]                # every gold text (evaluation)
  orig_answer_text: str = ""        # first answer: training positions
  start_position: int = -1          # its character offset, -1 = none
  is_impossible: bool = False


@dataclasses.dataclass
class SquadData:
  path: str
  version: str                      # "1.1" or "2.0" (which official metric)
  examples: List[SquadExample]
  labeled: bool = True              # every question has answers or is
                                    # marked impossible: metrics apply

  def gold(self) -> Dict[str, List[str]]:
    """Question id -> gold texts ([] = no answer), for the metrics."""
    return {e.qas_id: [] if e.is_impossible else list(e.answers)
            for e in self.examples}


def _require(cond: bool, path: str, where: str, what: str) -> None:
  if not cond:
    raise SquadDataError(f"{path}: {where}: {what}")


def read_squad(path: str, is_training: bool = False) -> SquadData:
  """Questions of a SQuAD v1.1 / v2.0 file, in file order.

  `is_training` requires an answer for every question not marked
  `is_impossible`; otherwise a question without either leaves the file
  `labeled=False` (predictions only).
  """
  if not paths.isfile(path):
    raise SquadDataError(f"{path}: no such file")
  raw = read_json(path, SquadDataError)
  if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
    raise SquadDataError(f"{path}: expected a JSON object with a 'data' list "
                         "of articles (the SQuAD layout)")
  examples: List[SquadExample] = []
  labeled = True
  v2 = str(raw.get("version", "")).lstrip("v").startswith("2")
  n_paragraph = 0
  seen_ids = set()
  mismatched: List[str] = []   # ids of answers not found at answer_start
  for a, article in enumerate(raw["data"]):
    _require(isinstance(article, dict) and
             isinstance(article.get("paragraphs"), list), path,
             f"article {a}", "expected an object with a 'paragraphs' list")
    for p, para in enumerate(article["paragraphs"]):
      where = f"article {a} paragraph {p}"
      _require(isinstance(para, dict) and isinstance(para.get("context"), str)
               and isinstance(para.get("qas"), list), path, where,
               "expected an object with 'context' (string) and 'qas' (list)")
      context = para["context"]
      for q, qa in enumerate(para["qas"]):
        qwhere = f"{where} question {q}"
        _require(isinstance(qa, dict), path, qwhere, "expected an object")
        for key, kind in (("id", str), ("question", str), ("answers", list)):
          _require(isinstance(qa.get(key), kind), path, qwhere,
                   f"missing or bad '{key}' (expected {kind.__name__})")
        # Predictions and metrics are keyed by id: a repeat would be lost.
        _require(qa["id"] not in seen_ids, path, qwhere,
                 f"duplicate question id {qa['id']!r} (ids must be unique)")
        seen_ids.add(qa["id"])
        qwhere = f"question {qa['id']}"
        texts, starts = [], []
        for answer in qa["answers"]:
          _require(isinstance(answer, dict) and
                   isinstance(answer.get("text"), str) and
                   isinstance(answer.get("answer_start"), int), path, qwhere,
                   "an answer needs 'text' (string) and 'answer_start' (int)")
          start, text = answer["answer_start"], answer["text"]
          _require(0 <= start and start + len(text) <= len(context), path,
                   qwhere, f"answer_start {start} + {len(text)} characters "
                   f"is outside its context ({len(context)} characters)")
          if context[start:start + len(text)] != text:
            mismatched.append(qa["id"])
          texts.append(text)
          starts.append(start)
        if "is_impossible" in qa:
          v2 = True
        impossible = bool(qa.get("is_impossible", False))
        if not texts and not impossible:
          if is_training:
            raise SquadDataError(f"{path}: {qwhere}: no answer and not "
                                 "marked is_impossible")
          labeled = False   # a question to answer, nothing to score
        example = SquadExample(qa["id"], qa["question"], context, n_paragraph,
                               texts, is_impossible=impossible)
        if texts and not impossible:
          example.orig_answer_text, example.start_position = texts[0], \
              starts[0]
        examples.append(example)
      n_paragraph += 1
  if is_training and not examples:
    raise SquadDataError(f"{path}: no question")
  if mismatched:
    # Training positions come from answer_start: a shifted offset trains on
    # the wrong span. Counted, not fatal: the text still scores predictions.
    first = list(dict.fromkeys(mismatched))[:3]
    logging.warning("%s: %d answers do not match the context at "
                    "answer_start (first: %s)", path, len(mismatched),
                    ", ".join(first))
  return SquadData(path, "2.0" if v2 else "1.1", examples, labeled)
