"""Export of a classifier read in segments (issue 19): the raw-text
signatures build the long-document layout in the graph and loop over the
segments; `serve_segment` streams a document of any length with the memory
that `initial_memory` starts. Everything is compared with the Python model
on real IMDB reviews, float32, to 1e-5.

S = 24, N = 3 (L = 72), M = 30 > S, so that the memory after a segment
still holds masked positions of the initial memory.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the ops serve_text uses)

import xlnet_tf as xt
from conftest import assert_close, spiece_path
from data_utils.classification import features as cf
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)
from xlnet_tf.export.directory import read_export_marker
from xlnet_tf.tasks.classification.serving import (ClassifierServer,
                                                   classifier_features,
                                                   export_classifier)

S, N, M = 24, 3, 30
L = N * S
TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
# Test reviews and their piece counts: one short segment, one full segment,
# two and three segments (the last exactly full), one piece too many, and
# far more than N segments.
REVIEWS = {"neg/321_1.txt": 15, "pos/1049_9.txt": 22, "neg/361_1.txt": 34,
           "pos/554_9.txt": 41, "pos/421_9.txt": 70, "neg/154_2.txt": 71,
           "neg/533_1.txt": 300, "pos/428_10.txt": 300}
FEATURES = ("input_ids", "segment_ids", "input_mask")


def contract_layout(a, b, segment_length, n_segments, keep_end=False):
  """The issue's layout, written from its text: N == 1 is
  `convert_example`; else B its first S - 3 pieces, A its first (last with
  keep_end) L - 3 - len(B) pieces (L - 2 without B), `A <sep> [B <sep>]
  <cls>` LEFT padded to L."""
  length = segment_length * n_segments
  if n_segments == 1:
    return cf.convert_example(a, b or None, length)
  b = b[:segment_length - 3] if b else []
  n_a = length - 3 - len(b) if b else length - 2
  a = a[len(a) - n_a:] if keep_end and len(a) > n_a else a[:n_a]
  ids = a + [SEP_ID] + (b + [SEP_ID] if b else []) + [CLS_ID]
  segs = ([SEG_ID_A] * (len(a) + 1) + [SEG_ID_B] * (len(b) + bool(b)) +
          [SEG_ID_CLS])
  pad = length - len(ids)
  return {"input_ids": [0] * pad + ids,
          "segment_ids": [SEG_ID_PAD] * pad + segs,
          "input_mask": [1.0] * pad + [0.0] * len(ids)}


def batch_of(rows):
  return {k: np.array([r[k] for r in rows],
                      np.float32 if k == "input_mask" else np.int32)
          for k in FEATURES}


def randomize(model, seed):
  """Every weight random (LayerNorm gains around 1), so that no path can
  hide behind an initial zero."""
  rng = np.random.RandomState(seed)
  for name, var in sorted(model.original_weights().items()):
    value = rng.normal(0, 0.3, var.shape.as_list())
    var.assign((value + name.endswith("gamma")).astype(np.float32))


@pytest.fixture(scope="module")
def reviews(shared):
  root = os.path.join(shared, "data", "imdb", "aclImdb", "test")
  texts = []
  for name in REVIEWS:
    with open(os.path.join(root, name), encoding="utf-8") as f:
      texts.append(f.read().strip().replace("<br />", " "))
  return texts


@pytest.fixture(scope="module")
def graph(shared):
  return GraphTokenizer(spiece_path(shared))


@pytest.fixture(scope="module")
def exported(shared, tmp_path_factory):
  model = xt.XLNetClassifier(
      xt.XLNetModel(TINY, xt.RunOptions(mem_len=M)), n_class=2,
      task_name="imdb", segment_length=S)
  randomize(model, 19)
  path = export_classifier(model, str(tmp_path_factory.mktemp("seg") / "sm"),
                           L, False, labels=["neg", "pos"],
                           sp_model_path=spiece_path(shared))
  return model, tf.saved_model.load(path), path


def test_reviews_cover_every_length(sp_tokenizer, reviews):
  assert [len(sp_tokenizer.encode_ids(t)) for t in reviews] == list(
      REVIEWS.values())


@pytest.mark.parametrize("n_segments,keep_end", [(1, False), (N, False),
                                                 (N, True)])
def test_in_graph_layout_is_the_contract(graph, sp_tokenizer, reviews,
                                         n_segments, keep_end):
  """Equal to the records' `convert_document` and to the issue's text, for
  every B length: empty, fits S - 3, cut to S - 3."""
  texts_b = ["", reviews[0], reviews[1], reviews[2], reviews[0], "",
             reviews[3], reviews[1]]
  ids_a = [sp_tokenizer.encode_ids(t) for t in reviews]
  ids_b = [sp_tokenizer.encode_ids(t) for t in texts_b]
  for pair in (False, True):
    rows = [(a, b if pair else None) for a, b in zip(ids_a, ids_b)]
    want = batch_of([cf.convert_document(a, b, S, n_segments, keep_end)
                     for a, b in rows])
    text = batch_of([contract_layout(a, b, S, n_segments, keep_end)
                     for a, b in rows])
    got = classifier_features(
        graph.tokenize(tf.constant(reviews)),
        graph.tokenize(tf.constant(texts_b)) if pair else None,
        n_segments * S, S, keep_end)
    for key in FEATURES:
      np.testing.assert_array_equal(got[key].numpy(), want[key],
                                    err_msg=f"{key} pair={pair}")
      np.testing.assert_array_equal(text[key], want[key], err_msg=key)


def test_keep_end_needs_several_segments(graph):
  with pytest.raises(ValueError) as info:
    classifier_features(graph.tokenize(tf.constant(["a"])), None, S, S, True)
  assert str(info.value) == (
      "keep_end needs more than one segment (max_seq_length a multiple > 1 "
      "of the model's segment_length)")


def test_signatures(exported):
  _, loaded, path = exported
  assert sorted(loaded.signatures) == [
      "initial_memory", "serve_segment", "serve_text", "serve_text_pair",
      "serving_default"]
  # No signature of any length: a batch job feeds serving_default records
  # laid out as the marker says.
  batch = read_export_marker(path)["batch"]
  assert {k: batch[k] for k in ("max_seq_length", "signature",
                                "segment_length", "keep_end", "labels",
                                "regression")} == {
      "max_seq_length": L, "signature": "serving_default",
      "segment_length": S, "keep_end": False, "labels": ["neg", "pos"],
      "regression": False}
  start = loaded.signatures["initial_memory"](batch_size=tf.constant(3))
  np.testing.assert_array_equal(start["mems"].numpy(),
                                np.zeros([2, 3, M, 16], np.float32))
  np.testing.assert_array_equal(start["mems_mask"].numpy(),
                                np.ones([3, M], np.float32))


def test_raw_text_signatures_equal_python_model(exported, sp_tokenizer,
                                                reviews):
  model, loaded, _ = exported
  ids = [sp_tokenizer.encode_ids(t) for t in reviews]
  features = batch_of([contract_layout(a, None, S, N) for a in ids])
  want = model(features)["logits"].numpy()
  got = loaded.signatures["serve_text"](text=tf.constant(reviews))
  assert_close(got["logits"], want)
  np.testing.assert_array_equal(got["class_id"], want.argmax(-1))
  by_features = loaded.signatures["serving_default"](
      **{k: tf.constant(v) for k, v in features.items()})
  assert_close(by_features["logits"], want)

  texts_b = reviews[2:] + reviews[:2]
  pairs = batch_of([contract_layout(a, b, S, N) for a, b in
                    zip(ids, ids[2:] + ids[:2])])
  got = loaded.signatures["serve_text_pair"](text_a=tf.constant(reviews),
                                             text_b=tf.constant(texts_b))
  assert_close(got["logits"], model(pairs)["logits"])


def stream(signatures, features, segment_length):
  """Feeds `features [B, n * S]` to serve_segment one segment at a time
  from initial_memory; returns each call's outputs."""
  batch, length = features["input_ids"].shape
  state = signatures["initial_memory"](batch_size=tf.constant(batch))
  mems, mems_mask = state["mems"], state["mems_mask"]
  outs = []
  for i in range(0, length, segment_length):
    out = signatures["serve_segment"](
        mems=mems, mems_mask=mems_mask,
        **{k: tf.constant(v[:, i:i + segment_length])
           for k, v in features.items()})
    mems, mems_mask = out["new_mems"], out["new_mems_mask"]
    outs.append(out)
  return outs


