"""The token classifier's SavedModel: `serve_text` (raw text, tokenized in
the graph) gives the words, character offsets, tags and entities of the
Python path (WordPieces + features.sentence_windows + the in-memory model +
features.merge_words + text.entity_spans) on eng.testa sentences split in
many windows and on irregular texts; `serving_default` is the model on
features; a fresh process gets the same answers; bad arguments are refused
before anything is written. The graph's window choice and entity reading
equal windows.py and schemes.entities exhaustively / on random tags."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops serve_text uses)
import tf_keras as keras

import xlnet_tf as xt
from data_utils.errors import UsageError, UserError
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.ner.alignment import WordPieces, align_words
from data_utils.ner.features import (NerFeatureSettings, merge_words,
                                     sentence_windows)
from data_utils.ner.reader import read_ner
from data_utils.ner.schemes import entities
from data_utils.ner.text import entity_spans, words_with_offsets
from data_utils.ner.windows import best_windows, window_spans
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.tasks import (TokenClassifierServer,
                            XLNetForTokenClassification,
                            export_token_classifier)
from xlnet_tf.tasks.token_classification.serving import (best_window_positions, entity_words,
                                          label_tables, window_count)
from conftest import spiece_path

LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG",
          "B-PER", "I-PER"]
LENGTH, STRIDE = 16, 5  # windows of 14 pieces: most sentences need several
CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000, ff_activation="gelu")
FEATURE_KEYS = ("input_ids", "segment_ids", "input_mask")

IRREGULAR = [
    "\tEU  rejects\u00a0German\u3000call  to boycott British lamb . ",
    "   ", "", "x",
    "Zürich ist schön , sagte Jürgen Müller in Köln .",
    "東京 タワー は 高い 😀 Peter  Blackburn\u2028of\u0085Leicestershire",
    "a\x00b \u0301 lone\u0301 mark , 1,234,567 dollars\x1c\x1dend\r\n",
    "\u2003\u205f" + " ".join(["Nadim Ladki", "AL-AIN", ",", "United Arab",
                              "Emirates", "1996-12-06"] * 9) + "\u202f",
]


@pytest.fixture(scope="module")
def model():
  keras.utils.set_random_seed(18)
  net = xt.XLNetModel(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0))
  out = XLNetForTokenClassification(net, len(LABELS), task_name="conll")
  out.build(None)
  # A strong random head, so that many tags (and entities) occur.
  rng = np.random.RandomState(18)
  out.logit.dense.kernel.assign(rng.randn(16, len(LABELS)).astype(np.float32))
  out.logit.dense.bias.assign(rng.randn(len(LABELS)).astype(np.float32))
  return out


@pytest.fixture(scope="module")
def exported(shared, model, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("ner") / "saved_model")
  assert export_token_classifier(model, path, LENGTH, STRIDE, LABELS,
                                 sp_model_path=spiece_path(shared)) == path
  return path, tf.saved_model.load(path)


@pytest.fixture(scope="module")
def word_pieces(sp_tokenizer):
  return WordPieces(sp_tokenizer)


def python_path(model, word_pieces, texts):
  """Per text `{words, starts, ends, tags, entities}` the Python way, and
  the windows' features and smallest top-2 logit gap at the used positions."""
  settings = NerFeatureSettings(LENGTH, STRIDE)
  windows, found = [], []
  for i, text in enumerate(texts):
    words, offsets = words_with_offsets(text)
    found.append((words, offsets))
    windows += sentence_windows(align_words(word_pieces, words), settings, i)
  features = {k: np.array([getattr(w, k) for w in windows],
                          np.float32 if k == "input_mask" else np.int32)
              for k in FEATURE_KEYS}
  logits = model(features)["logits"].numpy()
  word_index = np.array([w.word_index for w in windows])
  top2 = np.sort(logits, -1)[..., -2:]
  gap = float((top2[..., 1] - top2[..., 0])[word_index >= 0].min())
  tag_ids = merge_words([w.sentence for w in windows], word_index,
                        logits.argmax(-1), [len(w) for w, _ in found])
  out = []
  for text, (words, offsets), ids in zip(texts, found, tag_ids):
    tags = [LABELS[i] for i in ids]
    out.append({"words": words, "starts": [s for s, _ in offsets],
                "ends": [e for _, e in offsets], "tags": tags,
                "tag_ids": ids,
                "entities": [(e["type"], e["text"], e["start"], e["end"])
                             for e in entity_spans(text, offsets, tags)]})
  return out, features, gap, len(windows)


