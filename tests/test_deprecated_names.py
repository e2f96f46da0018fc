"""Renamed public names (issue 29, one name per concept): each old name
still works, gives what the new one gives, and warns once per process."""

import dataclasses
import warnings

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from data_utils import deprecation
from data_utils.ner.features import NerFeatureSettings
from data_utils.ner.records import ner_dataset
from xlnet_tf.kernels import AttentionParts, relative_attention
from xlnet_tf.layers import RelativeAttention
from xlnet_tf.masks import attention_masks
from xlnet_tf.positions import relative_positional_encoding
from xlnet_tf.tasks.language_model.passes import two_stream_pass

CONFIG = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
                        n_token=20)
IDS = tf.constant([[5, 6, 7, 8, 9], [9, 8, 7, 6, 5]])
POSITIONS = tf.constant([[4], [1]], tf.int32)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
  """Every test starts as a fresh process would: nothing warned yet."""
  monkeypatch.setattr(deprecation, "_WARNED", set())


def _twice_warns_once(call, old):
  """`call()` twice: both results, and the one DeprecationWarning naming
  `old`."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    results = [call(), call()]
  messages = [str(w.message) for w in caught
              if issubclass(w.category, DeprecationWarning)]
  assert len(messages) == 1, messages
  assert messages[0].startswith(f"{old} is deprecated; use "), messages
  return results


def _same(a, b):
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_xlnet_model_output_rows():
  model = xt.XLNetModel(CONFIG)
  want = model(IDS, output_positions=POSITIONS)["sequence_output"]
  old, again = _twice_warns_once(
      lambda: model(IDS, output_rows=POSITIONS)["sequence_output"],
      "XLNetModel.call(output_rows=)")
  assert want.shape == (2, 1, 8)
  _same(old, want)
  _same(again, want)
  with pytest.raises(TypeError, match="both given"):
    model(IDS, output_rows=POSITIONS, output_positions=POSITIONS)


def test_task_model_encode_output_rows_and_summary_output_rows():
  model = xt.XLNetClassifier(xt.XLNetModel(CONFIG), n_class=2,
                             summary_type="last")
  features = {"input_ids": IDS}
  want = model.encode(features, output_positions=POSITIONS)
  old, _ = _twice_warns_once(
      lambda: model.encode(features, output_rows=POSITIONS),
      "TaskModel.encode(output_rows=)")
  _same(old, want)
  old, _ = _twice_warns_once(lambda: model.summary.output_rows(IDS),
                             "SequenceSummary.output_rows")
  _same(old, model.summary.output_positions(IDS))
  assert old.numpy().tolist() == [[4], [4]]


def _attention_inputs():
  rng = np.random.default_rng(0)
  h = tf.constant(rng.normal(size=[2, 5, 8]), tf.float32)
  pos_enc = relative_positional_encoding(5, 5, 8, "bi")
  biases = tuple(tf.constant(rng.normal(size=[2, 4]), tf.float32)
                 for _ in range(2)) + (None, None)
  content_mask, _ = attention_masks(5, 0, "bi", False, None, None)
  return h, pos_enc, biases, content_mask


@pytest.mark.parametrize("fast", [True, False])
def test_relative_attention_rows(fast):
  layer = RelativeAttention(8, 2, 4, fast_kernels=fast)
  h, pos_enc, biases, mask = _attention_inputs()
  want = layer(h, pos_enc, biases, content_mask=mask,
               output_positions=POSITIONS)[0]
  old, _ = _twice_warns_once(
      lambda: layer(h, pos_enc, biases, content_mask=mask,
                    rows=POSITIONS)[0], "RelativeAttention.call(rows=)")
  assert want.shape == (2, 1, 8)
  _same(old, want)


def test_kernel_relative_attention_rows():
  layer = RelativeAttention(8, 2, 4)
  h, pos_enc, biases, mask = _attention_inputs()
  layer(h, pos_enc, biases, content_mask=mask)  # builds the weights
  parts = AttentionParts(layer.q_kernel, layer.k_kernel, layer.v_kernel,
                         layer.r_kernel, layer.o_kernel, layer.scale,
                         layer.attn_dropout, layer.output_dropout,
                         layer.layer_norm)
  want = relative_attention(parts, h, pos_enc, biases, content_mask=mask,
                            output_positions=POSITIONS)[0]
  old, _ = _twice_warns_once(
      lambda: relative_attention(parts, h, pos_enc, biases,
                                 content_mask=mask, rows=POSITIONS)[0],
      "relative_attention(rows=)")
  _same(old, want)


def test_two_stream_pass_positions():
  lm = xt.XLNetPretrainer(xt.XLNetModel(CONFIG))
  order = tf.constant([[-1, -1, 0, -1, 1], [0, -1, -1, -1, -1]])
  positions = tf.constant([[4, 2], [0, -1]], tf.int32)
  want = two_stream_pass(lm, IDS, order, output_positions=positions)
  old, _ = _twice_warns_once(
      lambda: two_stream_pass(lm, IDS, order, positions=positions),
      "two_stream_pass(positions=)")
  _same(old["logits"], want["logits"])
  _same(old["output_positions"], positions)


def _ner_records(path, length):
  """Two records of `ner_dataset`'s layout."""
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
  with tf.io.TFRecordWriter(str(path)) as writer:
    for k in range(2):
      feature = {key: ints([k] * length) for key in (
          "input_ids", "segment_ids", "label_ids", "word_index")}
      feature.update(
          input_mask=tf.train.Feature(float_list=tf.train.FloatList(
              value=[0.0] * length)),
          sentence_index=ints([k]), is_real_example=ints([1]))
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def test_ner_dataset_is_training(tmp_path):
  path = tmp_path / "ner.tfrecord"
  _ner_records(path, 4)
  infinite = tf.data.INFINITE_CARDINALITY
  assert ner_dataset(str(path), 4, 2, training=True).cardinality() == infinite
  old, _ = _twice_warns_once(
      lambda: ner_dataset(str(path), 4, 2, is_training=True),
      "ner_dataset(is_training=)")
  assert old.cardinality() == infinite  # training repeats
  batches = list(ner_dataset(str(path), 4, 2, is_training=False))
  assert [b["sentence_index"].numpy().tolist() for b in batches] == [[0, 1]]


def test_ner_feature_settings_uncased():
  old, _ = _twice_warns_once(lambda: NerFeatureSettings(uncased=True),
                             "NerFeatureSettings(uncased=)")
  assert old == NerFeatureSettings(lower=True)
  assert dataclasses.asdict(old) == dataclasses.asdict(
      NerFeatureSettings(lower=True))
  assert NerFeatureSettings(uncased=False).lower is False
  assert NerFeatureSettings().lower is False


def test_initializers_moved_names():
  """GELU and the dtype policy have modules of their own; the old path
  gives the same functions."""
  from xlnet_tf import activations, initializers, precision
  for name, home in (("gelu_tanh", activations), ("dtype_policy", precision)):
    old, again = _twice_warns_once(lambda: getattr(initializers, name),
                                   f"xlnet_tf.initializers.{name}")
    assert old is again is getattr(home, name)
  with pytest.raises(AttributeError):
    initializers.no_such_name  # pylint: disable=pointless-statement
