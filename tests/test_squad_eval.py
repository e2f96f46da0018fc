"""SQuAD postprocessing and the official metrics on hand-computed cases,
and the full-dev ORACLE: gold positions through the postprocessing, default
vs the original's behaviour."""

import dataclasses

import pytest

from data_utils.squad.features import (assign_unique_ids, FeatureSettings,
                                       FeatureStats, Featurizer,
                                       group_by_paragraph, SquadFeature)
from data_utils.squad import evaluate as se


class _Ex:
  def __init__(self, qas_id, text):
    self.qas_id, self.paragraph_text = qas_id, text


def _feature(uid, example_index, spans, max_context=None):
  """A window over pieces with the given character spans."""
  return SquadFeature(
      uid, example_index, 0, [], len(spans), [s for s, _ in spans],
      [e for _, e in spans], max_context or [True] * len(spans), 0, 0, False)


def test_postprocessing_bounds_and_beam():
  text = "Denver beat Carolina 24 10"
  spans = [(0, 5), (7, 10), (12, 19), (21, 22), (24, 25)]
  ex = _Ex("q", text)
  feat = _feature(7, 0, spans)
  # Start 3 ("24"), ends: 4 ("10", the window's last piece), 3, 0.
  result = se.RawResult(7, [-0.1, -2.0], [3, 0], [-0.2, -1.0, -0.5,
                                                  -0.3, -3.0, -9.0],
                        [4, 3, 0, 0, 1, 4], 1.5)
  preds, nbest, odds = se.predict_answers([ex], [feat], {7: result}, 3, 64)
  assert preds == {"q": "24 10"} and odds == {"q": 1.5}
  texts = [n["text"] for n in nbest["q"]]
  assert texts == ["24 10", "24", "Denver"]
  assert sum(n["probability"] for n in nbest["q"]) == pytest.approx(1.0)
  # The original never lets a span touch the last piece (index 4).
  preds, nbest, _ = se.predict_answers([ex], [feat], {7: result}, 3, 64,
                                       original_off_by_one=True)
  assert preds == {"q": "24"}
  assert "24 10" not in [n["text"] for n in nbest["q"]]
  # Max context, answer length, empty beam.
  feat = _feature(7, 0, spans, [True, True, True, False, True])
  preds, _, _ = se.predict_answers([ex], [feat], {7: result}, 3, 64)
  assert preds == {"q": "Denver"}
  preds, _, _ = se.predict_answers([ex], [feat], {7: result}, 3, 1)
  assert preds == {"q": "Denver"}
  preds, nbest, odds = se.predict_answers([ex, _Ex("r", "x")], [feat],
                                          {7: result}, 3, 64)
  assert preds["r"] == "" and nbest["r"][0]["start_log_prob"] == -1e6


def test_postprocessing_windows_and_null_odds():
  text = "aa bb cc dd"
  ex = _Ex("q", text)
  w0 = _feature(1, 0, [(0, 1), (3, 4), (6, 7)], [True, True, False])
  w1 = dataclasses.replace(_feature(2, 0, [(6, 7), (9, 10)]),
                           doc_span_index=1)
  results = {1: se.RawResult(1, [-1.0], [0], [-1.0], [1], 0.5),
             2: se.RawResult(2, [-0.5], [1], [-0.5], [1], -0.7)}
  preds, nbest, odds = se.predict_answers([ex], [w0, w1], results, 5, 64)
  assert preds == {"q": "dd"} and odds == {"q": -0.7}
  assert [n["text"] for n in nbest["q"]] == ["dd", "aa bb"]


def test_official_normalization_and_scores():
  assert se.normalize_answer("The Broncos' (Denver) an  A team!") == \
      "broncos denver team"
  assert se.exact_match("the Denver Broncos.", "Denver Broncos") == 1
  # pred "denver broncos team", gold "broncos": P 1/3, R 1 -> F1 0.5
  assert se.f1_v1("Denver Broncos team", "The Broncos") == pytest.approx(0.5)
  assert se.f1_v1("a", "the") == 0.0 and se.f1_v2("a", "the") == 1.0
  gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["24-10"],
          "q3": ["Levi's Stadium"]}
  preds = {"q1": "the broncos", "q2": "24 10"}   # q3 unanswered
  # q1 EM 1 F1 1; q2 "2410" vs "24 10": EM 0, F1 0; q3 missing: 0.
  assert se.evaluate_v1(gold, preds) == {
      "exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3),
      "total": 3}


