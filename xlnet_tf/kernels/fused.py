"""Elementwise chains as one XLA kernel each, forward and backward (training
only).

Why: TensorFlow runs the tanh GELU as eight kernels over the whole
`[B * L, d_inner]` activation and its derived gradient as a dozen more, and
applying a dropout mask as four (cast, scale, cast, multiply); each pass
reads and writes the full tensor. Here each chain is one compiled loop: GELU
with the dropout that follows it (both directions), or a dropout mask alone.
The backward recomputes `tanh` from `x` instead of keeping it, and keeps only
the 1-byte mask of a dropout, so the activation memory stays one tensor plus
the mask.

Inside the kernels the arithmetic is float32 whatever the tensor's dtype:
XLA on CPU would otherwise round every intermediate of a bfloat16 chain back
to bfloat16 (less accurate, and slower).

Only the training path uses them: inference keeps TensorFlow's own ops, which
oneDNN fuses into the preceding matmul and which a SavedModel serves without
XLA. Reference: `tf.nn.gelu(x, approximate=True)` and `x * keep / (1 - rate)`
(tests/test_kernels_elementwise.py).
"""

from __future__ import annotations

import math
from typing import Optional

import tensorflow as tf

_C = math.sqrt(2.0 / math.pi)
_A = 0.044715


def _compiled(fn):
  return tf.function(fn, jit_compile=True, autograph=False)


def _gelu(x):
  """float32 `x` -> `0.5 x (1 + tanh(c (x + a x^3)))`."""
  return 0.5 * x * (1.0 + tf.tanh(_C * (x + _A * x * x * x)))


def _gelu_slope(x):
  """float32 `x` -> d gelu / dx = `0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a
  x^2)`, t = tanh(c (x + a x^3))."""
  x2 = x * x
  t = tf.tanh(_C * x * (1.0 + _A * x2))
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _C * (1.0 + 3.0 * _A * x2)


def _kept(y, keep, inv_keep):
  """float32 `y` with dropped elements zeroed and kept ones scaled; `keep`
  None for no dropout."""
  if keep is None:
    return y
  return y * tf.where(keep, tf.constant(inv_keep, tf.float32), 0.0)


@_compiled
def _gelu_forward(x, keep, inv_keep):
  y = _gelu(tf.cast(x, tf.float32))
  return tf.cast(_kept(y, keep, inv_keep), x.dtype)


@_compiled
def _gelu_backward(x, dy, keep, inv_keep):
  dx = tf.cast(dy, tf.float32) * _gelu_slope(tf.cast(x, tf.float32))
  return tf.cast(_kept(dx, keep, inv_keep), x.dtype)


@_compiled
def _scale_kept(x, keep, inv_keep):
  return tf.cast(_kept(tf.cast(x, tf.float32), keep, inv_keep), x.dtype)


def gelu_tanh_fused(x: tf.Tensor, keep: Optional[tf.Tensor] = None,
                    rate: float = 0.0) -> tf.Tensor:
  """The original's tanh GELU, `x [...] -> [...]`, then optionally dropout by
  the bool mask `keep` (x's shape; survivors scaled by `1 / (1 - rate)`), as
  one compiled kernel with a one-kernel gradient. Same values as
  `tf.nn.gelu(x, approximate=True)` to float rounding.

  Example:
    >>> round(float(gelu_tanh_fused(tf.constant(1.0))), 6)
    0.841192
    >>> x = tf.constant([-1.0, 0.5])
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(x)
    ...   y = gelu_tanh_fused(x)
    >>> [round(g, 4) for g in tape.gradient(y, x).numpy().tolist()]
    [-0.083, 0.8674]
    >>> y = gelu_tanh_fused(tf.constant([1.0, 1.0]), tf.constant([True, False]),
    ...                     0.5)
    >>> [round(v, 6) for v in y.numpy().tolist()]
    [1.682384, 0.0]
  """
  inv_keep = 1.0 / (1.0 - rate)

  @tf.custom_gradient
  def fused(x):
    return (_gelu_forward(x, keep, inv_keep),
            lambda dy: _gelu_backward(x, dy, keep, inv_keep))
  return fused(x)


def dropout_fused(x: tf.Tensor, keep: tf.Tensor, rate: float) -> tf.Tensor:
  """`x * keep / (1 - rate)` for a bool `keep` of x's shape: one compiled
  kernel forward; the gradient holds on to `keep` alone (1 byte per element).

  The backward is TensorFlow's ops, with the cast of the mask waiting for the
  incoming gradient: a compiled backward, or a cast free to run early (every
  layer's cast then alive at once), peaked higher in memory
  (benchmarks/README.md). In bfloat16 the backward's scale rounds (1/0.9 to
  1.109375), a 0.16% bias, below one bfloat16 rounding step.

  Example:
    >>> x = tf.constant([1.0, 2.0, 3.0])
    >>> keep = tf.constant([True, False, True])
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(x)
    ...   y = dropout_fused(x, keep, 0.5)
    >>> y.numpy().tolist(), tape.gradient(y, x).numpy().tolist()
    ([2.0, 0.0, 6.0], [2.0, 0.0, 2.0])
  """
  inv_keep = 1.0 / (1.0 - rate)

  @tf.custom_gradient
  def drop(x):
    def grad(dy):
      with tf.control_dependencies([dy]):  # not cast ahead of its use
        scale = tf.cast(keep, dy.dtype)
      return dy * scale * tf.cast(inv_keep, dy.dtype)
    return _scale_kept(x, keep, inv_keep), grad
  return drop(x)
