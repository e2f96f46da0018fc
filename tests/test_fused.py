"""The fused training kernels equal TensorFlow's own ops; the bfloat16
hardware check reads the CPU flags."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.initializers import cpu_has_native_bfloat16
from xlnet_tf.layers import PositionwiseFFN
from xlnet_tf.layers.dropout import keep_mask, sub_seed
from xlnet_tf.layers.fused import dropout_fused, gelu_tanh_fused


def _value_and_grad(fn, x):
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = fn(x)
    loss = tf.reduce_sum(y * tf.cos(x))  # a non-uniform upstream gradient
  return y, tape.gradient(loss, x)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_gelu_equals_tensorflow_gelu(dtype):
  x = tf.cast(tf.linspace(-8.0, 8.0, 4001), dtype)
  y, g = _value_and_grad(gelu_tanh_fused, x)
  y_ref, g_ref = _value_and_grad(
      lambda t: tf.nn.gelu(t, approximate=True), x)
  assert y.dtype == dtype and g.dtype == dtype
  tol = 1e-5 if dtype == tf.float32 else 2e-2
  np.testing.assert_allclose(tf.cast(y, tf.float32), tf.cast(y_ref, tf.float32),
                             atol=tol, rtol=tol)
  np.testing.assert_allclose(tf.cast(g, tf.float32), tf.cast(g_ref, tf.float32),
                             atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_gelu_dropout_equals_gelu_then_mask(dtype):
  x = tf.cast(tf.linspace(-6.0, 6.0, 3001), dtype)
  keep = tf.random.stateless_uniform([3001], [1, 2]) > 0.3
  scale = tf.cast(keep, tf.float32) / 0.7
  y, g = _value_and_grad(lambda t: gelu_tanh_fused(t, keep, 0.3), x)
  y_ref, g_ref = _value_and_grad(
      lambda t: tf.cast(tf.nn.gelu(tf.cast(t, tf.float32), approximate=True)
                        * scale, t.dtype), x)
  assert y.dtype == dtype and g.dtype == dtype
  tol = 1e-5 if dtype == tf.float32 else 2e-2
  for a, b in ((y, y_ref), (g, g_ref)):
    a, b = tf.cast(a, tf.float32), tf.cast(b, tf.float32)
    np.testing.assert_allclose(a, b, atol=tol, rtol=tol)
    assert not np.any(tf.boolean_mask(a, ~keep))  # dropped: exactly 0


def test_fused_dropout_rounds_once_in_bfloat16():
  # The scale 1/0.9 is applied in float32 and the product rounded once; a
  # bfloat16 scale (1.109375) would bias every survivor by -0.16%.
  x = tf.cast(tf.linspace(1.0, 2.0, 257), tf.bfloat16)
  y = dropout_fused(x, tf.ones([257], tf.bool), 0.1)
  expected = tf.cast(tf.cast(x, tf.float32) / 0.9, tf.bfloat16)
  np.testing.assert_array_equal(tf.cast(y, tf.float32),
                                tf.cast(expected, tf.float32))


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_ffn_seeded_dropout_equals_the_written_out_layer(activation):
  # The training path fuses GELU with its dropout (relu keeps them apart);
  # either must drop and scale exactly as drop_2(W2 drop_1(act(W1 x))) with
  # the seed's masks.
  ffn = PositionwiseFFN(8, 32, activation, dropout=0.3)
  x = tf.constant(np.random.RandomState(1).randn(2, 5, 8), tf.float32)
  seed = tf.constant([5, 6])
  y = ffn(x, training=True, seed=seed)
  x2 = tf.reshape(x, [10, 8])
  keep_1, rate_1 = keep_mask([10, 32], 0.3, sub_seed(seed, 0))
  keep_2, rate_2 = keep_mask([10, 8], 0.3, sub_seed(seed, 1))
  inner = (tf.nn.gelu(ffn.layer_1(x2), approximate=True)
           if activation == "gelu" else tf.nn.relu(ffn.layer_1(x2)))
  inner *= tf.cast(keep_1, tf.float32) / (1 - rate_1)
  out = ffn.layer_2(inner) * tf.cast(keep_2, tf.float32) / (1 - rate_2)
  expected = tf.reshape(ffn.layer_norm(out + x2), [2, 5, 8])
  np.testing.assert_allclose(y, expected, atol=1e-5)


def test_ffn_training_path_equals_inference_path():
  # Without dropout, training (fused GELU) and inference (tf.nn.gelu) must
  # give the same output and the same weight gradients.
  ffn = PositionwiseFFN(8, 32, "gelu", dropout=0.0)
  x = tf.constant(np.random.RandomState(0).randn(2, 5, 8) * 3, tf.float32)
  results = []
  for training in (True, False):
    with tf.GradientTape() as tape:
      y = ffn(x, training=training)
      loss = tf.reduce_sum(y * y)
    results.append((y, tape.gradient(loss, ffn.trainable_variables)))
  (y_t, g_t), (y_i, g_i) = results
  np.testing.assert_allclose(y_t, y_i, atol=1e-5)
  for a, b in zip(g_t, g_i):
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("flags,expected", [
    ("fpu avx2 avx512f avx512_bf16", True),
    ("fpu avx2 amx_bf16 amx_tile", True),
    ("fpu avx2 fma f16c", False),
])
def test_native_bfloat16_reads_cpu_flags(tmp_path, flags, expected):
  info = tmp_path / "cpuinfo"
  info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
  assert cpu_has_native_bfloat16(str(info)) is expected
