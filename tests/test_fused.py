"""The fused training kernels equal TensorFlow's own ops; the bfloat16
hardware check reads the CPU flags."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.initializers import cpu_has_native_bfloat16
from xlnet_tf.layers import PositionwiseFFN
from xlnet_tf.layers.fused import gelu_tanh_fused


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
