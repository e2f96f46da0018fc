"""Entity metrics: hand-worked cases (a split entity, a wrong type, IOB1
input, BIOES, empty predictions, sentence ends) and agreement with an
independent conlleval-style count on random tag sequences."""

import numpy as np
import pytest

from xlnet_tf.tasks.token_classification.metrics import entity_metrics

KEYS = ("precision", "recall", "f1", "n_gold", "n_predicted", "n_correct")


def _scores(p, r, f, gold, predicted, correct):
  return dict(zip(KEYS, (p, r, f, gold, predicted, correct)))


def _check(metrics, overall, per_type, accuracy):
  for key, value in _scores(*overall).items():
    assert metrics[key] == pytest.approx(value, abs=1e-12), key
  assert metrics["main"] == metrics["f1"]
  assert metrics["accuracy"] == pytest.approx(accuracy, abs=1e-12)
  assert set(metrics["per_type"]) == set(per_type)
  for type_, values in per_type.items():
    assert metrics["per_type"][type_] == pytest.approx(_scores(*values),
                                                       abs=1e-12), type_


def test_split_entity_and_wrong_type_count_as_wrong():
  gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"],
          ["B-MISC", "O"]]
  # PER right; LOC split in two by a wrong boundary; ORG typed LOC; MISC right.
  pred = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "O", "B-LOC"],
          ["B-MISC", "O"]]
  _check(entity_metrics(gold, pred), (2 / 5, 1 / 2, 4 / 9, 4, 5, 2),
         {"PER": (1, 1, 1, 1, 1, 1), "MISC": (1, 1, 1, 1, 1, 1),
          "LOC": (0, 0, 0, 1, 3, 0), "ORG": (0, 0, 0, 1, 0, 0)}, 7 / 9)


def test_iob1_where_i_starts_an_entity():
  # I- after O (or after another type) starts an entity; B- only separates
  # two adjacent entities of one type.
  gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "I-ORG"]]
  pred = [["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "I-ORG", "O"]]
  metrics = entity_metrics(gold, pred)
  _check(metrics, (1 / 3, 1 / 4, 2 / 7, 4, 3, 1),
         {"PER": (1, 1, 1, 1, 1, 1), "LOC": (0, 0, 0, 2, 1, 0),
          "ORG": (0, 0, 0, 1, 1, 0)}, 5 / 7)
  # The same entities in IOB2 score the same (token accuracy aside).
  gold2 = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-ORG", "I-ORG"]]
  pred2 = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "B-ORG", "O"]]
  metrics2 = entity_metrics(gold2, pred2)
  assert ({k: v for k, v in metrics2.items() if k != "accuracy"}
          == {k: v for k, v in metrics.items() if k != "accuracy"})


