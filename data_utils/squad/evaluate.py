"""SQuAD answers from model outputs, and the official metrics.

Postprocessing (the original `write_predictions`): for every window of a
question, the beam of `start_n_top` starts x `end_n_top` ends
(`start_top_log_probs / start_top_index [S]`, `end_top_log_probs /
end_top_index [S * E]`, entry `s * E + e` = the e-th end of the s-th start)
gives candidate spans; a span must lie in the window's paragraph pieces,
start in a piece whose max-context window this is, end at or after its start
and be at most `max_answer_length` pieces long. Candidates of all windows are
ranked by start + end log-prob; the text is the raw paragraph between the
first piece's first and the last piece's last character. The null score of
a question is the smallest answer-class logit (`cls_logits`) of its windows.

The original drops spans that touch a window's LAST paragraph piece (it
tests `index >= paragraph_len - 1`); spans may end there by default and
`original_off_by_one=True` restores the original.

Metrics: the official SQuAD v1.1 script (EM / F1 with its answer
normalization, max over the gold answers, a missing prediction scores 0) and
v2.0 (empty gold = no answer, HasAns / NoAns splits), and the original's
best null-threshold search (`squad_utils.find_all_best_thresh_v2`).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import string
from typing import Dict, List, Mapping, Sequence, Tuple


@dataclasses.dataclass
class RawResult:
  """Model outputs of one feature (numpy arrays or lists)."""
  unique_id: int
  start_top_log_probs: Sequence[float]
  start_top_index: Sequence[int]
  end_top_log_probs: Sequence[float]
  end_top_index: Sequence[int]
  cls_logits: float


def softmax(scores: Sequence[float]) -> List[float]:
  """Example:
    >>> [round(p, 3) for p in softmax([0.0, math.log(3.0)])]
    [0.25, 0.75]
  """
  if not scores:
    return []
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [e / total for e in exps]


def predict_answers(examples, features, results: Mapping[int, RawResult],
                    n_best_size: int = 5, max_answer_length: int = 64,
                    original_off_by_one: bool = False
                    ) -> Tuple[Dict[str, str], Dict[str, list],
                               Dict[str, float]]:
  """`(predictions, nbest, null_odds)` keyed by question id.

  `features` carry `example_index`, `unique_id`, `paragraph_len`,
  `tok_start_to_orig_index`, `tok_end_to_orig_index`,
  `token_is_max_context`; `results` maps unique ids to `RawResult`s. A
  question without a valid span (or without features) predicts "".
  """
  by_example: Dict[int, list] = collections.defaultdict(list)
  for feature in features:
    by_example[feature.example_index].append(feature)
  # The original bound: a span may not touch the last paragraph piece.
  slack = 1 if original_off_by_one else 0
  predictions: Dict[str, str] = collections.OrderedDict()
  nbest_json: Dict[str, list] = collections.OrderedDict()
  null_odds: Dict[str, float] = collections.OrderedDict()
  for example_index, example in enumerate(examples):
    candidates = []
    score_null = 1000000.0
    for feature in by_example.get(example_index, []):
      result = results[feature.unique_id]
      score_null = min(score_null, float(result.cls_logits))
      n_start = len(result.start_top_index)
      n_end = len(result.end_top_index) // max(n_start, 1)
      limit = feature.paragraph_len - slack
      for i in range(n_start):
        start = int(result.start_top_index[i])
        if start >= limit or not feature.token_is_max_context[start]:
          continue
        for j in range(n_end):
          end = int(result.end_top_index[i * n_end + j])
          if end >= limit or end < start or \
              end - start + 1 > max_answer_length:
            continue
          candidates.append((float(result.start_top_log_probs[i]) +
                             float(result.end_top_log_probs[i * n_end + j]),
                             float(result.start_top_log_probs[i]),
                             float(result.end_top_log_probs[i * n_end + j]),
                             feature, start, end))
    # Stable: equal scores keep window/beam order, as the original's sort.
    candidates.sort(key=lambda c: c[0], reverse=True)
    seen = set()
    nbest = []
    for _, start_lp, end_lp, feature, start, end in candidates:
      if len(nbest) >= n_best_size:
        break
      first = feature.tok_start_to_orig_index[start]
      last = feature.tok_end_to_orig_index[end]
      text = example.paragraph_text[first:last + 1].strip()
      if text in seen:
        continue
      seen.add(text)
      nbest.append((text, start_lp, end_lp))
    if not nbest:
      nbest.append(("", -1e6, -1e6))
    probs = softmax([s + e for _, s, e in nbest])
    nbest_json[example.qas_id] = [
        collections.OrderedDict(text=t, probability=p, start_log_prob=s,
                                end_log_prob=e)
        for (t, s, e), p in zip(nbest, probs)]
    # Always the best span; the null decision is left to the threshold.
    predictions[example.qas_id] = nbest[0][0]
    null_odds[example.qas_id] = score_null
  return predictions, nbest_json, null_odds


# Official metrics -----------------------------------------------------------
def normalize_answer(text: str) -> str:
  """Lower case, no punctuation, no articles, single spaces (official).

  Example:
    >>> normalize_answer("The  Denver Broncos!")
    'denver broncos'
  """
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


_PUNCTUATION = frozenset(string.punctuation)


def exact_match(prediction: str, gold: str) -> int:
  return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction: str, gold: str) -> float:
  """Token F1 of the v1.1 script (0 when nothing is shared).

  Example:
    >>> round(f1_v1("the Denver Broncos team", "Denver Broncos"), 4)
    0.8
  """
  pred = normalize_answer(prediction).split()
  ref = normalize_answer(gold).split()
  same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred), same / len(ref)
  return 2 * precision * recall / (precision + recall)


def f1_v2(prediction: str, gold: str) -> float:
  """Token F1 of the v2.0 script: an empty side scores 1 only if both are.

  Example:
    >>> f1_v2("", ""), f1_v2("", "Denver")
    (1.0, 0.0)
  """
  pred = normalize_answer(prediction).split() if prediction else []
  ref = normalize_answer(gold).split() if gold else []
  if not pred or not ref:
    return float(pred == ref)
  return f1_v1(prediction, gold)


def evaluate_v1(gold: Mapping[str, Sequence[str]],
                predictions: Mapping[str, str]) -> Dict[str, float]:
  """The v1.1 script: `exact_match` and `f1` in percent over every gold
  question (a missing prediction scores 0).

  Example:
    >>> evaluate_v1({"q1": ["Paris"], "q2": ["4", "four"]},
    ...             {"q1": "paris", "q2": "five"})
    {'exact_match': 50.0, 'f1': 50.0, 'total': 2}
  """
  em = f1 = 0.0
  for qid, answers in gold.items():
    if qid not in predictions:
      continue
    em += max(exact_match(predictions[qid], a) for a in answers)
    f1 += max(f1_v1(predictions[qid], a) for a in answers)
  total = len(gold)
  return {"exact_match": 100.0 * em / max(total, 1),
          "f1": 100.0 * f1 / max(total, 1), "total": total}


def raw_scores_v2(gold: Mapping[str, Sequence[str]],
                  predictions: Mapping[str, str]
                  ) -> Tuple[Dict[str, int], Dict[str, float]]:
  """Per-question EM and F1 of the v2.0 script (missing ones skipped)."""
  exact, f1 = {}, {}
  for qid, answers in gold.items():
    if qid not in predictions:
      continue
    answers = [a for a in answers if normalize_answer(a)] or [""]
    exact[qid] = max(exact_match(predictions[qid], a) for a in answers)
    f1[qid] = max(f1_v2(predictions[qid], a) for a in answers)
  return exact, f1


def _mean(scores: Mapping[str, float], qids) -> float:
  qids = list(qids)
  return 100.0 * sum(scores[q] for q in qids) / len(qids) if qids else 0.0


def best_threshold(predictions: Mapping[str, str],
                   scores: Mapping[str, float],
                   null_odds: Mapping[str, float],
                   has_answer: Mapping[str, bool]
                   ) -> Tuple[float, float, float]:
  """The original `find_best_thresh_v2`: start from "no answer" everywhere,
  answer questions in increasing null odds and keep the best total.
  Returns `(best score %, threshold, has-answer score %)`: predict no
  answer when null odds > threshold. The original returns the has-answer
  score as a fraction; it is a percentage here like every other score.

  Example:
    >>> best_threshold({"a": "x", "b": "y"}, {"a": 1.0, "b": 0.0},
    ...                {"a": -2.0, "b": 3.0}, {"a": True, "b": False})
    (100.0, -2.0, 100.0)
  """
  score = best = float(sum(1 for q in has_answer if not has_answer[q]))
  thresh = 0.0
  for qid in sorted(null_odds, key=lambda q: null_odds[q]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      score += scores[qid]
    elif predictions[qid]:
      score -= 1
    if score > best:
      best, thresh = score, null_odds[qid]
  has = [q for q in has_answer if has_answer[q]]
  has_score = sum(scores[q] for q in has if q in scores)
  return (100.0 * best / max(len(scores), 1), thresh,
          100.0 * has_score / max(len(has), 1))


def squad_metrics(gold: Mapping[str, Sequence[str]],
                  predictions: Mapping[str, str],
                  null_odds: Mapping[str, float],
                  version: str = "1.1") -> Dict[str, float]:
  """Everything the original reports, plus the official script's numbers.

  Always: `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`,
  `has_ans_exact`, `has_ans_f1` (the original's `find_all_best_thresh_v2`).
  v1.1: `exact_match`, `f1` (official v1.1). v2.0: `exact`, `f1` (official
  v2.0, every question answered), `HasAns_*`, `NoAns_*`.
  """
  has_answer = {q: bool(answers) for q, answers in gold.items()}
  exact, f1 = raw_scores_v2(gold, predictions)
  out: Dict[str, float] = {}
  out["best_exact"], out["best_exact_thresh"], out["has_ans_exact"] = \
      best_threshold(predictions, exact, null_odds, has_answer)
  out["best_f1"], out["best_f1_thresh"], out["has_ans_f1"] = \
      best_threshold(predictions, f1, null_odds, has_answer)
  if version.startswith("2"):
    out["exact"] = _mean(exact, exact)
    out["f1"] = _mean(f1, f1)
    out["total"] = len(exact)
    for name, want in (("HasAns", True), ("NoAns", False)):
      qids = [q for q in exact if has_answer[q] == want]
      if qids:
        out[f"{name}_exact"] = _mean(exact, qids)
        out[f"{name}_f1"] = _mean(f1, qids)
        out[f"{name}_total"] = len(qids)
  else:
    out.update(evaluate_v1(gold, predictions))
  return out


def apply_threshold(predictions: Mapping[str, str],
                    null_odds: Mapping[str, float], threshold: float
                    ) -> Dict[str, str]:
  """Predictions with "" where the null odds exceed `threshold`.

  Example:
    >>> apply_threshold({"a": "x", "b": "y"}, {"a": 0.5, "b": -1.0}, 0.0)
    {'a': '', 'b': 'y'}
  """
  return {q: "" if null_odds[q] > threshold else text
          for q, text in predictions.items()}