def test_streaming_equals_the_whole_document(exported, sp_tokenizer,
                                             reviews):
  model, loaded, _ = exported
  features = batch_of([contract_layout(sp_tokenizer.encode_ids(t), None, S,
                                       N) for t in reviews])
  outs = stream(loaded.signatures, features, S)
  assert len(outs) == N
  want = model(features)
  assert_close(outs[-1]["logits"], want["logits"])
  assert_close(outs[-1]["probabilities"], want["probabilities"])
  assert [x.decode() for x in outs[-1]["label"].numpy()] == [
      ["neg", "pos"][k] for k in want["logits"].numpy().argmax(-1)]


def test_streaming_a_document_longer_than_the_record(exported, sp_tokenizer,
                                                     reviews):
  """13 segments (two whole 300-piece reviews, one of 34 pieces left
  padded) through an export made for 3: equal to the Python model's
  `read_segment` loop after every segment, memory included."""
  model, loaded, _ = exported
  texts = [reviews[6], reviews[7], reviews[2]]
  length = 13 * S
  features = batch_of([cf.convert_example(sp_tokenizer.encode_ids(t), None,
                                          length) for t in texts])
  # Nothing was cut: 312 - 302 and 312 - 36 padding positions.
  assert features["input_mask"].sum(1).tolist() == [10, 10, 276]
  outs = stream(loaded.signatures, features, S)
  mems, mems_mask = model.initial_memory(3)
  for k, out in enumerate(outs):
    segment = {key: v[:, k * S:(k + 1) * S] for key, v in features.items()}
    want, mems, mems_mask = model.read_segment(segment, mems, mems_mask)
    assert_close(out["logits"], want["logits"], name=f"segment {k}")
    np.testing.assert_array_equal(out["new_mems_mask"], mems_mask)
    assert_close(out["new_mems"], tf.stack(mems), name=f"memory {k}")
  # The third document's 11 leading empty segments change nothing.
  alone = model(batch_of([contract_layout(sp_tokenizer.encode_ids(texts[2]),
                                          None, S, 2)]))
  assert_close(outs[-1]["logits"][2:], alone["logits"])


