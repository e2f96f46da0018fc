"""The elementwise kernels (`xlnet_tf/kernels/fused.py`, `dropout.py`,
`layer_norm.py`, `feedforward.py`, `matmul.py`) equal the reference path:
TensorFlow's own ops, the LayerNorm and FFN as written; the bfloat16
hardware check reads the CPU flags."""

import importlib

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.precision import cpu_has_native_bfloat16
from xlnet_tf.kernels import (dropout_fused, gelu_tanh_fused, keep_mask,
                              matmul_copied_transpose, seeded_dropout)
from xlnet_tf.layers import LayerNorm, PositionwiseFFN, SeededDropout
from xlnet_tf.seeds import sub_seed
from conftest import assert_close


def _value_and_grad(fn, x):
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = fn(x)
    loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cos(
        tf.cast(x, tf.float32)))  # a non-uniform upstream gradient
  return y, tape.gradient(loss, x)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_gelu_equals_tensorflow_gelu(dtype):
  x = tf.cast(tf.linspace(-8.0, 8.0, 4001), dtype)
  y, g = _value_and_grad(gelu_tanh_fused, x)
  y_ref, g_ref = _value_and_grad(
      lambda t: tf.nn.gelu(t, approximate=True), x)
  assert y.dtype == dtype and g.dtype == dtype
  tol = 1e-5 if dtype == tf.float32 else 2e-2
  for a, b in ((y, y_ref), (g, g_ref)):
    assert_close(tf.cast(a, tf.float32), tf.cast(b, tf.float32), tol, tol)


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
    assert_close(a, b, tol, tol)
    assert not np.any(tf.boolean_mask(a, ~keep))  # dropped: exactly 0


def test_fused_dropout_equals_mask_and_scale():
  x = tf.constant(np.random.RandomState(2).randn(6, 7), tf.float32)
  keep = tf.random.stateless_uniform([6, 7], [3, 4]) > 0.25
  y, g = _value_and_grad(lambda t: dropout_fused(t, keep, 0.25), x)
  y_ref, g_ref = _value_and_grad(
      lambda t: t * tf.cast(keep, tf.float32) / 0.75, x)
  assert_close(y, y_ref)
  assert_close(g, g_ref)


def test_fused_dropout_rounds_once_in_bfloat16():
  # The scale 1/0.9 is applied in float32 and the product rounded once; a
  # bfloat16 scale (1.109375) would bias every survivor by -0.16%.
  x = tf.cast(tf.linspace(1.0, 2.0, 257), tf.bfloat16)
  y = dropout_fused(x, tf.ones([257], tf.bool), 0.1)
  expected = tf.cast(tf.cast(x, tf.float32) / 0.9, tf.bfloat16)
  np.testing.assert_array_equal(tf.cast(y, tf.float32),
                                tf.cast(expected, tf.float32))


def test_seeded_dropout_paths_drop_at_the_rate_and_replay():
  """The 16-bit masks (fast) and the float uniform masks (reference) are
  different draws of the same law: same rate, same scale, same seed -> same
  mask."""
  x = tf.ones([400, 100])
  seed = tf.constant([7, 9])
  keep, realised = keep_mask([400, 100], 0.3, seed)
  assert realised == round(0.3 * 65536) / 65536
  for fast in (True, False):
    drop = SeededDropout(0.3, fast_kernels=fast)
    y = drop(x, training=True, seed=seed)
    kept = y.numpy() > 0
    assert abs(1 - kept.mean() - 0.3) < 0.01
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.7, rtol=1e-4)
    assert_close(drop(x, training=True, seed=seed), y, atol=0)
  np.testing.assert_array_equal(seeded_dropout(x, 0.3, seed) > 0, keep)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_layer_norm_fast_equals_reference(dtype):
  """The closed-form LayerNorm gradient equals TensorFlow's derivation of
  the textbook formula, for the input, gamma and beta."""
  rng = np.random.default_rng(1)
  x = tf.constant(3 + 2 * rng.standard_normal([2, 5, 8]), tf.float32)
  results = []
  for fast in (True, False):
    ln = LayerNorm(8, fast_kernels=fast, dtype=dtype)
    ln.build(None)
    ln.gamma.assign(1 + 0.1 * np.arange(8))
    ln.beta.assign(0.1 * np.arange(8))
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = ln(tf.cast(x, ln.compute_dtype))
      loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.sin(x))
    results.append([y] + tape.gradient(loss, [x, ln.gamma, ln.beta]))
  tol = 1e-5 if dtype == "float32" else 2e-2
  for a, b in zip(*results):
    assert_close(tf.cast(a, tf.float32), tf.cast(b, tf.float32), tol, tol)


def test_matmul_copied_transpose_equals_matmul():
  # In a graph, where grappler could fold the copy back into the matmul.
  rng = np.random.RandomState(3)
  x = tf.constant(rng.randn(6, 5), tf.float32)
  w = tf.constant(rng.randn(5, 7), tf.float32)
  upstream = tf.constant(rng.randn(6, 7), tf.float32)

  @tf.function
  def value_and_grads(matmul):
    with tf.GradientTape() as tape:
      tape.watch([x, w])
      y = matmul(x, w)
      loss = tf.reduce_sum(y * upstream)
    return [y] + tape.gradient(loss, [x, w])
  for a, b in zip(value_and_grads(matmul_copied_transpose),
                  value_and_grads(tf.matmul)):
    assert_close(a, b, atol=1e-5)


@pytest.mark.parametrize("activation", ["gelu", "relu"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("copied_transpose", [True, False])
def test_ffn_fast_equals_reference(activation, training, copied_transpose,
                                   monkeypatch):
  """Without dropout the fast FFN (2-D matmuls, fused GELU in training, the
  first layer's input gradient by a transposed copy or not, whatever this
  CPU) and the formula as written give the same outputs and gradients."""
  monkeypatch.setattr(importlib.import_module("xlnet_tf.kernels.feedforward"),
                      "transposed_copy_pays", lambda: copied_transpose)
  x = tf.constant(np.random.RandomState(0).randn(2, 5, 8) * 3, tf.float32)
  results = []
  for fast in (True, False):
    ffn = PositionwiseFFN(8, 32, activation, dropout=0.0, fast_kernels=fast)
    ffn.build(None)
    if results:
      ffn.set_weights(weights)
    weights = ffn.get_weights()
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = ffn(x, training=training)
      loss = tf.reduce_sum(y * tf.cos(x))
    results.append([y] + tape.gradient(loss, [x] + ffn.trainable_variables))
  for a, b in zip(*results):
    assert_close(a, b, atol=1e-5)


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_ffn_seeded_dropout_equals_the_written_out_layer(activation):
  # The fast training path fuses GELU with its dropout (relu keeps them
  # apart); either must drop and scale exactly as drop_2(W2 drop_1(act(W1
  # x))) with the seed's masks.
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
  assert_close(y, expected)


@pytest.mark.parametrize("flags,expected", [
    ("fpu avx2 avx512f avx512_bf16", True),
    ("fpu avx2 amx_bf16 amx_tile", True),
    ("fpu avx2 fma f16c", False),
])
def test_native_bfloat16_reads_cpu_flags(tmp_path, flags, expected):
  info = tmp_path / "cpuinfo"
  info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
  assert cpu_has_native_bfloat16(str(info)) is expected