def served(signature, texts):
  """`serve_text` outputs -> per text the same dicts as `python_path`;
  checks the padding past each text's counts."""
  got = {k: v.numpy() for k, v in signature(
      text=tf.constant(texts, tf.string)).items()}
  out = []
  for b in range(len(texts)):
    n, m = got["num_words"][b], got["num_entities"][b]
    for key, pad in (("words", b""), ("tags", b""), ("word_starts", -1),
                     ("word_ends", -1), ("tag_ids", -1)):
      assert (got[key][b, n:] == pad).all(), key
    for key, pad in (("entity_types", b""), ("entity_texts", b""),
                     ("entity_starts", -1), ("entity_ends", -1)):
      assert (got[key][b, m:] == pad).all(), key
    out.append({
        "words": [w.decode() for w in got["words"][b, :n]],
        "starts": got["word_starts"][b, :n].tolist(),
        "ends": got["word_ends"][b, :n].tolist(),
        "tags": [t.decode() for t in got["tags"][b, :n]],
        "tag_ids": got["tag_ids"][b, :n].tolist(),
        "entities": list(zip(
            [t.decode() for t in got["entity_types"][b, :m]],
            [t.decode() for t in got["entity_texts"][b, :m]],
            got["entity_starts"][b, :m].tolist(),
            got["entity_ends"][b, :m].tolist()))})
  return out


def test_serve_text_equals_python_path_on_testa(shared, model, exported,
                                                word_pieces):
  sentences = read_ner(os.path.join(shared, "data", "conll2003",
                                    "eng.testa")).sentences
  by_length = sorted(range(len(sentences)),
                     key=lambda i: -len(sentences[i].words))
  rng = np.random.RandomState(3)
  chosen = by_length[:30] + list(rng.choice(by_length[30:], 330, False))
  rng.shuffle(chosen)
  texts = [" ".join(sentences[i].words) for i in chosen]
  serve_text = exported[1].signatures["serve_text"]
  n_windows = n_entities = n_words = start = 0
  tags_seen = set()
  for size in (1, 7, 64, 32, 96, 160):
    batch = texts[start:start + size]
    start += size
    want, _, gap, windows = python_path(model, word_pieces, batch)
    assert gap > 1e-5  # no near tie that float noise could flip
    assert served(serve_text, batch) == want
    n_windows += windows
    n_words += sum(len(w["words"]) for w in want)
    n_entities += sum(len(w["entities"]) for w in want)
    tags_seen.update(t for w in want for t in w["tags"])
  assert start == len(texts) == 360
  # The longest testa sentence (109 words) is among them, and the test
  # covers what it should: many windows, every tag, many entities.
  assert max(len(w.split()) for w in texts) == len(
      sentences[by_length[0]].words) == 109
  assert n_windows > 3 * len(texts) and n_words > 6000
  assert tags_seen == set(LABELS) and n_entities > 1000


def test_serve_text_on_irregular_texts(model, exported, word_pieces):
  want, _, gap, windows = python_path(model, word_pieces, IRREGULAR)
  assert gap > 1e-5 and windows > 2 * len(IRREGULAR)
  got = served(exported[1].signatures["serve_text"], IRREGULAR)
  assert got == want
  # Offsets are characters: "😀" is one (two in UTF-16, four in UTF-8).
  emoji = got[5]["words"].index("😀")
  assert got[5]["starts"][emoji] == IRREGULAR[5].index("😀") == 12
  assert got[5]["ends"][emoji] == 13
  assert got[5]["starts"][emoji + 1] == 14  # "Peter", after it
  assert got[1]["words"] == got[2]["words"] == []
  assert got[1]["entities"] == got[2]["entities"] == []
  assert got[6]["words"][:2] == ["a\x00b", "\u0301"]
  assert len(got[7]["words"]) == 8 * 9  # in many windows
  # Alone, each text gets what it gets in the batch.
  for text, expected in zip(IRREGULAR, got):
    assert served(exported[1].signatures["serve_text"], [text]) == [expected]
  # Batches without a word, or without a text: empty [B, 0] answers.
  for texts in (["", " \t"], []):
    out = exported[1].signatures["serve_text"](text=tf.constant(texts,
                                                                tf.string))
    for key, value in out.items():
      shape = [len(texts)] if key.startswith("num_") else [len(texts), 0]
      assert value.shape == shape, key


def test_uncased_server_equals_uncased_python_path(shared, model):
  # The same graph, unsaved: `lower` reaches both tokenizers alike.
  sp = spiece_path(shared)
  uncased = WordPieces(SentencePieceTokenizer(sp, lower=True))
  server = TokenClassifierServer(model, LENGTH, STRIDE, LABELS,
                                 GraphTokenizer(sp, lower=True),
                                 uncased.ids(uncased.empty_word)[0])
  texts = IRREGULAR + ["ΣΊΣΥΦΟΣ and İSTANBUL , NEW YORK"]
  want, _, gap, _ = python_path(model, uncased, texts)
  assert gap > 1e-5
  assert served(tf.function(server.serve_text), texts) == want


def test_serving_default_is_the_model_on_features(model, exported,
                                                  word_pieces):
  _, features, _, _ = python_path(model, word_pieces, IRREGULAR)
  out = exported[1].signatures["serving_default"](
      **{k: tf.constant(v) for k, v in features.items()})
  want = model(features)
  np.testing.assert_allclose(out["logits"], want["logits"], atol=1e-5)
  np.testing.assert_allclose(out["probabilities"], want["probabilities"],
                             atol=1e-6)
  ids = want["logits"].numpy().argmax(-1)
  np.testing.assert_array_equal(out["tag_ids"], ids)
  assert out["tag_ids"].dtype == tf.int32
  assert out["tags"].numpy().tolist() == [[LABELS[i].encode() for i in row]
                                          for row in ids]


