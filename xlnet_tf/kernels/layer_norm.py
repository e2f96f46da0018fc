"""LayerNorm's normalization with its gradient written out.

Why: TensorFlow derives the gradient of `(x - mean) / sqrt(var + eps)`
through the moments, three times the ops of the closed form below.
Reference: `layers/layer_norm.py`'s `tf.nn.moments` form
(tests/test_kernels_elementwise.py).
"""

from __future__ import annotations

import tensorflow as tf


def normalize(x: tf.Tensor, epsilon: float) -> tf.Tensor:
  """`(x - mean) / sqrt(var + eps)` over the last axis of float32 `x`, with
  the gradient `inv * (dy - mean(dy) - x_hat * mean(dy * x_hat))`.

  Example:
    >>> normalize(tf.constant([[1.0, 3.0]]), 1e-12).numpy().round(4).tolist()
    [[-1.0, 1.0]]
  """

  @tf.custom_gradient
  def forward(x):
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    inv = tf.math.rsqrt(
        tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True) + epsilon)
    x_hat = centred * inv

    def grad(upstream):
      return inv * (upstream
                    - tf.reduce_mean(upstream, axis=-1, keepdims=True)
                    - x_hat * tf.reduce_mean(upstream * x_hat, axis=-1,
                                             keepdims=True))
    return x_hat, grad
  return forward(x)
