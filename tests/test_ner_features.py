"""Windows over long sentences, document context, the feature records and
the prediction files, on every shared CoNLL-2003 sentence."""

import json
import os

import numpy as np
import pytest

from data_utils.errors import UsageError
from data_utils.ner.alignment import IGNORE_LABEL, WordPieces, align_words
from data_utils.ner.features import (NerFeatureSettings, convert_data,
                                     merge_words, sentence_windows)
from data_utils.ner.predictions import conll_lines, jsonl_rows
from data_utils.ner.reader import read_ner
from data_utils.ner.records import cached_ner_features, ner_dataset
from data_utils.ner.schemes import label_list
from data_utils.ner.windows import best_windows, context_of, window_spans
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID, SPIECE_UNDERLINE)
from tests.conlleval_reference import score_file
from xlnet_tf.tasks.token_classification.metrics import entity_metrics


@pytest.fixture(scope="module")
def word_pieces(sp_tokenizer):
  return WordPieces(sp_tokenizer)


@pytest.fixture(scope="module")
def testa(shared):
  return read_ner(os.path.join(shared, "data", "conll2003", "eng.testa"))


def test_windows_cover_every_piece_and_pick_the_most_context():
  for n in range(1, 40):
    for size in range(1, 12):
      for stride in range(1, size + 1):
        spans = window_spans(n, size, stride)
        starts = [s for s, _ in spans]
        assert starts == list(range(0, stride * len(spans), stride))
        assert all(e - s == size for s, e in spans[:-1])
        assert spans[-1][1] == n and (len(spans) == 1 or spans[-2][1] < n)
        best = best_windows(spans, n)
        for p, k in enumerate(best):
          holding = [j for j, (s, e) in enumerate(spans) if s <= p < e]
          assert k in holding
          most = max(context_of(p, spans[j]) for j in holding)
          assert context_of(p, spans[k]) == most
          assert k == min(j for j in holding
                          if context_of(p, spans[j]) == most)
  with pytest.raises(ValueError):
    window_spans(5, 4, 5)


def test_settings_are_checked():
  with pytest.raises(UsageError, match=r"^--doc_stride=31: must be in \[1, "
                     r"max_seq_length - 2 = 30\]$"):
    NerFeatureSettings(max_seq_length=32, doc_stride=31).validate()
  with pytest.raises(UsageError, match="^--max_seq_length=3: must be at "):
    NerFeatureSettings(max_seq_length=3, doc_stride=1).validate()


def _sentence_part(window, settings):
  """The ids of a window's sentence pieces (after padding and context)."""
  ids = np.array(window.input_ids)
  segs = np.array(window.segment_ids)
  own = SEG_ID_B if SEG_ID_B in segs else SEG_ID_A
  keep = np.flatnonzero(segs == own)[:-1]   # its <sep> last
  return ids[keep].tolist(), keep


@pytest.mark.parametrize("length,stride", [(16, 5), (32, 30)])
def test_windows_of_every_shared_sentence(testa, word_pieces, length, stride):
  settings = NerFeatureSettings(max_seq_length=length, doc_stride=stride)
  labels = label_list(t for s in testa.sentences for t in s.tags)
  label_map = {t: i for i, t in enumerate(labels)}
  windows, stats = convert_data(testa, word_pieces, label_map, settings)
  assert stats.sentences == 3250 and stats.words == 51362
  assert stats.windows == len(windows) > stats.sentences
  by_sentence = {}
  for w in windows:
    by_sentence.setdefault(w.sentence, []).append(w)
    assert len(w.input_ids) == len(w.label_ids) == len(w.word_index) == length
    n_pad = int(sum(w.input_mask))
    assert w.input_ids[:n_pad] == [0] * n_pad
    assert w.segment_ids[:n_pad] == [SEG_ID_PAD] * n_pad
    assert w.input_ids[-2:] == [SEP_ID, CLS_ID]
    assert w.segment_ids[-1] == SEG_ID_CLS
  split = 0
  for i, sentence in enumerate(testa.sentences):
    a = align_words(word_pieces, sentence.words, sentence.tags, label_map)
    own = by_sentence[i]
    split += len(own) > 1
    spans = window_spans(len(a.input_ids), length - 2, stride)
    assert [w.window for w in own] == list(range(len(spans)))
    for w, (start, end) in zip(own, spans):
      ids, where = _sentence_part(w, settings)
      assert ids == a.input_ids[start:end]
      assert np.array(w.label_ids)[where].tolist() == a.label_ids[start:end]
    # Every word predicted once, at its first piece.
    merged = merge_words([0] * len(own),
                         [w.word_index for w in own],
                         [w.input_ids for w in own], [len(sentence.words)])
    assert merged == [[a.input_ids[p] for p in a.word_starts]]
  assert split == stats.split_sentences > 0


