"""get_config / from_config (and Keras' own JSON round trip, with no custom
objects) rebuild layers and models that compute the same."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from xlnet_tf import layers, tasks
from xlnet_tf.building import build_once
from xlnet_tf.encoder import XLNetBlock

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50, ff_activation="relu", untie_r=False)
OPTIONS = xt.RunOptions(dropout=0.0, dropatt=0.0, attn_type="uni",
                        same_length=True, mem_len=3, clamp_len=4)
RNG = np.random.RandomState(3)
HIDDEN = tf.constant(RNG.randn(2, 5, 16), tf.float32)
IDS = tf.constant(RNG.randint(0, 50, size=(2, 5)), tf.int32)
POS = tf.constant(RNG.randn(10, 16), tf.float32)
BIASES = tuple(tf.constant(RNG.randn(*s), tf.float32)
               for s in ([2, 8], [2, 8], [2, 8], [2, 2, 8]))


def _copy_and_compare(original, rebuilt, run):
  build_once(rebuilt)
  rebuilt.set_weights(original.get_weights())
  outputs = [[t for t in tf.nest.flatten(run(m)) if t is not None]
             for m in (original, rebuilt)]
  assert outputs[0]
  for a, b in zip(*outputs):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


CASES = [
    (lambda: layers.LayerNorm(16), lambda l: l(HIDDEN)),
    (lambda: layers.RelativePositionEncoding(16, "uni", 3, bi_data=True),
     lambda l: l(5, 7, 2)),
    (lambda: layers.PositionwiseFFN(16, 32, "gelu", 0.1),
     lambda l: l(HIDDEN)),
    (lambda: layers.AbsoluteAttention(16, 2, 8, residual=False),
     lambda l: l(HIDDEN, HIDDEN, HIDDEN)),
    (lambda: layers.RelativeAttention(16, 2, 8),
     lambda l: l(HIDDEN, POS, BIASES)),
    (lambda: XLNetBlock(16, 2, 8, 32, "relu"),
     lambda l: l(HIDDEN, POS, BIASES)),
    (lambda: xt.XLNetModel(CONFIG, OPTIONS),
     lambda l: l(IDS, segment_ids=IDS % 2)),
    (lambda: xt.SequenceSummary(CONFIG, "attn", options=OPTIONS),
     lambda l: l(HIDDEN)),
    (lambda: tasks.LMHead(50, 16, tie_weight=False), lambda l: l(HIDDEN)),
    (lambda: tasks.LogitHead(3, "model/classification_x/logit", 16),
     lambda l: l(HIDDEN[:, 0])),
    (lambda: tasks.SquadHead(16, 2, 3),
     lambda l: l(HIDDEN, tf.zeros([2, 5]), tf.constant([4, 4]))),
]


@pytest.mark.parametrize("make,run", CASES)
def test_layer_config_round_trip(make, run):
  layer = make()
  run(layer)
  config = layer.get_config()
  rebuilt = type(layer).from_config(config)
  assert rebuilt.get_config() == config
  _copy_and_compare(layer, rebuilt, run)


@pytest.mark.parametrize("make,run", CASES[-4:])
def test_head_deserializes_without_custom_objects(make, run):
  """The task heads are registered (`xlnet_tf>...`) too."""
  layer = make()
  run(layer)
  config = keras.layers.serialize(layer)
  assert config["registered_name"] == f"xlnet_tf>{type(layer).__name__}"
  rebuilt = keras.layers.deserialize(json.loads(json.dumps(config)))
  assert type(rebuilt) is type(layer)
  _copy_and_compare(layer, rebuilt, run)


FEATURES = {"input_ids": IDS, "segment_ids": IDS % 3,
            "input_mask": tf.zeros([2, 5])}

MODELS = [
    (lambda: xt.XLNetClassifier(xt.XLNetModel(CONFIG, OPTIONS), n_class=3,
                                task_name="cola", summary_type="mean"),
     FEATURES),
    (lambda: xt.XLNetRegressor(xt.XLNetModel(CONFIG, OPTIONS),
                               task_name="sts-b", use_summ_proj=False),
     FEATURES),
    (lambda: xt.XLNetForMultipleChoice(xt.XLNetModel(CONFIG, OPTIONS),
                                       n_choice=2, summary_type="attn"),
     {k: tf.reshape(v, [1, 2, 5]) for k, v in FEATURES.items()}),
    (lambda: xt.XLNetForQuestionAnswering(xt.XLNetModel(CONFIG, OPTIONS),
                                          start_n_top=2, end_n_top=2),
     dict(FEATURES, p_mask=tf.zeros([2, 5]), cls_index=tf.constant([4, 4]))),
    (lambda: xt.XLNetPretrainer(xt.XLNetModel(CONFIG, OPTIONS),
                                tie_weight=False),
     dict(FEATURES, perm_mask=tf.zeros([2, 5, 5]), input_q=tf.ones([2, 5]),
          target_mapping=tf.eye(5, batch_shape=[2])[:, :3],
          target=IDS[:, :3], target_mask=tf.ones([2, 3]))),
]


@pytest.mark.parametrize("make,features", MODELS)
def test_model_config_round_trip(make, features):
  model = make()
  model(features)
  config = model.get_config()
  rebuilt = type(model).from_config(config)
  assert rebuilt.get_config() == config
  assert rebuilt.original_weights().keys() == model.original_weights().keys()
  _copy_and_compare(model, rebuilt, lambda m: m(features))


@pytest.mark.parametrize("make,features", MODELS)
def test_model_json_round_trip_without_custom_objects(make, features):
  """Registered classes (`xlnet_tf>...`): Keras alone rebuilds the model,
  its encoder included, from its serialized JSON. (`model.to_json()` writes
  the bare class name for subclassed models, which no registry resolves:
  `keras.layers.serialize` is the way.)"""
  model = make()
  model(features)
  text = json.dumps(keras.layers.serialize(model))
  rebuilt = keras.layers.deserialize(json.loads(text))
  assert type(rebuilt) is type(model)
  assert rebuilt.encoder.get_config() == model.encoder.get_config()
  _copy_and_compare(model, rebuilt, lambda m: m(features))


def test_summary_type_lives_in_the_summary():
  """The model stores no copy: it reads the summary's settings, and the
  summary alone decides which rows the encoder computes."""
  model = xt.XLNetClassifier(xt.XLNetModel(CONFIG, OPTIONS),
                             summary_type="first", use_summ_proj=False)
  assert (model.summary_type, model.use_summ_proj) == ("first", False)
  assert model.summary.output_positions(IDS).numpy().tolist() == [[0], [0]]
  assert model.get_config()["summary_type"] == "first"
  with pytest.raises(ValueError, match="summary_type must be one of"):
    xt.SequenceSummary(CONFIG, "max")
