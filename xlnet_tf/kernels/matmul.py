"""A matmul whose input gradient multiplies by a transposed copy of the
weight, for the FFN's first projection in training.

Why: TensorFlow's gradient of `x @ w` computes `dy @ wᵀ` as one matmul with
a transposed right operand. Where oneDNN runs AVX-512, that matmul is much
slower for the FFN's `[R, d_inner] x [d_inner, d_model]` shape than a plain
matmul on a copy of `wᵀ`. The copy is only `d_model x d_inner` floats, so
it costs less than it saves. Without AVX-512 the copy does not pay, so
`transposed_copy_pays` decides per CPU (benchmarks/README.md, issue 39).

Grappler folds a plain `Transpose` feeding a `MatMul` back into
`transpose_b`, so the copy goes through a 3-D transpose that it leaves
alone. Reference: `tf.matmul(x, w)` and TensorFlow's own gradient
(tests/test_kernels_elementwise.py).
"""

from __future__ import annotations

import functools

import tensorflow as tf

from xlnet_tf.cpu import cpu_flags, onednn_avx512


@functools.lru_cache(maxsize=None)
def transposed_copy_pays() -> bool:
  """True where oneDNN's kernels use AVX-512 on this CPU (read once)."""
  return bool(onednn_avx512(cpu_flags()))


def transposed_copy(w: tf.Tensor) -> tf.Tensor:
  """`w [K, N] -> wᵀ [N, K]` as a materialized copy (see module docstring).

  Example:
    >>> transposed_copy(tf.constant([[1, 2, 3]])).numpy().tolist()
    [[1], [2], [3]]
  """
  k, n = w.shape
  return tf.reshape(tf.transpose(tf.reshape(w, [k, n, 1]), [1, 0, 2]), [n, k])


def matmul_copied_transpose(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
  """`x [R, K] @ w [K, N] -> [R, N]`, the same values and gradients as
  `tf.matmul`; the gradient of `x` is `dy @ transposed_copy(w)`.

  Example:
    >>> x, w = tf.constant([[1.0, 2.0]]), tf.constant([[3.0], [4.0]])
    >>> with tf.GradientTape() as tape:
    ...   tape.watch(x)
    ...   y = matmul_copied_transpose(x, w)
    >>> y.numpy().tolist(), tape.gradient(y, x).numpy().tolist()
    ([[11.0]], [[3.0, 4.0]])
  """
  @tf.custom_gradient
  def forward(x, w):
    def grad(dy):
      return (tf.matmul(dy, transposed_copy(w)),
              tf.matmul(x, dy, transpose_a=True))
    return tf.matmul(x, w), grad
  return forward(x, w)
