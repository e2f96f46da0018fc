"""SQuAD: reader (v1.1 dev, v2.0 records built here, bad files), the
alignment against a transcription of the original, feature invariants on
real paragraphs, golden QA-head outputs through the task and the SavedModel,
postprocessing and official metrics on hand-computed cases, the full-dev
ORACLE (gold positions through the postprocessing, default vs the original's
behaviour) and a tiny end-to-end run of run_squad.py."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import xlnet_tf as xt
from data_utils import squad_data as sd
from data_utils import squad_eval as se
from data_utils.tokenization import (CLS_ID, SEP_ID, SPIECE_UNDERLINE,
                                     SentencePieceTokenizer, preprocess_text)
from conftest import assert_close, spiece_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tok(shared):
  return SentencePieceTokenizer(spiece_path(shared))


@pytest.fixture(scope="module")
def dev_path(shared):
  return os.path.join(shared, "data", "squad", "dev-v1.1.json")


@pytest.fixture(scope="module")
def dev(dev_path):
  return sd.read_squad(dev_path)


def _write(path, data):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f)
  return str(path)


def _squad(paragraphs, version="v2.0"):
  return {"version": version, "data": [{"title": "t",
                                        "paragraphs": paragraphs}]}


# Reader ---------------------------------------------------------------------
def test_read_dev_v11(dev, dev_path):
  assert dev.version == "1.1" and dev.labeled
  assert len(dev.examples) == 10570
  assert len({e.paragraph_index for e in dev.examples}) == 2067
  with open(dev_path) as f:
    raw = json.load(f)
  qa = raw["data"][0]["paragraphs"][0]["qas"][0]
  first = dev.examples[0]
  assert first.qas_id == qa["id"] and first.answers == [
      a["text"] for a in qa["answers"]]
  assert not any(e.is_impossible for e in dev.examples)
  for e in dev.examples[::97]:
    assert e.paragraph_text[e.start_position:e.start_position + len(
        e.orig_answer_text)] == e.orig_answer_text
  assert sum(len(e.answers) > 1 for e in dev.examples) > 9000


def test_read_v2_records(tmp_path):
  context = "The Normans gave their name to Normandy in the 10th century."
  path = _write(tmp_path / "v2.json", _squad([{"context": context, "qas": [
      {"id": "a", "question": "Who named Normandy?", "is_impossible": False,
       "answers": [{"text": "The Normans", "answer_start": 0}]},
      {"id": "b", "question": "Who named Paris?", "is_impossible": True,
       "answers": [], "plausible_answers": [
           {"text": "Normans", "answer_start": 4}]},
  ]}]))
  data = sd.read_squad(path, is_training=True)
  assert data.version == "2.0" and data.labeled
  a, b = data.examples
  assert not a.is_impossible and a.start_position == 0
  assert b.is_impossible and b.start_position == -1 and b.answers == []
  assert data.gold() == {"a": ["The Normans"], "b": []}


def test_unlabeled_questions_predict_only(tmp_path):
  path = _write(tmp_path / "q.json", _squad([{"context": "Some text.", "qas": [
      {"id": "q", "question": "What?", "answers": []}]}], "1.1"))
  assert not sd.read_squad(path).labeled
  with pytest.raises(sd.SquadDataError, match="no answer and not marked"):
    sd.read_squad(path, is_training=True)


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
    path = _write(tmp_path / "bad.json", content)
  with pytest.raises(sd.SquadDataError, match=message) as info:
    sd.read_squad(path)
  assert "\n" not in str(info.value)


# Alignment ------------------------------------------------------------------
def _original_alignment(text, pieces):
  """The original run_squad.py alignment, transcribed: dense LCS table,
  `g` moves in a dict, `preprocess_text` per cell, `_convert_index`."""
  starts, ends, chartok_to_tok = [], [], []
  count = 0
  for t, piece in enumerate(pieces):
    chartok_to_tok += [t] * len(piece)
    starts.append(count)
    count += len(piece)
    ends.append(count - 1)
  cat = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
  n, m = len(text), len(cat)
  f = np.zeros((max(n, 1024), max(m, 1024)), np.float32)
  g = {}

  def lcs(max_dist):
    f.fill(0)
    g.clear()
    for i in range(n):
      for j in range(i - max_dist, i + max_dist):
        if j >= m or j < 0:
          continue
        if i > 0:
          g[(i, j)] = 0
          f[i, j] = f[i - 1, j]
        if j > 0 and f[i, j - 1] > f[i, j]:
          g[(i, j)] = 1
          f[i, j] = f[i, j - 1]
        f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
        if (preprocess_text(text[i], remove_space=False) == cat[j]
            and f_prev + 1 > f[i, j]):
          g[(i, j)] = 2
          f[i, j] = f_prev + 1
  max_dist = abs(n - m) + 5
  for _ in range(2):
    lcs(max_dist)
    if f[n - 1, m - 1] > 0.8 * n:
      break
    max_dist *= 2
  o2c, c2o = [None] * n, [None] * m
  i, j = n - 1, m - 1
  while i >= 0 and j >= 0 and (i, j) in g:
    if g[(i, j)] == 2:
      o2c[i], c2o[j] = j, i
      i, j = i - 1, j - 1
    elif g[(i, j)] == 1:
      j -= 1
    else:
      i -= 1
  if all(v is None for v in o2c) or f[n - 1, m - 1] < 0.8 * n:
    return None

  def convert(index, pos, limit=None, is_start=True):
    if index[pos] is not None:
      return index[pos]
    rear = front = pos
    while rear < len(index) - 1 and index[rear] is None:
      rear += 1
    while front > 0 and index[front] is None:
      front -= 1
    if index[front] is None:
      if index[rear] >= 1:
        return 0 if is_start else index[rear] - 1
      return index[rear]
    if index[rear] is None:
      if limit is not None and index[front] < limit - 1:
        return index[front] + 1 if is_start else limit - 1
      return index[front]
    if is_start:
      return index[front] + 1 if index[rear] > index[front] + 1 else \
          index[rear]
    return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]

  return {"start": [convert(c2o, s, n, True) for s in starts],
          "end": [convert(c2o, e, n, False) for e in ends],
          "answer": lambda s, text_: (
              chartok_to_tok[convert(o2c, s, is_start=True)],
              chartok_to_tok[convert(o2c, s + len(text_) - 1,
                                     is_start=False)])}


def _sample_paragraphs(dev, n_plain=16):
  """Paragraph index -> its examples: non-ASCII ones, the longest, and the
  first few."""
  by_paragraph = {}
  for e in dev.examples:
    by_paragraph.setdefault(e.paragraph_index, []).append(e)
  texts = {k: v[0].paragraph_text for k, v in by_paragraph.items()}
  unicode_ = [k for k, t in texts.items() if any(ord(c) > 127 for c in t)]
  longest = sorted(texts, key=lambda k: -len(texts[k]))
  picks = unicode_[:20] + longest[:4] + list(by_paragraph)[:n_plain]
  return {k: by_paragraph[k] for k in dict.fromkeys(picks)}


def test_alignment_equals_the_original(dev, tok):
  """Same piece -> character spans and answer pieces as the original's LCS
  on real paragraphs (the whole dev set was checked the same way)."""
  checked = 0
  for examples in _sample_paragraphs(dev).values():
    text = examples[0].paragraph_text
    pieces = tok.encode_pieces(text)
    want = _original_alignment(text, pieces)
    got = sd.align_paragraph(text, pieces, [0] * len(pieces))
    assert (want is None) == (got is None)
    if want is None:
      continue
    assert got.tok_start_to_orig == want["start"]
    assert got.tok_end_to_orig == want["end"]
    for e in examples:
      assert got.answer_pieces(e.start_position, e.orig_answer_text) == \
          want["answer"](e.start_position, e.orig_answer_text)
    checked += 1
  assert checked >= 30


def test_unicode_characters_map_back(dev, tok):
  """Accents are stripped for the pieces but answers come back verbatim."""
  settings = sd.FeatureSettings(max_seq_length=512)
  featurizer = sd.Featurizer(tok, settings)
  found = 0
  for examples in _sample_paragraphs(dev, 0).values():
    text = examples[0].paragraph_text
    align = featurizer.align(text)
    for e in examples:
      answer = e.orig_answer_text
      if all(ord(c) < 128 for c in answer):
        continue
      s, t = align.answer_pieces(e.start_position, answer)
      span = text[align.tok_start_to_orig[s]:align.tok_end_to_orig[t] + 1]
      assert answer.strip() in span, (span, answer)
      found += span.strip() == answer.strip()
  assert found >= 3


# Pieces ---------------------------------------------------------------------
def test_piece_split_on_class_changes(tok):
  enc = tok.sp.EncodeAsPieces
  pieces = tok.encode_pieces("in the 1990s, about $5.2bn (1,000km)")
  split = sd.split_piece_classes(pieces, enc, tok.sp.PieceToId)
  assert "".join(split) == "".join(pieces)
  assert "▁1990" in split and "s" in split
  for piece in split:
    body = piece.lstrip(SPIECE_UNDERLINE)
    assert len(sd.class_runs(body)) <= 1, piece
  digits = sd.split_piece_classes(pieces, enc, tok.sp.PieceToId,
                                  split_digits=True)
  assert "".join(digits) == "".join(pieces)
  assert "▁1" in digits and "9" in digits


def test_split_answer_inside_a_piece_becomes_exact(tok):
  """Gold "5" inside "▁$5" and "8" inside "▁2018": the original snaps them
  to the whole piece; the default split makes them exact."""
  text = "The fee rose to $5 in 2018."
  five, eight = text.index("$5") + 1, text.index("2018") + 3
  for snapping, digits, want in ((False, True, ("5", "8")),
                                 (False, False, ("5", "2018")),
                                 (True, True, ("$5", "2018"))):
    f = sd.Featurizer(tok, sd.FeatureSettings(
        max_seq_length=64, max_query_length=16,
        original_piece_snapping=snapping, split_digits=digits))
    align = f.align(text)
    got = []
    for start, answer in ((five, "5"), (eight, "8")):
      s, t = align.answer_pieces(start, answer)
      got.append(text[align.tok_start_to_orig[s]:
                      align.tok_end_to_orig[t] + 1].strip())
    assert tuple(got) == want, (snapping, digits)


# Features -------------------------------------------------------------------
def _check_feature(feature, example, align, settings, spans, span_index):
  L = settings.max_seq_length
  a = feature.arrays(L)
  p = feature.paragraph_len
  start, length = spans[span_index]
  q = len(feature.tokens) - p - 3
  assert p == length and 1 <= q <= settings.max_query_length
  ids = a["input_ids"]
  assert len(ids) == L and ids[:p] == align.ids[start:start + p]
  assert ids[p] == SEP_ID and ids[p + q + 1] == SEP_ID
  assert ids[p + q + 2] == CLS_ID == ids[a["cls_index"]]
  assert a["cls_index"] == feature.cls_index == p + q + 2
  n = p + q + 3
  assert ids[n:] == [0] * (L - n)
  assert a["input_mask"] == [0.0] * n + [1.0] * (L - n)
  assert a["segment_ids"] == [0] * (p + 1) + [1] * (q + 1) + [2] + \
      [3] * (L - n)
  assert a["p_mask"] == [0.0] * p + [1.0] * (q + 2) + [0.0] + \
      [1.0] * (L - n)
  assert feature.tok_start_to_orig_index == \
      align.tok_start_to_orig[start:start + p]
  answer = align.answer_pieces(example.start_position,
                               example.orig_answer_text)
  inside = start <= answer[0] and answer[1] < start + length
  assert feature.is_impossible == (not inside)
  if inside:
    s, e = feature.start_position, feature.end_position
    assert (s + start, e + start) == answer and s <= e < p
    text = example.paragraph_text[feature.tok_start_to_orig_index[s]:
                                  feature.tok_end_to_orig_index[e] + 1]
    assert example.orig_answer_text.strip() in text
  else:
    assert feature.start_position == feature.end_position == \
        feature.cls_index


def test_feature_invariants_on_real_paragraphs(dev, tok):
  """Long contexts cut in windows, unicode, numbers: layout, masks, segment
  ids, windows and their max-context pieces, answer positions."""
  settings = sd.FeatureSettings(max_seq_length=128, doc_stride=48,
                                max_query_length=24)
  featurizer = sd.Featurizer(tok, settings)
  groups = _sample_paragraphs(dev)
  position = {id(e): k for k, e in enumerate(dev.examples)}
  windows = impossible = numbers = 0
  for examples in groups.values():
    pairs = [(position[id(e)], e) for e in examples[:3]]
    feats, stats = featurizer.paragraph_features(pairs, is_training=True)
    assert stats.unaligned_answers == 0 and stats.unaligned_examples == 0
    align = featurizer.align(examples[0].paragraph_text)
    for index, example in pairs:
      own = [f for f in feats if f.example_index == index]
      q = len(own[0].tokens) - own[0].paragraph_len - 3
      spans = sd.doc_spans(len(align.ids), 128 - q - 3, 48)
      assert [f.doc_span_index for f in own] == list(range(len(spans)))
      for k, f in enumerate(own):
        _check_feature(f, example, align, settings, spans, k)
      # Every paragraph piece has exactly one max-context window.
      owner = np.zeros(len(align.ids), int)
      for f, (start, length) in zip(own, spans):
        owner[start:start + length] += f.token_is_max_context
      assert (owner == 1).all()
      # Windows step by doc_stride and cover the paragraph.
      assert all(b[0] - a[0] == 48 for a, b in zip(spans, spans[1:]))
      assert spans[-1][0] + spans[-1][1] == len(align.ids)
      windows += len(own)
      impossible += sum(f.is_impossible for f in own)
      numbers += any(c.isdigit() for c in example.orig_answer_text)
  assert windows > 150 and impossible > 60 and numbers >= 5


def test_long_question_is_cut_and_counted(tok):
  text = "The river is long. " * 5
  question = "What " + "very " * 80 + "long river?"
  example = sd.SquadExample("q", question, text, 0, ["river"], "river", 4)
  settings = sd.FeatureSettings(max_seq_length=64, max_query_length=10)
  feats, stats = sd.Featurizer(tok, settings).paragraph_features(
      [(0, example)], is_training=True)
  assert stats.truncated_questions == 1
  assert all(len(f.tokens) - f.paragraph_len - 3 == 10 for f in feats)


def test_records_round_trip(dev, tok, tmp_path):
  data = sd.SquadData(dev.path, dev.version, dev.examples[:12])
  settings = sd.FeatureSettings(max_seq_length=96, doc_stride=32,
                                max_query_length=16)
  info = sd.cached_features(data, tok, settings, str(tmp_path), "predict",
                            False)
  assert info["num_examples"] == 12 and info["num_features"] > 12
  again = sd.cached_features(data, tok, settings, str(tmp_path), "predict",
                             False)
  assert again["path"] == info["path"]
  other = sd.cached_features(data, tok, sd.FeatureSettings(
      max_seq_length=96, doc_stride=40, max_query_length=16),
      str(tmp_path), "predict", False)
  assert other["path"] != info["path"]
  feats, _ = sd.convert_examples(data.examples, tok, settings, False)
  meta = sd.read_feature_meta(info["path"])
  assert [m.unique_id for m in meta] == [f.unique_id for f in feats]
  for m, f in zip(meta, feats):
    assert m.tok_end_to_orig_index == f.tok_end_to_orig_index
    assert m.token_is_max_context == f.token_is_max_context
    assert (m.paragraph_len, m.example_index) == (f.paragraph_len,
                                                  f.example_index)
  batch = next(iter(sd.squad_dataset(info["path"], 96, 4)))
  assert batch["input_ids"].shape == (4, 96)
  np.testing.assert_array_equal(batch["p_mask"][0],
                                feats[0].arrays(96)["p_mask"])
  np.testing.assert_array_equal(batch["cls_index"],
                                [f.cls_index for f in feats[:4]])


# Golden ---------------------------------------------------------------------
def _golden_features(case):
  return {"input_ids": case["input_ids_bm"], "segment_ids": case["seg_ids_bm"],
          "input_mask": case["input_mask_bm"], "p_mask": case["p_mask"],
          "cls_index": case["cls_index"]}


def test_golden_through_the_task_and_saved_model(golden, tmp_path):
  import tensorflow as tf
  from xlnet_tf.export import export_squad
  from xlnet_tf.tasks import SquadTask
  case = golden("case_squad")
  task = SquadTask(case.config, case.options(), start_n_top=3, end_n_top=3)
  model = task.build_model()
  xt.load_original_checkpoint(model, case.ckpt, strict=True)
  out = model(_golden_features(case))
  keys = ("start_top_log_probs", "end_top_log_probs", "cls_logits")
  for key in keys:
    assert_close(out[key], case[key], name=key)
  for key in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(out[key], case[key])
  # The training loss: the original's on the golden training path.
  train_model = SquadTask(case.config, case.options(dropout=0.0, dropatt=0.0),
                          3, 3).build_model()
  xt.load_original_checkpoint(train_model, case.ckpt, strict=True)
  end = case["train_end_log_probs"].argmax(axis=1).astype(np.int32)
  impossible = np.array([0, 1, 0, 1], np.float32)
  features = dict(_golden_features(case),
                  start_positions=case["start_positions"],
                  end_positions=end, is_impossible=impossible)
  loss, state = task.compute_loss(train_model, features, None, True)
  rows = np.arange(4)
  logits = case["train_cls_logits"].astype(np.float64)
  bce = np.maximum(logits, 0) - logits * impossible + np.log1p(
      np.exp(-np.abs(logits)))
  want = 0.5 * (-case["train_start_log_probs"][rows,
                                               case["start_positions"]].mean()
                - case["train_end_log_probs"][rows, end].mean()) + \
      0.5 * bce.mean()
  assert state is None
  assert_close(loss, want)
  # The SavedModel signature answers the same.
  path = export_squad(model, str(tmp_path / "sm"), 16, 3, 3)
  served = tf.saved_model.load(path).signatures["serving_default"](
      **{k: tf.constant(v) for k, v in _golden_features(case).items()})
  for key in keys:
    assert_close(served[key], case[key], name=key)
  np.testing.assert_array_equal(served["end_top_index"], case["end_top_index"])
  with pytest.raises(ValueError, match="beam is 3 x 3"):
    export_squad(model, str(tmp_path / "sm2"), 16, 5, 5)


# Postprocessing and metrics -------------------------------------------------
class _Ex:
  def __init__(self, qas_id, text):
    self.qas_id, self.paragraph_text = qas_id, text


def _feature(uid, example_index, spans, max_context=None):
  """A window over pieces with the given character spans."""
  return sd.SquadFeature(
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
def oracle(dev, tok):
  """Full-dev features with answers for the default pieces, the class split
  without digits, and the original pieces; each paragraph is featurized for
  all three in turn so its alignment is computed once."""
  settings = {
      "default": sd.FeatureSettings(512, 128, 64),
      "classes": sd.FeatureSettings(512, 128, 64, split_digits=False),
      "original": sd.FeatureSettings(512, 128, 64,
                                     original_piece_snapping=True)}
  featurizers = {k: sd.Featurizer(tok, s) for k, s in settings.items()}
  feats = {k: [] for k in settings}
  stats = {k: sd.FeatureStats() for k in settings}
  for group in sd.group_by_paragraph(dev.examples):
    for k, featurizer in featurizers.items():
      f, s = featurizer.paragraph_features(group, is_training=False)
      feats[k].extend(f)
      stats[k].add(s)
  for k in feats:
    sd.assign_unique_ids(feats[k])
  return feats, stats


def _oracle_scores(dev, features, original_off_by_one):
  preds, _, _ = se.predict_answers(dev.examples, features,
                                   _gold_results(features), 5, 64,
                                   original_off_by_one)
  gold = {e.qas_id: e.answers for e in dev.examples}
  lost = [q for q in gold if not max(se.exact_match(preds[q], a)
                                     for a in gold[q])]
  return se.evaluate_v1(gold, preds), lost


def test_oracle_full_dev(dev, oracle):
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
  original, lost_original = _oracle_scores(dev, feats["original"], True)
  default, lost_default = _oracle_scores(dev, feats["default"], False)
  print(f"\noracle original: {original} lost {len(lost_original)}"
        f"\noracle default: {default} lost {len(lost_default)}")
  assert 99.20 <= original["exact_match"] <= 99.30
  assert 99.25 <= original["f1"] <= 99.45
  assert 75 <= len(lost_original) <= 85
  assert default["exact_match"] >= 99.86 and default["f1"] >= 99.90
  assert len(lost_default) <= 12
  assert set(lost_default) <= set(lost_original)
  # Each fix alone.
  bound_only, lost_bound = _oracle_scores(dev, feats["original"], False)
  classes, lost_classes = _oracle_scores(dev, feats["classes"], False)
  assert len(lost_bound) == len(lost_classes) == 22
  assert bound_only["exact_match"] == classes["exact_match"] < \
      default["exact_match"]


# End to end -----------------------------------------------------------------
def _tiny_files(dev_path, tmp_path):
  with open(dev_path) as f:
    raw = json.load(f)
  paragraphs = raw["data"][0]["paragraphs"]
  train = json.loads(json.dumps(paragraphs[:5]))
  for p in train:
    for qa in p["qas"]:
      qa["answers"] = qa["answers"][:1]
      qa["is_impossible"] = False
  # Two v2.0-style unanswerable questions.
  train[0]["qas"].append({"id": "x1", "question": "Who won Super Bowl 70?",
                          "answers": [], "is_impossible": True})
  train[1]["qas"].append({"id": "x2", "question": "What is on the moon?",
                          "answers": [], "is_impossible": True})
  predict = paragraphs[5:8]
  return (_write(tmp_path / "train.json", _squad(train)),
          _write(tmp_path / "predict.json", _squad(predict, "1.1")),
          {qa["id"] for p in predict for qa in p["qas"]})


def test_workflow_prepro_and_v2_answers(shared, dev_path, tmp_path):
  """--do_prepro through the workflow (process pool), then v2.0 answers,
  metrics and prediction files from gold-position outputs (no model)."""
  from xlnet_tf.training import TrainOptions
  from xlnet_tf.workflows.squad import SquadOptions, SquadWorkflow
  train, _, _ = _tiny_files(dev_path, tmp_path)
  with open(dev_path) as f:
    paragraphs = json.load(f)["data"][1]["paragraphs"][:3]
  impossible = set()
  for p in paragraphs:
    for k, qa in enumerate(p["qas"]):
      qa["is_impossible"] = k % 3 == 0
      if qa["is_impossible"]:
        qa["answers"] = []
        impossible.add(qa["id"])
  predict = _write(tmp_path / "dev-v2.json", _squad(paragraphs))
  opts = SquadOptions(
      config=xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                            d_inner=32, n_token=32000),
      run=xt.RunOptions(), train=TrainOptions(model_dir=str(tmp_path / "m"),
                                              train_steps=1),
      task_name="squad", data_dir="", output_dir=str(tmp_path / "proc"),
      spiece_model_file=spiece_path(shared), train_file=train,
      predict_file=predict, max_seq_length=96, doc_stride=32,
      max_query_length=16, num_proc=2)
  workflow = SquadWorkflow(opts)
  built = workflow.prepro()
  assert built["train"]["stats"]["examples"] == len(
      built["train"]["data"].examples)
  train_meta = sd.read_feature_meta(built["train"]["path"])
  assert sum(m.is_impossible for m in train_meta) >= 2
  info = built["predict"]
  assert info["data"].version == "2.0"
  meta = sd.read_feature_meta(info["path"])
  qid = [info["data"].examples[m.example_index].qas_id for m in meta]
  out = {"unique_ids": np.array([m.unique_id for m in meta]),
         "start_top_log_probs": np.zeros([len(meta), 1]),
         "start_top_index": np.array([[m.start_position] for m in meta]),
         "end_top_log_probs": np.zeros([len(meta), 1]),
         "end_top_index": np.array([[m.end_position] for m in meta]),
         "cls_logits": np.array([5.0 if q in impossible else -5.0
                                 for q in qid])}
  predictions, nbest, null_odds = workflow.answers(out, info)
  metrics = workflow.metrics(predictions, null_odds, info["data"])
  assert metrics["NoAns_total"] == len(impossible)
  assert metrics["best_f1"] >= 99.0 and metrics["best_f1_thresh"] == -5.0
  assert metrics["main"] == metrics["best_f1"] > metrics["f1"] - 1e-9
  workflow.write_predictions(str(tmp_path / "pred"), predictions, nbest,
                             null_odds, metrics, "2.0")
  with open(tmp_path / "pred" / "predictions_best_thresh.json") as f:
    thresholded = json.load(f)
  assert {q for q, t in thresholded.items() if not t} == impossible
  for name in ("predictions", "nbest_predictions", "null_odds", "results"):
    assert os.path.exists(tmp_path / "pred" / f"{name}.json")


def test_run_squad_end_to_end(shared, dev_path, tmp_path):
  train, predict, qids = _tiny_files(dev_path, tmp_path)
  config = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=32000)
  config.to_json(str(tmp_path / "xlnet_config.json"))
  common = [sys.executable, "run_squad.py",
            f"--model_config_path={tmp_path}/xlnet_config.json",
            f"--spiece_model_file={spiece_path(shared)}",
            f"--output_dir={tmp_path}/proc", f"--model_dir={tmp_path}/model",
            f"--train_file={train}", "--max_seq_length=128",
            "--doc_stride=64", "--max_query_length=32"]
  res = subprocess.run(common + [
      f"--predict_file={predict}", "--do_train", "--do_eval", "--do_predict",
      "--train_steps=4", "--train_batch_size=4", "--iterations=2",
      "--eval_batch_size=16", "--predict_batch_size=16", "--num_proc=2"],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  out = tmp_path / "model" / "predictions"
  with open(out / "predictions.json") as f:
    predictions = json.load(f)
  with open(out / "nbest_predictions.json") as f:
    nbest = json.load(f)
  with open(out / "null_odds.json") as f:
    null_odds = json.load(f)
  assert set(predictions) == set(nbest) == set(null_odds) == qids
  assert all(1 <= len(v) <= 5 for v in nbest.values())
  assert all(predictions[q] == nbest[q][0]["text"] for q in qids)
  with open(tmp_path / "model" / "eval_results_dev.json") as f:
    best = json.load(f)["best"]
  assert best["num_examples"] == len(qids) and best["main"] == best["best_f1"]
  assert 0 <= best["exact_match"] <= best["f1"] <= 100
  assert os.path.exists(tmp_path / "model" / "saved_model" /
                        "saved_model.pb")
  records = [n for n in os.listdir(tmp_path / "proc")
             if n.endswith(".tf_record")]
  assert len(records) == 2
  # A user mistake: one line on stderr, exit 2.
  res = subprocess.run(common + [f"--predict_file={tmp_path}/nope.json",
                                 "--do_predict"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_squad: --predict_file={tmp_path}/nope.json: no such file (needed "
      "by --do_predict)")
