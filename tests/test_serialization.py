"""get_config / from_config rebuild layers and models that compute the same."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf import heads, layers
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
    (lambda: heads.LMHead(50, 16, tie_weight=False), lambda l: l(HIDDEN)),
    (lambda: heads.LogitHead(3, "model/classification_x/logit", 16),
     lambda l: l(HIDDEN[:, 0])),
    (lambda: heads.SquadHead(16, 2, 3),
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


FEATURES = {"input_ids": IDS, "segment_ids": IDS % 3,
            "input_mask": tf.zeros([2, 5])}

MODELS = [
    (lambda: xt.XLNetClassifier(CONFIG, OPTIONS, n_class=3, task_name="cola",
                                summary_type="mean"), FEATURES),
    (lambda: xt.XLNetRegressor(CONFIG, OPTIONS, task_name="sts-b"), FEATURES),
    (lambda: xt.XLNetForQuestionAnswering(CONFIG, OPTIONS, start_n_top=2,
                                          end_n_top=2),
     dict(FEATURES, p_mask=tf.zeros([2, 5]), cls_index=tf.constant([4, 4]))),
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
