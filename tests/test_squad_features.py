"""SQuAD features: layout, masks, segment ids, windows and answer
positions on real paragraphs; long questions; the feature records and their
cache round trip."""

import numpy as np

from data_utils.squad.features import (convert_examples, doc_spans,
                                       FeatureSettings, Featurizer)
from data_utils.squad.reader import SquadData, SquadExample
from data_utils.squad.records import (cached_features, read_feature_meta,
                                      squad_dataset)
from data_utils.tokenization import CLS_ID, SEP_ID
from squad_cases import sample_paragraphs


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


def test_feature_invariants_on_real_paragraphs(squad_dev, sp_tokenizer):
  """Long contexts cut in windows, unicode, numbers: layout, masks, segment
  ids, windows and their max-context pieces, answer positions."""
  settings = FeatureSettings(max_seq_length=128, doc_stride=48,
                             max_query_length=24)
  featurizer = Featurizer(sp_tokenizer, settings)
  groups = sample_paragraphs(squad_dev)
  position = {id(e): k for k, e in enumerate(squad_dev.examples)}
  windows = impossible = numbers = 0
  for examples in groups.values():
    pairs = [(position[id(e)], e) for e in examples[:3]]
    feats, stats = featurizer.paragraph_features(pairs, is_training=True)
    assert stats.unaligned_answers == 0 and stats.unaligned_examples == 0
    align = featurizer.align(examples[0].paragraph_text)
    for index, example in pairs:
      own = [f for f in feats if f.example_index == index]
      q = len(own[0].tokens) - own[0].paragraph_len - 3
      spans = doc_spans(len(align.ids), 128 - q - 3, 48)
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


def test_long_question_is_cut_and_counted(sp_tokenizer):
  text = "The river is long. " * 5
  question = "What " + "very " * 80 + "long river?"
  example = SquadExample("q", question, text, 0, ["river"], "river", 4)
  settings = FeatureSettings(max_seq_length=64, max_query_length=10)
  feats, stats = Featurizer(sp_tokenizer, settings).paragraph_features(
      [(0, example)], is_training=True)
  assert stats.truncated_questions == 1
  assert all(len(f.tokens) - f.paragraph_len - 3 == 10 for f in feats)


def test_records_round_trip(squad_dev, sp_tokenizer, tmp_path):
  data = SquadData(squad_dev.path, squad_dev.version, squad_dev.examples[:12])
  settings = FeatureSettings(max_seq_length=96, doc_stride=32,
                             max_query_length=16)
  info = cached_features(data, sp_tokenizer, settings, str(tmp_path),
                         "predict", False)
  assert info["num_examples"] == 12 and info["num_features"] > 12
  again = cached_features(data, sp_tokenizer, settings, str(tmp_path),
                          "predict", False)
  assert again["path"] == info["path"]
  other_settings = FeatureSettings(max_seq_length=96, doc_stride=40,
                                   max_query_length=16)
  other = cached_features(data, sp_tokenizer, other_settings, str(tmp_path),
                          "predict", False)
  assert other["path"] != info["path"]
  feats, _ = convert_examples(data.examples, sp_tokenizer, settings, False)
  meta = read_feature_meta(info["path"])
  assert [m.unique_id for m in meta] == [f.unique_id for f in feats]
  for m, f in zip(meta, feats):
    assert m.tok_end_to_orig_index == f.tok_end_to_orig_index
    assert m.token_is_max_context == f.token_is_max_context
    assert (m.paragraph_len, m.example_index) == (f.paragraph_len,
                                                  f.example_index)
  batch = next(iter(squad_dataset(info["path"], 96, 4)))
  assert batch["input_ids"].shape == (4, 96)
  np.testing.assert_array_equal(batch["p_mask"][0],
                                feats[0].arrays(96)["p_mask"])
  np.testing.assert_array_equal(batch["cls_index"],
                                [f.cls_index for f in feats[:4]])
