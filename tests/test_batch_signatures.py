"""What a batch-inference job reads from the exports: the signatures that take
ids of any length (`serve_features` of the classifier, regressor and token
classifier: the features with their leading padding cut answer as
`serving_default` on the full ones; `embed_ids` and `score_ids` of the LM:
`Embedder` and `TextScorer` in the graph), the SentencePiece model copied
into the export and the marker's `batch` entry saying how to feed it. The
features exports use TensorFlow's own ops only."""

import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the text exports' tokenizer ops)
import tf_keras as keras
from tensorflow.core.protobuf import saved_model_pb2

import xlnet_tf as xt
from conftest import assert_close, spiece_path
from data_utils.classification import reader as cd
from data_utils.classification.features import convert_example
from data_utils.lm.embedding_files import window_features
from data_utils.ner.alignment import WordPieces, align_words
from data_utils.ner.features import NerFeatureSettings, sentence_windows
from data_utils.ner.reader import read_ner
from xlnet_tf.export.directory import EXPORT_MARKER
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks import XLNetForTokenClassification
from xlnet_tf.tasks.classification.serving import (ClassifierServer,
                                                   any_length,
                                                   export_classifier)
from xlnet_tf.tasks.language_model.embeddings import (SIGNATURE_POOLINGS,
                                                      Embedder)
from xlnet_tf.tasks.language_model.scoring import TextScorer, layout, pad_left
from xlnet_tf.tasks.language_model.serving import export_language_model
from xlnet_tf.tasks.token_classification.serving import (
    export_token_classifier)

# One layer for the fine-tuned models (their export time is mostly tracing),
# two for the LM (a layer between the embeddings and the last).
CONFIG = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000, ff_activation="gelu")
LM_CONFIG = xt.XLNetConfig(**dict(CONFIG.to_dict(), n_layer=2))
OPTIONS = xt.RunOptions(dropout=0.0, dropatt=0.0, init_std=0.3)
LENGTH = 32  # classifier and token classifier: the record / window length L
STRIDE = 10
CLASSES = ["contradiction", "entailment", "neutral"]
TAGS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER",
        "I-PER"]
WINDOW = 8  # the LM export's max_seq_length S
FEATURES = ("input_ids", "segment_ids", "input_mask")
BATCH_SPIECE = "assets.extra/spiece.model"  # the export's copy of the model


def _batch(rows) -> dict:
  return {k: np.array([r[k] for r in rows],
                      np.float32 if k == "input_mask" else np.int32)
          for k in FEATURES}


def _cut(features: dict, length: int) -> dict:
  """The last `length` columns: leading padding cut."""
  return {k: v[:, -length:] for k, v in features.items()}


def _real_length(features: dict) -> int:
  """The batch's longest row without its padding."""
  return int((features["input_mask"] == 0).sum(1).max())


def _call(signature, **inputs) -> dict:
  return {k: v.numpy() for k, v in signature(
      **{k: tf.constant(v) for k, v in inputs.items()}).items()}


def _marker(path: str) -> dict:
  with open(os.path.join(path, EXPORT_MARKER), encoding="utf-8") as f:
    return json.load(f)