def test_fresh_process_queries_raw_text(exported):
  path, loaded = exported
  texts = IRREGULAR[:2] + ["EU rejects German call to boycott British lamb ."]
  script = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the TF Text ops of serve_text
m = tf.saved_model.load(sys.argv[1])
out = m.signatures["serve_text"](text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({k: [[x.decode() if isinstance(x, bytes) else x
                       for x in row] if v.ndim == 2 else row
                      for row in v.numpy().tolist()]
                  for k, v in out.items()}))
"""
  res = subprocess.run([sys.executable, "-c", script, path,
                        json.dumps(texts)], capture_output=True, text=True,
                       timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  got = json.loads(res.stdout.strip().splitlines()[-1])
  here = loaded.signatures["serve_text"](text=tf.constant(texts))
  assert sorted(got) == sorted(here) == sorted([
      "num_words", "words", "word_starts", "word_ends", "tags", "tag_ids",
      "num_entities", "entity_types", "entity_texts", "entity_starts",
      "entity_ends"])
  for key, value in here.items():
    value = value.numpy().tolist()
    if isinstance(value[0], list):
      value = [[x.decode() if isinstance(x, bytes) else x for x in row]
               for row in value]
    assert got[key] == value, key
  assert got["num_words"][2] == 9 and got["words"][2][1] == "rejects"


def test_bad_arguments_are_refused_before_writing(model, tmp_path, shared):
  path = str(tmp_path / "out")
  with pytest.raises(UsageError) as e:
    export_token_classifier(model, path, LENGTH, 15, LABELS)
  assert str(e.value) == ("--doc_stride=15: must be in [1, max_seq_length "
                          "- 2 = 14]")
  with pytest.raises(UsageError) as e:
    export_token_classifier(model, path, LENGTH, STRIDE, LABELS[:3])
  assert str(e.value) == "label list: 3 labels for a model of 9 classes"
  with pytest.raises(UsageError) as e:
    export_token_classifier(model, path, LENGTH, STRIDE,
                            LABELS[:8] + ["X-PER"])
  assert str(e.value) == ("label list: tag X-PER is not O or B-, I-, E-, "
                          "S- followed by a type")
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "notes.txt").write_text("keep")
  with pytest.raises(UserError, match="is not an xlnet-tf token_classifier"):
    export_token_classifier(model, str(tmp_path / "mine"), LENGTH, STRIDE,
                            LABELS, sp_model_path=spiece_path(shared))
  assert not os.path.exists(path)
  assert os.listdir(tmp_path / "mine") == ["notes.txt"]


# The graph runs windows.py's own rules (on tf.experimental.numpy) but
# compares only the windows that can hold a piece (`best_window`), not all
# of a text's as `best_windows` does: a graph keeps shapes fixed per piece.
def test_window_helpers_equal_windows_py():
  # Every piece of every length up to 40, for every stride of three sizes.
  for length in (4, 5, 16):
    size = length - 2
    n = np.arange(41)
    pieces = np.concatenate([np.arange(m) for m in n])
    lengths = np.repeat(n, n)
    for stride in range(1, size + 1):
      assert window_count(tf.constant(n, tf.int64), size, stride).numpy(
      ).tolist() == [len(window_spans(m, size, stride)) for m in n]
      got = best_window_positions(tf.constant(pieces, tf.int64),
                                  tf.constant(lengths, tf.int64), length,
                                  stride)
      want = []
      for m in n:
        spans = window_spans(m, size, stride)
        for p, k in enumerate(best_windows(spans, m)):
          start, end = spans[k]
          want.append((k, size - (end - start) + p - start))
      assert list(zip(*(x.numpy().tolist() for x in got))) == want


# The two rules are schemes.boundary_table's; `entities`' loop is written
# again as cumulative ops, because the graph reads all the words at once.
def test_entity_reading_equals_schemes_entities():
  # Random IOB2 and BIOES tag sequences, texts of 0 to 12 words.
  labels = ["O"] + [f"{p}-{t}" for t in ("LOC", "PER") for p in "BIES"]
  prefixes, type_ids, _ = label_tables(labels)
  rng = np.random.RandomState(5)
  lengths = rng.randint(0, 13, size=300)
  ids = rng.randint(0, len(labels), size=int(lengths.sum()))
  bounds = np.concatenate([[0], np.cumsum(lengths)])
  index = np.arange(len(ids))
  first, last = entity_words(
      tf.constant(ids, tf.int32), tf.constant(np.isin(index, bounds[:-1])),
      tf.constant(np.isin(index + 1, bounds[1:])), tf.constant(prefixes),
      tf.constant(type_ids))
  want = []
  for a, b in zip(bounds[:-1], bounds[1:]):
    want += [(a + s, a + e - 1) for _, s, e in
             entities([labels[i] for i in ids[a:b]])]
  assert list(zip(first.numpy().tolist(), last.numpy().tolist())) == want
  assert len(want) > 500
