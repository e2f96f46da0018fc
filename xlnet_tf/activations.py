"""Activations as the original defines them, by name (`ff_activation`)."""

from __future__ import annotations

import tensorflow as tf


def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """GELU in its tanh approximation, as the original (HuggingFace: gelu_new):
  `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`. TensorFlow's own op,
  which oneDNN fuses into the preceding matmul at inference.

  Example:
    >>> round(float(gelu_tanh(tf.constant(1.0))), 6)
    0.841192
  """
  return tf.nn.gelu(x, approximate=True)


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
  """GELU in its exact erf form, x * Phi(x) (HuggingFace: gelu).

  Example:
    >>> round(float(gelu_exact(tf.constant(1.0))), 6)
    0.841345
  """
  return tf.nn.gelu(x, approximate=False)


def get_activation(name: str):
  """'relu', 'gelu' (tanh form, the original's) or 'gelu_exact' (erf form)
  -> callable."""
  if name == "relu":
    return tf.nn.relu
  if name == "gelu":
    return gelu_tanh
  if name == "gelu_exact":
    return gelu_exact
  raise ValueError(f"unsupported activation {name!r}; use 'relu', 'gelu' or "
                   "'gelu_exact'")