def _sha256(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _check_batch_files(path: str, shared: str) -> dict:
  """The export's copy of the SentencePiece model is the given one, the
  marker lists it; returns the marker's `batch` entry."""
  with open(os.path.join(path, BATCH_SPIECE), "rb") as f, \
      open(spiece_path(shared), "rb") as g:
    assert f.read() == g.read()
  marker = _marker(path)
  assert "assets.extra" in marker["files"]
  batch = marker["batch"]
  assert batch["spiece_model"] == BATCH_SPIECE
  assert batch["spiece_model_sha256"] == _sha256(spiece_path(shared))
  return batch


def _own_ops_only(path: str) -> bool:
  """Whether every op of the SavedModel is one of TensorFlow's own (TF
  Text's, loaded as a library, are not in `tf.raw_ops`)."""
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  ops = {op.name for graph in proto.meta_graphs
         for op in graph.meta_info_def.stripped_op_list.op}
  return all(hasattr(tf.raw_ops, name) for name in ops)


@pytest.fixture(scope="module")
def pairs(shared, sp_tokenizer):
  """STS-B dev pairs as ids: short ones (no row fills L) and singles."""
  examples = cd.read_examples("sts-b", os.path.join(shared, "data", "glue",
                                                    "STS-B"), "dev")[:40]
  ids = [(sp_tokenizer.encode_ids(e.text_a), sp_tokenizer.encode_ids(
      e.text_b)) for e in examples]
  short = [(a, b) for a, b in ids if len(a) + len(b) + 3 < LENGTH - 4]
  return short[:6] + [(a, None) for a, _ in short[6:10]]


@pytest.fixture(scope="module")
def classifier_export(shared, pairs, tmp_path_factory):
  """A random classifier's features export (no raw-text signatures)."""
  keras.utils.set_random_seed(5)
  model = xt.XLNetClassifier(xt.XLNetModel(CONFIG, OPTIONS), n_class=3,
                             task_name="mnli")
  model.build()
  # The head's bias centred on these inputs: every class occurs.
  logits = model(_batch([convert_example(a, b, LENGTH)
                         for a, b in pairs]))["logits"]
  model.logit.dense.bias.assign(
      model.logit.dense.bias - tf.reduce_mean(logits, 0))
  path = export_classifier(model, str(tmp_path_factory.mktemp("cls") / "sm"),
                           LENGTH, False, labels=CLASSES,
                           sp_model_path=spiece_path(shared),
                           text_signatures=False)
  return path, tf.saved_model.load(path)


@pytest.fixture(scope="module")
def regressor_export(shared, tmp_path_factory):
  """A random regressor's features export, of an uncased run."""
  keras.utils.set_random_seed(6)
  model = xt.XLNetRegressor(xt.XLNetModel(CONFIG, OPTIONS), task_name="sts-b")
  model.build()
  path = export_classifier(model, str(tmp_path_factory.mktemp("reg") / "sm"),
                           LENGTH, True, sp_model_path=spiece_path(shared),
                           lower=True, text_signatures=False)
  return path, tf.saved_model.load(path)


def test_classifier_serve_features_cuts_padding(classifier_export, pairs):
  path, loaded = classifier_export
  assert sorted(loaded.signatures) == ["serve_features", "serving_default"]
  full = _batch([convert_example(a, b, LENGTH) for a, b in pairs])
  want = _call(loaded.signatures["serving_default"], **full)
  assert len(set(want["class_id"].tolist())) > 1  # the labels vary
  longest = _real_length(full)
  assert longest < LENGTH - 4
  for length in (longest, longest + 3, LENGTH):
    got = _call(loaded.signatures["serve_features"], **_cut(full, length))
    assert sorted(got) == sorted(want)
    for key in ("logits", "probabilities"):
      assert_close(got[key], want[key], atol=1e-5, rtol=0, name=key)
    np.testing.assert_array_equal(got["class_id"], want["class_id"])
    np.testing.assert_array_equal(got["label"], want["label"])
  # One row cut to its own length: no padding left at all.
  row = _cut({k: v[-1:] for k, v in full.items()}, _real_length(
      {k: v[-1:] for k, v in full.items()}))
  assert (row["input_mask"] == 0).all()
  got = _call(loaded.signatures["serve_features"], **row)
  assert_close(got["logits"], want["logits"][-1:], atol=1e-5, rtol=0)


def test_classifier_features_export_batch_entry(classifier_export, shared):
  path, _ = classifier_export
  assert _check_batch_files(path, shared) == {
      "spiece_model": BATCH_SPIECE,
      "spiece_model_sha256": _sha256(spiece_path(shared)), "lower": False,
      "max_seq_length": LENGTH, "signature": "serve_features",
      "labels": CLASSES, "regression": False}
  assert _marker(path)["signatures"] == ["serve_features", "serving_default"]
  assert _own_ops_only(path)


def test_regressor_serve_features_cuts_padding(regressor_export, pairs,
                                               shared):
  path, loaded = regressor_export
  assert sorted(loaded.signatures) == ["serve_features", "serving_default"]
  full = _batch([convert_example(a, b, LENGTH) for a, b in pairs])
  want = _call(loaded.signatures["serving_default"], **full)["score"]
  assert np.ptp(want) > 1e-3
  for length in (_real_length(full), LENGTH - 1):
    got = _call(loaded.signatures["serve_features"], **_cut(full, length))
    assert sorted(got) == ["score"]
    assert_close(got["score"], want, atol=1e-5, rtol=0)
  assert _check_batch_files(path, shared) == {
      "spiece_model": BATCH_SPIECE,
      "spiece_model_sha256": _sha256(spiece_path(shared)), "lower": True,
      "max_seq_length": LENGTH, "signature": "serve_features", "labels": [],
      "regression": True}
  assert _own_ops_only(path)


def test_the_own_ops_check_sees_tf_text(tmp_path):
  module = tf.Module()
  module.split = tf.function(
      lambda text: tensorflow_text.WhitespaceTokenizer().tokenize(
          text).flat_values, input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path))
  assert not _own_ops_only(str(tmp_path))