def test_regressor_signatures_stream_the_score(sp_tokenizer, reviews):
  """The signatures' functions of a regressor, unsaved: serving_default and
  the stream give the Python model's score."""
  model = xt.XLNetRegressor(xt.XLNetModel(TINY, xt.RunOptions(mem_len=M)),
                            task_name="sts-b", segment_length=S)
  randomize(model, 7)
  sigs = ClassifierServer(model, L, True).signatures()
  assert sorted(sigs) == ["initial_memory", "serve_segment",
                          "serving_default"]
  features = batch_of([contract_layout(sp_tokenizer.encode_ids(t), None, S,
                                       N) for t in reviews[:4]])
  want = model(features)["score"]
  assert_close(sigs["serving_default"](**features)["score"], want)
  outs = stream(sigs, features, S)
  assert sorted(outs[-1]) == ["new_mems", "new_mems_mask", "score"]
  assert_close(outs[-1]["score"], want)


def test_record_length_must_be_a_multiple_of_the_segment(tmp_path):
  model = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions(mem_len=M)),
                             n_class=2, segment_length=S)
  with pytest.raises(ValueError) as info:
    export_classifier(model, str(tmp_path / "sm"), L + 1, False)
  assert str(info.value) == (f"max_seq_length {L + 1} is not a multiple of "
                             f"the model's segment_length {S}")
  assert os.listdir(tmp_path) == []