def test_bioes():
  gold = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "S-ORG"]]
  pred = [["B-PER", "E-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]]
  _check(entity_metrics(gold, pred), (1 / 3, 1 / 3, 1 / 3, 3, 3, 1),
         {"PER": (0, 0, 0, 1, 1, 0), "LOC": (1 / 2, 1, 2 / 3, 1, 2, 1),
          "ORG": (0, 0, 0, 1, 0, 0)}, 3 / 6)


def test_empty_predictions_score_zero():
  gold = [["B-PER", "I-PER", "O"], ["B-LOC"]]
  pred = [["O", "O", "O"], ["O"]]
  _check(entity_metrics(gold, pred), (0, 0, 0, 2, 0, 0),
         {"PER": (0, 0, 0, 1, 0, 0), "LOC": (0, 0, 0, 1, 0, 0)}, 1 / 4)


def test_no_entities_anywhere_and_no_sentences():
  _check(entity_metrics([["O", "O"], []], [["O", "O"], []]),
         (0, 0, 0, 0, 0, 0), {}, 1.0)
  _check(entity_metrics([], []), (0, 0, 0, 0, 0, 0), {}, 0.0)


def test_entities_end_at_a_sentence_end():
  # An I- opening the next sentence starts a new entity.
  gold = [["O", "B-PER"], ["I-PER", "O"]]
  metrics = entity_metrics(gold, [["O", "B-PER"], ["B-PER", "O"]])
  _check(metrics, (1, 1, 1, 2, 2, 2), {"PER": (1, 1, 1, 2, 2, 2)}, 3 / 4)


def test_tuples_and_numpy_strings_are_sentences_too():
  gold = (("B-PER", "O"), np.array(["B-LOC"]))
  metrics = entity_metrics(gold, [["B-PER", "O"], ["O"]])
  _check(metrics, (1, 1 / 2, 2 / 3, 2, 1, 1),
         {"PER": (1, 1, 1, 1, 1, 1), "LOC": (0, 0, 0, 1, 0, 0)}, 2 / 3)


@pytest.mark.parametrize("gold,pred,message", [
    ([["O", "B-PER"]], [["O"]], "differ in number"),
    ([["O"], ["O"]], [["O"]], "differ in number"),
    ([["O", "PER"]], [["O", "O"]], "gold sentence 0: tag 'PER'"),
    ([["O"]], [["B-"]], "predicted sentence 0: tag 'B-'"),
])
def test_malformed_input_is_refused(gold, pred, message):
  with pytest.raises(ValueError, match=message):
    entity_metrics(gold, pred)


def _conll_entities(sentences):
  """Independent conlleval-style chunking: `{(sentence, start, end, type)}`.

  An entity opens at a non-O tag that is B-/S-, follows O or an E-/S-, or
  follows another type; it runs on while the next tag is I-/E- of its type
  and it has not been closed by an E-/S-."""
  found = set()
  for s, tags in enumerate(sentences):
    parts = [("O", "") if t == "O" else (t[0], t[2:]) for t in tags]
    start = None
    for i, (prefix, type_) in enumerate(parts):
      if prefix == "O":
        continue
      if start is None:
        start = i
      nxt = parts[i + 1] if i + 1 < len(parts) else ("O", "")
      goes_on = (prefix in "BI" and nxt[0] in "IE" and nxt[1] == type_)
      if not goes_on:
        found.add((s, start, i, type_))
        start = None
  return found


def _conll_scores(correct, guessed, gold):
  precision = correct / guessed if guessed else 0.0
  recall = correct / gold if gold else 0.0
  f1 = (2 * precision * recall / (precision + recall)
        if precision + recall else 0.0)
  return _scores(precision, recall, f1, gold, guessed, correct)


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_an_independent_conlleval_count(seed):
  rng = np.random.RandomState(seed)
  alphabet = ["O"] * 6 + [f"{p}-{t}" for p in "BIES"
                          for t in ("PER", "LOC", "ORG")]

  def sentence(n):
    return [alphabet[k] for k in rng.randint(0, len(alphabet), n)]

  gold = [sentence(rng.randint(0, 12)) for _ in range(200)]
  pred = [[tag if rng.rand() < 0.7 else sentence(1)[0] for tag in row]
          for row in gold]
  metrics = entity_metrics(gold, pred)
  g, p = _conll_entities(gold), _conll_entities(pred)
  expected = _conll_scores(len(g & p), len(p), len(g))
  assert {k: metrics[k] for k in KEYS} == pytest.approx(expected, abs=1e-12)
  types = {e[3] for e in g | p}
  assert set(metrics["per_type"]) == types
  for type_ in types:
    gt = {e for e in g if e[3] == type_}
    pt = {e for e in p if e[3] == type_}
    assert metrics["per_type"][type_] == pytest.approx(
        _conll_scores(len(gt & pt), len(pt), len(gt)), abs=1e-12), type_
  tokens = [(a, b) for x, y in zip(gold, pred) for a, b in zip(x, y)]
  assert metrics["accuracy"] == pytest.approx(
      sum(a == b for a, b in tokens) / len(tokens), abs=1e-12)
  assert 0 < metrics["n_correct"] < metrics["n_gold"]