def test_document_context_is_the_nearest_whole_words(testa, word_pieces):
  settings = NerFeatureSettings(max_seq_length=48, doc_stride=20,
                                document_context=True)
  windows, stats = convert_data(testa, word_pieces, None, settings)
  assert stats.context_sentences > 1000
  aligned = [align_words(word_pieces, s.words) for s in testa.sentences]
  first = {}
  for w in windows:
    first.setdefault(w.sentence, w)
  n_context = 0
  for i, sentence in enumerate(testa.sentences):
    w, n = first[i], len(aligned[i].input_ids)
    segs = np.array(w.segment_ids)
    context = np.array(w.input_ids)[segs == SEG_ID_A][:-1].tolist()
    if SEG_ID_B not in segs:
      context = []
    before = [p for j in range(i) if testa.sentences[j].document ==
              sentence.document for p in aligned[j].pieces]
    before_ids = [word_pieces.ids([p])[0] for p in before]
    if context:
      n_context += 1
      assert context == before_ids[len(before_ids) - len(context):]
      assert before[len(before) - len(context)].startswith(SPIECE_UNDERLINE)
    room = 48 - 3 - n
    # As many pieces as fit: the next whole word back would not.
    fitting = [k for k in range(len(before))
               if before[k].startswith(SPIECE_UNDERLINE)
               and len(before) - k <= room]
    expected = len(before) - fitting[0] if fitting and room > 0 else 0
    assert len(context) == expected, i
    if context:   # no word of the context is predicted here
      assert (np.array(w.word_index)[segs == SEG_ID_A] == -1).all()
  assert n_context == stats.context_sentences


def test_records_round_trip_and_reuse(testa, word_pieces, tmp_path):
  settings = NerFeatureSettings(max_seq_length=24, doc_stride=8)
  labels = label_list(t for s in testa.sentences for t in s.tags)
  windows, _ = convert_data(testa, word_pieces, None, settings)
  info = cached_ner_features(testa, word_pieces, None, settings,
                             str(tmp_path), "dev", pad_to_multiple=64)
  assert info["num_windows"] == len(windows)
  assert info["num_records"] == -(-len(windows) // 64) * 64
  rows = {k: [] for k in ("input_ids", "segment_ids", "input_mask",
                          "label_ids", "word_index", "sentence_index",
                          "is_real_example")}
  for batch in ner_dataset(info["path"], 24, 50):
    for k in rows:
      rows[k].append(batch[k].numpy())
  rows = {k: np.concatenate(v) for k, v in rows.items()}
  real = rows["is_real_example"] == 1
  assert real.sum() == len(windows) and real[:len(windows)].all()
  for key, attr in (("input_ids", "input_ids"), ("segment_ids", "segment_ids"),
                    ("input_mask", "input_mask"), ("label_ids", "label_ids"),
                    ("word_index", "word_index")):
    np.testing.assert_array_equal(rows[key][real],
                                  [getattr(w, attr) for w in windows])
  assert (rows["label_ids"] == IGNORE_LABEL).all()
  np.testing.assert_array_equal(rows["sentence_index"][real],
                                [w.sentence for w in windows])
  stamp = os.stat(info["path"]).st_mtime_ns
  again = cached_ner_features(testa, word_pieces, None, settings,
                              str(tmp_path), "dev", pad_to_multiple=64)
  assert again["path"] == info["path"]
  assert os.stat(info["path"]).st_mtime_ns == stamp
  # Training records: labelled, shuffled, another file.
  train = cached_ner_features(testa, word_pieces, labels, settings,
                              str(tmp_path), "dev", training=True)
  assert train["path"] != info["path"]
  assert train["num_records"] == len(windows)


def test_prediction_files_read_back_and_score_as_conlleval(testa, tmp_path):
  rng = np.random.default_rng(0)
  kinds = ["O"] * 6 + ["I-PER", "B-PER", "I-LOC", "I-ORG", "I-MISC"]
  # Gold, or a random tag, per word (IOB1 as the file).
  predicted = [[t if rng.random() < 0.8 else kinds[rng.integers(len(kinds))]
                for t in s.source_tags] for s in testa.sentences]
  path = tmp_path / "testa.conll"
  path.write_text("\n".join(conll_lines(testa, predicted)) + "\n")
  back = read_ner(str(path))
  assert [s.words for s in back.sentences] == \
      [s.words for s in testa.sentences]
  assert [s.document for s in back.sentences] == \
      [s.document for s in testa.sentences]
  assert [s.source_tags for s in back.sentences] == predicted
  lines = path.read_text().splitlines()
  assert lines.count("-DOCSTART- O O") == len(testa.documents)
  # The gold column is the input's, word for word.
  gold = [line.split()[1] for line in lines
          if line and not line.startswith("-DOCSTART-")]
  assert gold == [t for s in testa.sentences for t in s.source_tags]
  ours = entity_metrics([s.source_tags for s in testa.sentences], predicted)
  theirs = score_file(str(path))
  assert theirs["f1"] == pytest.approx(ours["f1"], abs=1e-12)
  assert theirs["precision"] == pytest.approx(ours["precision"], abs=1e-12)
  assert theirs["recall"] == pytest.approx(ours["recall"], abs=1e-12)
  assert theirs["per_type"] == pytest.approx(
      {t: m["f1"] for t, m in ours["per_type"].items()}, abs=1e-12)
  rows = [json.loads(r) for r in jsonl_rows(testa, predicted)]
  assert len(rows) == len(testa.sentences)
  for row, tags in zip(rows, predicted):
    assert row["tags"] == tags and len(row["tokens"]) == len(tags)
    for e in row["entities"]:
      assert row["text"][e["start"]:e["end"]] == e["text"] == " ".join(
          row["tokens"][e["first_word"]:e["last_word"] + 1])