def test_which_classifiers_take_any_length():
  def model(**head):
    options = xt.RunOptions(mem_len=8) if "segment_length" in head else None
    return xt.XLNetClassifier(xt.XLNetModel(CONFIG, options), n_class=2,
                              **head)
  assert any_length(model(), LENGTH)
  assert any_length(model(summary_type="attn"), LENGTH)
  assert any_length(model(segment_length=LENGTH), LENGTH)
  # Position 0 and the mean over all L read padding; segments need N * S.
  assert not any_length(model(summary_type="first"), LENGTH)
  assert not any_length(model(summary_type="mean"), LENGTH)
  assert not any_length(model(segment_length=LENGTH // 2), LENGTH)


def test_one_segment_model_reads_any_length(pairs):
  """A model of one segment (segment_length L, with memory) reads a
  segment of any length after an empty memory: unsaved signatures."""
  keras.utils.set_random_seed(9)
  model = xt.XLNetClassifier(
      xt.XLNetModel(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0,
                                          init_std=0.3, mem_len=8)),
      n_class=3, segment_length=LENGTH)
  model.build()
  signatures = ClassifierServer(model, LENGTH, False, CLASSES).signatures()
  assert sorted(signatures) == ["initial_memory", "serve_features",
                                "serve_segment", "serving_default"]
  full = _batch([convert_example(a, b, LENGTH) for a, b in pairs])
  want = _call(signatures["serving_default"], **full)
  got = _call(signatures["serve_features"], **_cut(full, _real_length(full)))
  assert_close(got["logits"], want["logits"], atol=1e-5, rtol=0)
  np.testing.assert_array_equal(got["label"], want["label"])


@pytest.fixture(scope="module")
def ner_export(shared, tmp_path_factory):
  """A random token classifier's features export."""
  keras.utils.set_random_seed(8)
  model = XLNetForTokenClassification(xt.XLNetModel(CONFIG, OPTIONS),
                                      len(TAGS), task_name="conll")
  model.build(None)
  rng = np.random.RandomState(8)  # a strong head: many tags occur
  model.logit.dense.kernel.assign(rng.randn(16, len(TAGS)).astype(np.float32))
  path = export_token_classifier(
      model, str(tmp_path_factory.mktemp("ner") / "sm"), LENGTH, STRIDE,
      TAGS, sp_model_path=spiece_path(shared), text_signatures=False)
  return path, tf.saved_model.load(path)


def test_token_classifier_serve_features_cuts_padding(ner_export, shared,
                                                      sp_tokenizer):
  path, loaded = ner_export
  assert sorted(loaded.signatures) == ["serve_features", "serving_default"]
  sentences = read_ner(os.path.join(shared, "data", "conll2003",
                                    "eng.testa")).sentences[:60]
  word_pieces = WordPieces(sp_tokenizer)
  settings = NerFeatureSettings(LENGTH, STRIDE)
  windows = [w for i, s in enumerate(sentences) for w in sentence_windows(
      align_words(word_pieces, s.words), settings, i)]
  full = _batch([vars(w) for w in windows if sum(w.input_mask) > 4][:24])
  want = _call(loaded.signatures["serving_default"], **full)
  real = full["input_mask"] == 0
  assert len(set(want["tag_ids"][real].tolist())) > 3
  for length in (_real_length(full), _real_length(full) + 2):
    assert length < LENGTH
    got = _call(loaded.signatures["serve_features"], **_cut(full, length))
    assert sorted(got) == sorted(want)
    kept = _cut({"input_mask": real, **{k: v for k, v in want.items()}},
                length)
    mask = kept["input_mask"]
    for key in ("logits", "probabilities"):
      assert got[key].shape == kept[key].shape
      assert_close(got[key][mask], kept[key][mask], atol=1e-5, rtol=0,
                   name=key)
    np.testing.assert_array_equal(got["tag_ids"][mask], kept["tag_ids"][mask])
    np.testing.assert_array_equal(got["tags"][mask], kept["tags"][mask])
  assert _check_batch_files(path, shared) == {
      "spiece_model": BATCH_SPIECE,
      "spiece_model_sha256": _sha256(spiece_path(shared)), "lower": False,
      "max_seq_length": LENGTH, "signature": "serve_features",
      "doc_stride": STRIDE, "document_context": False, "labels": TAGS}
  assert _own_ops_only(path)


@pytest.fixture(scope="module")
def lm():
  model = build_model("lm", LM_CONFIG,
                      xt.RunOptions(dropout=0.0, dropatt=0.0))
  model.build()
  rng = np.random.RandomState(21)  # weights far from the initializer's
  for var in model.weights:
    value = rng.normal(0, 0.3, var.shape.as_list())
    if "LayerNorm/gamma" in var.name:
      value = 1 + value
    var.assign(value.astype(np.float32))
  return model


@pytest.fixture(scope="module")
def lm_export(shared, lm, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("lm") / "sm")
  export_language_model(lm, spiece_path(shared), path, WINDOW, 2)
  return path, tf.saved_model.load(path)


LM_TEXTS = ["The quick brown fox", "a", "Once upon a time",
            "In 1,234 cases, Zürich's lake was frozen over again and again, "
            "for weeks."]


def test_embed_ids_is_the_embedder(lm_export, lm, sp_tokenizer):
  _, loaded = lm_export
  embedder = Embedder(lm.encoder, layers=[0, -1],
                      poolings=SIGNATURE_POOLINGS, max_seq_length=WINDOW)
  layers = tf.constant([0, LM_CONFIG.n_layer])
  ids = [sp_tokenizer.encode_ids(t) for t in LM_TEXTS]
  assert [len(x) + 2 > WINDOW for x in ids] == [False] * 3 + [True]
  longest = max(len(x) for x in ids[:3]) + 2
  tight = max(len(x) for x in ids) + 2  # a partial first window
  assert longest < WINDOW < tight and tight % WINDOW
  for batch, length, segmented in ((ids[:3], WINDOW, False),
                                   (ids[:3], longest, False),
                                   (ids, 3 * WINDOW, True), (ids, tight, True)):
    f = window_features(batch, length)
    got = _call(loaded.signatures["embed_ids"], layers=layers, **f)
    assert sorted(got) == sorted(SIGNATURE_POOLINGS + ("states",))
    states, pooled = embedder.forward(*(f[k] for k in FEATURES),
                                      segmented=segmented)
    assert got["states"].shape == (len(batch), 2, length, LM_CONFIG.d_model)
    assert_close(got["states"], states, atol=1e-5, rtol=0)
    for name in SIGNATURE_POOLINGS:
      assert got[name].shape == (len(batch), 2, LM_CONFIG.d_model)
      assert_close(got[name], pooled[name], atol=1e-5, rtol=0, name=name)
  # `embed_ids` of the embedder (whole windows, one text past a window) and
  # the signature on the tight layout: the same vectors and pooled vectors.
  for b, (vectors, pooled) in enumerate(embedder.embed_ids(ids)):
    n = len(ids[b])
    assert_close(np.transpose(got["states"][b, :, -n - 2:-2], [1, 0, 2]),
                 vectors, atol=1e-5, rtol=0)
    for name in SIGNATURE_POOLINGS:
      assert_close(got[name][b], pooled[name], atol=1e-5, rtol=0)
  # Layers chosen at run time: one, repeated, reordered.
  one = _call(loaded.signatures["embed_ids"], layers=tf.constant([2, 1, 2]),
              **f)
  assert_close(one["states"][:, 0], got["states"][:, 1], atol=1e-6, rtol=0)
  assert_close(one["states"][:, 2], one["states"][:, 0], atol=0, rtol=0)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"layers: indices must be in \[0, 2\]"):
    loaded.signatures["embed_ids"](layers=tf.constant([3]), **{
        k: tf.constant(v) for k, v in f.items()})


