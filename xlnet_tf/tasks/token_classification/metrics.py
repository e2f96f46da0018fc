"""Entity-level scores of tagged sentences, as `conlleval` computes them,
through the `seqeval` library (its default mode follows conlleval).

An entity is a maximal chunk read from IOB1, IOB2 or BIOES tags the way
conlleval reads them (an `I-X` after `O` or after another type starts an
entity); a predicted entity is correct when its type and both boundaries
equal a gold entity's. Precision, recall and F1 are 0 where their
denominator is 0, as in conlleval. Token accuracy compares whole tags
(`B-PER` differs from `I-PER`), `O` included, as conlleval's "accuracy".
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from seqeval.metrics import accuracy_score
from seqeval.metrics.sequence_labeling import (get_entities,
                                               precision_recall_fscore_support)

_PREFIXES = ("B-", "I-", "E-", "S-")


def _as_lists(tags: Sequence[Sequence[str]], side: str) -> List[List[str]]:
  """A list of lists of str (seqeval only reads nested *lists* as
  sentences); a tag that is neither `O` nor `<B|I|E|S>-<type>` is refused,
  since seqeval would read its first letter as a prefix."""
  out = []
  for i, sentence in enumerate(tags):
    row = [str(tag) for tag in sentence]
    for tag in row:
      if tag != "O" and not (tag[:2] in _PREFIXES and len(tag) > 2):
        raise ValueError(f"{side} sentence {i}: tag {tag!r} is neither O nor "
                         "B-/I-/E-/S-<type>")
    out.append(row)
  return out


def _entities(tags: List[List[str]]) -> Dict[str, set]:
  """type -> {(start, end)} over the sentences laid end to end."""
  found: Dict[str, set] = {}
  for type_, start, end in get_entities(tags):
    found.setdefault(type_, set()).add((start, end))
  return found


def _scores(precision, recall, f1, gold, predicted, correct) -> dict:
  return {"precision": float(precision), "recall": float(recall),
          "f1": float(f1), "n_gold": int(gold), "n_predicted": int(predicted),
          "n_correct": int(correct)}


def entity_metrics(gold_tags: Sequence[Sequence[str]],
                   predicted_tags: Sequence[Sequence[str]]) -> dict:
  """`gold_tags`, `predicted_tags`: one list of tag strings per sentence,
  in the same shape (entities never cross a sentence end).

  Returns a plain dict: `precision`, `recall`, `f1` (overall, micro over
  entities, fractions in [0, 1]), `n_gold`, `n_predicted`, `n_correct`
  (entity counts), `accuracy` (tokens), `main` (= f1), and `per_type`:
  type -> the same six keys, for every type in gold or predictions.

  Example:
    >>> m = entity_metrics([["B-PER", "I-PER", "O", "B-LOC"]],
    ...                    [["B-PER", "I-PER", "O", "B-ORG"]])
    >>> m["precision"], m["recall"], m["per_type"]["PER"]["f1"], m["accuracy"]
    (0.5, 0.5, 1.0, 0.75)
  """
  gold = _as_lists(gold_tags, "gold")
  predicted = _as_lists(predicted_tags, "predicted")
  if [len(s) for s in gold] != [len(s) for s in predicted]:
    raise ValueError("gold and predicted tags differ in number of sentences "
                     "or of words in a sentence")
  if not gold:
    # seqeval refuses an empty list; one empty sentence means the same.
    gold = predicted = [[]]
  gold_entities, predicted_entities = _entities(gold), _entities(predicted)
  counts = {}
  for type_ in set(gold_entities) | set(predicted_entities):
    g = gold_entities.get(type_, set())
    p = predicted_entities.get(type_, set())
    counts[type_] = (len(g), len(p), len(g & p))
  # seqeval orders the per-type arrays by sorted type name.
  types = sorted(counts)
  per_type = dict(zip(types, zip(*precision_recall_fscore_support(
      gold, predicted, average=None, zero_division=0)[:3])))
  overall = precision_recall_fscore_support(gold, predicted, average="micro",
                                            zero_division=0)[:3]
  totals = [sum(c[k] for c in counts.values()) for k in range(3)]
  n_tokens = sum(len(s) for s in gold)
  out = _scores(*overall, *totals)
  out.update(
      accuracy=float(accuracy_score(gold, predicted)) if n_tokens else 0.0,
      main=out["f1"],
      per_type={t: _scores(*per_type[t], *counts[t]) for t in types})
  return out


def majority_tags(words: Sequence[Sequence[str]],
                  tags: Sequence[Sequence[str]]) -> Dict[str, str]:
  """The baseline's table: each word's most frequent tag (`words`, `tags`:
  one list per sentence), the earliest seen on a tie.

  Example:
    >>> majority_tags([["EU", "x", "EU"]], [["B-ORG", "O", "B-LOC"]])
    {'EU': 'B-ORG', 'x': 'O'}
  """
  counts: Dict[str, Dict[str, int]] = {}
  for sentence_words, sentence_tags in zip(words, tags):
    for word, tag in zip(sentence_words, sentence_tags):
      seen = counts.setdefault(word, {})
      seen[tag] = seen.get(tag, 0) + 1
  # dicts keep insertion order and max() keeps the first maximum.
  return {w: max(seen, key=seen.get) for w, seen in counts.items()}


def majority_baseline_tags(table: Dict[str, str],
                           words: Sequence[Sequence[str]]
                           ) -> List[List[str]]:
  """Tags of the majority-per-word baseline: each word's tag in `table`
  (`majority_tags` of the training data), `O` for a word not in it.

  Example:
    >>> majority_baseline_tags({"EU": "B-ORG"}, [["EU", "says"]])
    [['B-ORG', 'O']]
  """
  return [[table.get(w, "O") for w in sentence] for sentence in words]
