"""The token-classification model and loss: logits against a hand
computation on the encoder's output, the loss against NumPy with ignored
(-1) positions, serialization, original-layout names and checkpoint round
trip, and the training task's hooks."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from xlnet_tf.building import build_once
from xlnet_tf.tasks import (TokenClassificationTask,
                            XLNetForTokenClassification,
                            token_classification_loss)

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50, ff_activation="relu")
OPTIONS = xt.RunOptions(dropout=0.0, dropatt=0.0)
RNG = np.random.RandomState(7)
IDS = RNG.randint(0, 50, size=(2, 6)).astype(np.int32)
# Row 1 is left-padded by two positions.
MASK = np.array([[0] * 6, [1, 1, 0, 0, 0, 0]], np.float32)
FEATURES = {"input_ids": tf.constant(IDS),
            "segment_ids": tf.constant(IDS % 2),
            "input_mask": tf.constant(MASK)}
LABELS = np.array([[0, 2, -1, 1, -1, 4], [-1, -1, 3, -1, 0, 0]], np.int32)


def _model(options=OPTIONS, **head):
  head = {"n_class": 5, "task_name": "CoNLL", **head}
  return XLNetForTokenClassification(xt.XLNetModel(CONFIG, options), **head)


def _numpy_loss(logits, labels):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  terms = [-log_probs[b, i, labels[b, i]]
           for b in range(labels.shape[0]) for i in range(labels.shape[1])
           if labels[b, i] >= 0]
  return np.mean(terms) if terms else 0.0


def test_logits_are_one_dense_layer_on_every_position():
  model = _model()
  out = model(FEATURES)
  hidden = model.encoder(FEATURES["input_ids"],
                         segment_ids=FEATURES["segment_ids"],
                         input_mask=FEATURES["input_mask"])["sequence_output"]
  kernel = model.logit.dense.kernel.numpy()
  bias = model.logit.dense.bias.numpy()
  expected = np.einsum("bld,dc->blc", hidden.numpy(), kernel) + bias
  assert out["logits"].shape == (2, 6, 5)
  assert out["logits"].dtype == tf.float32
  np.testing.assert_allclose(out["logits"].numpy(), expected, atol=1e-5)
  exp = np.exp(expected - expected.max(-1, keepdims=True))
  np.testing.assert_allclose(out["probabilities"].numpy(),
                             exp / exp.sum(-1, keepdims=True), atol=1e-6)


def test_dropout_is_the_encoders_and_only_acts_in_training():
  model = _model(xt.RunOptions(dropout=0.5, dropatt=0.0))
  # As HuggingFace's head: the encoder's output dropout, then the dense layer.
  assert [type(layer).__name__ for layer in model.layers] == \
      ["XLNetModel", "LogitHead"]
  assert model.encoder.dropout.rate == 0.5
  first = model(FEATURES)["logits"].numpy()
  np.testing.assert_array_equal(first, model(FEATURES)["logits"].numpy())
  trained = model(FEATURES, training=True)["logits"].numpy()
  assert not np.allclose(first, trained)


def test_loss_skips_ignored_positions():
  logits = RNG.randn(2, 6, 5).astype(np.float32)
  loss = token_classification_loss(tf.constant(logits), LABELS)
  np.testing.assert_allclose(float(loss), _numpy_loss(logits, LABELS),
                             rtol=1e-6)
  # The label of an ignored position does not matter, whatever its logits.
  changed = logits.copy()
  changed[LABELS < 0] = 100.0
  np.testing.assert_allclose(float(token_classification_loss(changed, LABELS)),
                             float(loss), rtol=1e-6)
  # Any negative id is ignored (HuggingFace's -100 too).
  hf_labels = np.where(LABELS < 0, -100, LABELS)
  assert float(token_classification_loss(logits, hf_labels)) == float(loss)


def test_loss_gradient_is_zero_exactly_at_ignored_positions():
  logits = tf.Variable(RNG.randn(2, 6, 5).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = token_classification_loss(logits, LABELS)
  grad = tape.gradient(loss, logits).numpy()
  assert np.all(grad[LABELS < 0] == 0)
  assert np.all(np.abs(grad[LABELS >= 0]).sum(-1) > 0)
  # Each labelled row: (softmax - one_hot) / number of labelled positions.
  probs = tf.nn.softmax(logits).numpy()
  b, i = 0, 1
  expected = (probs[b, i] - np.eye(5)[LABELS[b, i]]) / np.sum(LABELS >= 0)
  np.testing.assert_allclose(grad[b, i], expected, atol=1e-6)


def test_loss_of_a_batch_without_labels_is_zero_with_zero_gradient():
  logits = tf.Variable(RNG.randn(2, 6, 5).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = token_classification_loss(logits, -np.ones([2, 6], np.int32))
  grad = tape.gradient(loss, logits).numpy()
  assert float(loss) == 0.0
  assert np.all(grad == 0)


def test_task_loss_is_the_models_logits_through_the_loss():
  task = TokenClassificationTask(CONFIG, OPTIONS, n_class=5,
                                 task_name="CoNLL", seq_len=6)
  model = task.build_model()
  features = dict(FEATURES, label_ids=tf.constant(LABELS))
  loss, state = task.compute_loss(model, features, None, training=False)
  assert state is None
  logits = model(FEATURES)["logits"].numpy()
  np.testing.assert_allclose(float(loss), _numpy_loss(logits, LABELS),
                             rtol=1e-5)


def test_original_weight_names():
  names = set(_model().original_weights())
  head = {n for n in names if not n.startswith("model/transformer/")}
  assert head == {"model/token_classification_conll/logit/kernel",
                  "model/token_classification_conll/logit/bias"}
  encoder = set(xt.XLNetModel(CONFIG, OPTIONS).original_weights())
  assert names - head == encoder - {"model/transformer/mask_emb/mask_emb"}
  weights = _model().original_weights()
  assert weights["model/token_classification_conll/logit/kernel"].shape == (
      16, 5)
  assert weights["model/token_classification_conll/logit/bias"].shape == (5,)


def _copy_and_compare(model, rebuilt):
  build_once(rebuilt)
  rebuilt.set_weights(model.get_weights())
  for key in ("logits", "probabilities"):
    np.testing.assert_allclose(rebuilt(FEATURES)[key].numpy(),
                               model(FEATURES)[key].numpy(), atol=1e-6)


def test_config_and_json_round_trip_without_custom_objects():
  model = _model()
  model(FEATURES)
  config = model.get_config()
  assert {k: v for k, v in config.items() if k not in ("name", "network")} == {
      "n_class": 5, "task_name": "CoNLL"}
  rebuilt = XLNetForTokenClassification.from_config(config)
  assert rebuilt.get_config() == config
  _copy_and_compare(model, rebuilt)
  text = json.dumps(keras.layers.serialize(model))
  assert '"xlnet_tf>XLNetForTokenClassification"' in text
  again = keras.layers.deserialize(json.loads(text))
  assert type(again) is XLNetForTokenClassification
  assert again.encoder.get_config() == model.encoder.get_config()
  _copy_and_compare(model, again)


def test_original_checkpoint_round_trip(tmp_path):
  source, target = _model(), _model()
  prefix = xt.save_original_checkpoint(source, str(tmp_path / "m.ckpt"))
  report = xt.load_original_checkpoint(target, prefix, strict=True)
  assert report.unused == [] and report.missing == []
  # Every tensor written is the source's and now the target's, by name.
  reader = tf.train.load_checkpoint(prefix)
  stored = reader.get_variable_to_shape_map()
  loaded, written = target.original_weights(), source.original_weights()
  assert set(stored) == set(loaded)
  assert "model/token_classification_conll/logit/kernel" in stored
  for name in stored:
    value = reader.get_tensor(name)
    np.testing.assert_array_equal(value, written[name].numpy(), err_msg=name)
    np.testing.assert_array_equal(value, loaded[name].numpy(), err_msg=name)
  np.testing.assert_array_equal(target(FEATURES)["logits"].numpy(),
                                source(FEATURES)["logits"].numpy())


def test_another_task_names_head_is_missing_from_the_checkpoint(tmp_path):
  prefix = xt.save_original_checkpoint(_model(), str(tmp_path / "m.ckpt"))
  report = xt.load_original_checkpoint(_model(task_name="ner"), prefix)
  assert sorted(report.missing) == [
      "model/token_classification_ner/logit/bias",
      "model/token_classification_ner/logit/kernel"]
  assert sorted(report.unused) == [
      "model/token_classification_conll/logit/bias",
      "model/token_classification_conll/logit/kernel"]


def test_task_builds_a_fresh_model_and_places_every_variable():
  task = TokenClassificationTask(CONFIG, OPTIONS, n_class=9, task_name="ner",
                                 seq_len=6)
  model = task.build_model()
  assert type(model) is XLNetForTokenClassification
  assert task.build_model().encoder is not model.encoder
  assert (model.n_class, model.task_name) == (9, "ner")
  assert task.export_kind == "token_classifier"
  assert task.tokens_per_example() == 6 and task.num_layers() == 2
  assert not task.loss_scaling()
  model.build(None)
  got = {v.name: task.layer_of(v) for v in model.trainable_variables}
  assert sorted(k for k, v in got.items() if v == -1) == [
      "transformer/mask_emb/mask_emb:0",
      "transformer/word_embedding/lookup_table:0"]
  layers = {k: v for k, v in got.items() if v is not None and v >= 0}
  assert sorted(set(layers.values())) == [0, 1]
  assert all(f"/layer_{v}/" in k for k, v in layers.items())
  head = sorted(k for k in got if "logit" in k)
  assert len(head) == 2 and all(got[k] is None for k in head)


@pytest.mark.parametrize("labels", [[[5, 0]], [[0, 7]]])
def test_a_label_outside_the_classes_is_an_error(labels):
  with pytest.raises(tf.errors.InvalidArgumentError):
    token_classification_loss(tf.zeros([1, 2, 5]), labels)
