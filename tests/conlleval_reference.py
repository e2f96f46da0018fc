"""An independent scorer of CoNLL-layout prediction files, written from the
description of the CoNLL-2000 `conlleval` script (its default settings:
space-separated columns, the gold tag second to last and the guess last,
`-X-` as a boundary word, chunks read from IOB1/IOB2/IOBES tags).

It shares no code with `xlnet_tf.tasks.token_classification.metrics` nor with `seqeval`, so the
tests can score the files `run_ner.py` writes as conlleval would.
"""

from typing import Dict, List, Tuple


def _parts(tag: str) -> Tuple[str, str]:
  if tag == "O" or "-" not in tag:
    return "O", ""
  return tag[0], tag[2:]


def _ends(prev: str, prev_type: str, tag: str, type_: str) -> bool:
  """Does a chunk end between the previous tag and this one?"""
  if prev in ("E", "S"):
    return True
  if prev == "B":
    return tag in ("B", "S", "O") or type_ != prev_type
  if prev == "I":
    return tag in ("B", "S", "O") or type_ != prev_type
  return False


def _starts(prev: str, prev_type: str, tag: str, type_: str) -> bool:
  """Does a chunk start at this tag?"""
  if tag in ("B", "S"):
    return True
  if tag in ("I", "E"):
    return prev in ("E", "S", "O") or type_ != prev_type
  return False


def score_file(path: str) -> Dict[str, object]:
  """`{"precision", "recall", "f1", "accuracy", "per_type": {type: f1}}`
  (fractions) of a prediction file."""
  correct = found_gold = found_guess = 0
  tokens = token_correct = 0
  per: Dict[str, List[int]] = {}   # type -> [correct, gold, guess]
  in_correct = False
  last_gold = last_guess = "O"
  last_gold_type = last_guess_type = ""
  with open(path, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f] + [""]
  for line in lines:
    cols = line.split()
    if not cols or cols[0] == "-X-":
      gold, gold_type, guess, guess_type = "O", "", "O", ""
      boundary = True
    else:
      gold, gold_type = _parts(cols[-2])
      guess, guess_type = _parts(cols[-1])
      boundary = False
    gold_ends = _ends(last_gold, last_gold_type, gold, gold_type)
    guess_ends = _ends(last_guess, last_guess_type, guess, guess_type)
    gold_starts = _starts(last_gold, last_gold_type, gold, gold_type)
    guess_starts = _starts(last_guess, last_guess_type, guess, guess_type)
    if in_correct:
      if gold_ends and guess_ends and last_gold_type == last_guess_type:
        in_correct = False
        correct += 1
        per.setdefault(last_gold_type, [0, 0, 0])[0] += 1
      elif gold_ends != guess_ends or gold_type != guess_type:
        in_correct = False
    if gold_starts and guess_starts and gold_type == guess_type:
      in_correct = True
    if gold_starts:
      found_gold += 1
      per.setdefault(gold_type, [0, 0, 0])[1] += 1
    if guess_starts:
      found_guess += 1
      per.setdefault(guess_type, [0, 0, 0])[2] += 1
    if not boundary:
      tokens += 1
      token_correct += cols[-2] == cols[-1]
    last_gold, last_gold_type = gold, gold_type
    last_guess, last_guess_type = guess, guess_type

  def prf(c, g, p):
    precision = c / p if p else 0.0
    recall = c / g if g else 0.0
    f1 = 2 * precision * recall / (precision + recall) \
        if precision + recall else 0.0
    return precision, recall, f1

  precision, recall, f1 = prf(correct, found_gold, found_guess)
  return {"precision": precision, "recall": recall, "f1": f1,
          "accuracy": token_correct / tokens if tokens else 0.0,
          "per_type": {t: prf(*c)[2] for t, c in per.items()}}
