"""The layers are registered Keras-serializable (package "xlnet_tf"): a
serialized layer deserializes without custom objects into a layer with the
same config that, given the same weights, computes the same."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from xlnet_tf import layers
from xlnet_tf.building import build_once
from xlnet_tf.encoder import XLNetBlock

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50, ff_activation="gelu")
RNG = np.random.RandomState(4)
HIDDEN = tf.constant(RNG.randn(2, 5, 16), tf.float32)
POS = tf.constant(RNG.randn(10, 16), tf.float32)
BIASES = tuple(tf.constant(RNG.randn(*s), tf.float32)
               for s in ([2, 8], [2, 8], [2, 8], [2, 2, 8]))
SEED = tf.constant([1, 2])

CASES = {
    "LayerNorm": (lambda: layers.LayerNorm(16, fast_kernels=False),
                  lambda l: l(HIDDEN)),
    "SeededDropout": (lambda: layers.SeededDropout(0.3),
                      lambda l: l(HIDDEN, training=True, seed=SEED)),
    "PositionwiseFFN": (lambda: layers.PositionwiseFFN(16, 32, "gelu", 0.2),
                        lambda l: l(HIDDEN, training=True, seed=SEED)),
    "RelativeAttention": (
        lambda: layers.RelativeAttention(16, 2, 8, fast_kernels=False),
        lambda l: l(HIDDEN, POS, BIASES, g=HIDDEN)),
    "AbsoluteAttention": (
        lambda: layers.AbsoluteAttention(16, 2, 8, residual=False),
        lambda l: l(HIDDEN, HIDDEN, HIDDEN)),
    "RelativePositionEncoding": (
        lambda: layers.RelativePositionEncoding(16, "uni", 3, bi_data=True),
        lambda l: l(5, 7, 2)),
    "XLNetBlock": (lambda: XLNetBlock(16, 2, 8, 32, "relu", 0.1, 0.1),
                   lambda l: l(HIDDEN, POS, BIASES, training=True, seed=SEED)),
    "XLNetModel": (
        lambda: xt.XLNetModel(CONFIG, xt.RunOptions(
            mem_len=3, attn_type="uni", fast_kernels=False)),
        lambda l: l(tf.constant([[3, 4, 5], [6, 7, 8]]),
                    segment_ids=tf.constant([[0, 0, 1]] * 2))),
}


def _outputs(layer, run):
  """The non-None output tensors of `run(layer)`, as numpy arrays."""
  return [t.numpy() for t in tf.nest.flatten(run(layer)) if t is not None]


@pytest.mark.parametrize("name", sorted(CASES))
def test_deserializes_without_custom_objects(name):
  make, run = CASES[name]
  layer = make()
  run(layer)
  serialized = keras.layers.serialize(layer)
  assert serialized["registered_name"] == f"xlnet_tf>{name}"
  rebuilt = keras.layers.deserialize(serialized)
  assert type(rebuilt) is type(layer)
  assert rebuilt.get_config() == layer.get_config()
  build_once(rebuilt)
  rebuilt.set_weights(layer.get_weights())
  expected = _outputs(layer, run)
  assert expected and len(expected) == len(_outputs(rebuilt, run))
  for want, got in zip(expected, _outputs(rebuilt, run)):
    np.testing.assert_allclose(got, want, atol=1e-6)
