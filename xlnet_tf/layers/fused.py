"""Elementwise chains run as one XLA kernel each, forward and backward, for
training.

TensorFlow runs `0.5 x (1 + tanh(c (x + 0.044715 x^3)))` as eight kernels
that each read and write the whole `[B * L, d_inner]` activation, and its
derived gradient as a dozen more; on CPU that was ~7% of a fine-tuning step.
Here the forward pass and the hand-written derivative are each one compiled
loop over the tensor. The backward kernel recomputes `tanh` from `x` instead
of keeping it, so the activation memory stays one tensor.

Only the training path uses them: inference keeps TensorFlow's own ops, which
oneDNN fuses into the preceding matmul, and which a SavedModel can serve
without XLA.
"""

from __future__ import annotations

import math

import tensorflow as tf

_C = math.sqrt(2.0 / math.pi)
_A = 0.044715


def _compiled(fn):
  return tf.function(fn, jit_compile=True, autograph=False)


@_compiled
def _gelu_forward(x):
  return 0.5 * x * (1.0 + tf.tanh(_C * (x + _A * x * x * x)))


@_compiled
def _gelu_backward(x, dy):
  # d/dx [0.5 x (1 + t)] = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)
  x2 = x * x
  t = tf.tanh(_C * x * (1.0 + _A * x2))
  return dy * (0.5 * (1.0 + t) +
               0.5 * x * (1.0 - t * t) * _C * (1.0 + 3.0 * _A * x2))


@tf.custom_gradient
def gelu_tanh_fused(x: tf.Tensor) -> tf.Tensor:
  """The original's tanh GELU, `x [...] -> [...]`, as one compiled kernel
  with a one-kernel gradient (same values as `tf.nn.gelu(x, approximate=True)`
  to float rounding).

  Example:
    >>> round(float(gelu_tanh_fused(tf.constant(1.0))), 6)
    0.841192
    >>> x = tf.constant([-1.0, 0.5])
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(x)
    ...   y = gelu_tanh_fused(x)
    >>> [round(g, 4) for g in tape.gradient(y, x).numpy().tolist()]
    [-0.083, 0.8674]
  """
  return _gelu_forward(x), lambda dy: _gelu_backward(x, dy)