def test_score_ids_is_the_scorer(lm_export, lm, sp_tokenizer):
  _, loaded = lm_export
  texts = [sp_tokenizer.encode_ids(t) for t in LM_TEXTS]
  contexts = [[], sp_tokenizer.encode_ids("Yesterday"), [], []]
  want = TextScorer(lm).score_ids(texts, contexts, order="l2r")
  rows = [layout(t, c) for t, c in zip(texts, contexts)]
  orders = [[-1] * len(c) + list(range(len(t))) + [-1, -1]
            for t, c in zip(texts, contexts)]
  ids, order, mask = pad_left(rows, orders)
  got = _call(loaded.signatures["score_ids"], input_ids=ids,
              target_order=order, input_mask=mask)
  assert sorted(got) == ["log_probs"]
  assert got["log_probs"].shape == (len(texts), max(len(t) for t in texts))
  for b, result in enumerate(want):
    n = len(texts[b])
    assert_close(got["log_probs"][b, :n], result["log_probs"], atol=1e-5,
                 rtol=0)
    assert (got["log_probs"][b, n:] == 0).all()


def test_lm_export_batch_entry(lm_export, shared):
  path, loaded = lm_export
  assert sorted(loaded.signatures) == ["embed_ids", "embed_text",
                                       "generate_greedy", "generate_sample",
                                       "score_ids"]
  assert _check_batch_files(path, shared) == {
      "spiece_model": BATCH_SPIECE,
      "spiece_model_sha256": _sha256(spiece_path(shared)), "lower": False,
      "max_seq_length": WINDOW, "n_layer": LM_CONFIG.n_layer,
      "partial_first_window": True}