def test_v2_no_answer_handling_and_best_threshold():
  gold = {"a": ["Paris"], "b": [], "c": ["in 1990"], "d": []}
  preds = {"a": "Paris", "b": "Lyon", "c": "1990", "d": ""}
  exact, f1 = se.raw_scores_v2(gold, preds)
  assert exact == {"a": 1, "b": 0, "c": 0, "d": 1}
  assert f1 == {"a": 1.0, "b": 0.0, "c": pytest.approx(2 / 3), "d": 1.0}
  # Null odds: answer a (-3) and c (-1) only; b (2) and d (4) say null.
  odds = {"a": -3.0, "b": 2.0, "c": -1.0, "d": 4.0}
  # Increasing odds: a +1 -> 3, c +0 -> 3 (EM), b -1, d +0: best 3/4 at -3.
  assert se.best_threshold(preds, exact, odds, {"a": 1, "b": 0, "c": 1,
                                                "d": 0}) == (75.0, -3.0, 50.0)
  best_f1, thresh, has_f1 = se.best_threshold(
      preds, f1, odds, {"a": True, "b": False, "c": True, "d": False})
  assert best_f1 == pytest.approx(100 * (2 + 1 + 2 / 3) / 4)
  assert thresh == -1.0 and has_f1 == pytest.approx(100 * (1 + 2 / 3) / 2)
  m = se.squad_metrics(gold, preds, odds, "2.0")
  assert m["exact"] == 50.0 and m["HasAns_exact"] == 50.0
  assert m["NoAns_exact"] == 50.0 and m["NoAns_total"] == 2
  assert m["best_exact"] == 75.0 and m["best_exact_thresh"] == -3.0
  assert se.apply_threshold(preds, odds, m["best_f1_thresh"]) == {
      "a": "Paris", "b": "", "c": "1990", "d": ""}
  # v1.1: the official v1.1 numbers and the original's keys.
  m = se.squad_metrics({"a": ["Paris", "paris"]}, {"a": "Paris"},
                       {"a": 0.3}, "1.1")
  assert m["exact_match"] == m["f1"] == m["best_f1"] == 100.0
  assert m["has_ans_f1"] == 100.0 and m["best_f1_thresh"] == 0.3


# ORACLE ---------------------------------------------------------------------
def _gold_results(features):
  """The gold start / end of every window as the model's top beam."""
  return {f.unique_id: se.RawResult(f.unique_id, [0.0], [f.start_position],
                                    [0.0], [f.end_position], 0.0)
          for f in features}


@pytest.fixture(scope="module")
def oracle(squad_dev, sp_tokenizer):
  """Full-dev features with answers for the default pieces, the class split
  without digits, and the original pieces; each paragraph is featurized for
  all three in turn so its alignment is computed once."""
  settings = {
      "default": FeatureSettings(512, 128, 64),
      "classes": FeatureSettings(512, 128, 64, split_digits=False),
      "original": FeatureSettings(512, 128, 64,
                                  original_piece_snapping=True)}
  featurizers = {k: Featurizer(sp_tokenizer, s) for k, s in settings.items()}
  feats = {k: [] for k in settings}
  stats = {k: FeatureStats() for k in settings}
  for group in group_by_paragraph(squad_dev.examples):
    for k, featurizer in featurizers.items():
      f, s = featurizer.paragraph_features(group, is_training=False)
      feats[k].extend(f)
      stats[k].add(s)
  for k in feats:
    assign_unique_ids(feats[k])
  return feats, stats


def _oracle_scores(squad_dev, features, original_off_by_one):
  preds, _, _ = se.predict_answers(squad_dev.examples, features,
                                   _gold_results(features), 5, 64,
                                   original_off_by_one)
  gold = {e.qas_id: e.answers for e in squad_dev.examples}
  lost = [q for q in gold if not max(se.exact_match(preds[q], a)
                                     for a in gold[q])]
  return se.evaluate_v1(gold, preds), lost


def test_oracle_full_dev(squad_dev, oracle):
  """Gold positions (first listed answer) through the postprocessing, scored
  against all gold answers. Measured:
    original (both flags)        EM 99.234 F1 99.282, 81 lost (59 to the
                                 off-by-one, 22 inside a piece)
    bound fixed, original pieces EM 99.792 F1 99.840, 22 lost
    bound fixed, class split     EM 99.792 F1 99.840, 22 lost (the split
                                 points it fixes are punctuation, which the
                                 official normalization ignores anyway)
    default (classes + digits)   EM 99.886 F1 99.927, 12 lost (inside words:
                                 "gold" of "▁golden", "L" of "▁NFL", or
                                 answers starting one letter early)"""
  feats, stats = oracle
  for k in feats:
    assert stats[k].examples == 10570 and stats[k].unaligned_examples == 0
    assert stats[k].unaligned_answers == 0
  assert [stats[k].snapped_answers for k in ("original", "classes",
                                             "default")] == [39, 27, 17]
  original, lost_original = _oracle_scores(squad_dev, feats["original"], True)
  default, lost_default = _oracle_scores(squad_dev, feats["default"], False)
  print(f"\noracle original: {original} lost {len(lost_original)}"
        f"\noracle default: {default} lost {len(lost_default)}")
  assert 99.20 <= original["exact_match"] <= 99.30
  assert 99.25 <= original["f1"] <= 99.45
  assert 75 <= len(lost_original) <= 85
  assert default["exact_match"] >= 99.86 and default["f1"] >= 99.90
  assert len(lost_default) <= 12
  assert set(lost_default) <= set(lost_original)
  # Each fix alone.
  bound_only, lost_bound = _oracle_scores(squad_dev, feats["original"], False)
  classes, lost_classes = _oracle_scores(squad_dev, feats["classes"], False)
  assert len(lost_bound) == len(lost_classes) == 22
  assert bound_only["exact_match"] == classes["exact_match"] < \
      default["exact_match"]
