"""Initializers and activations as the original defines them."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.config import RunOptions


def get_initializer(options: RunOptions) -> keras.initializers.Initializer:
  """`init='normal'`: N(0, init_std^2); `init='uniform'`: U(-init_range, init_range).

  Example:
    >>> get_initializer(RunOptions(init="uniform")).get_config()["maxval"]
    0.1
  """
  if options.init == "uniform":
    return keras.initializers.RandomUniform(-options.init_range,
                                            options.init_range)
  return keras.initializers.RandomNormal(stddev=options.init_std)


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


def dtype_policy(options: RunOptions):
  """The Keras dtype policy the layers use: 16-bit compute with float32
  weights under `use_bfloat16` / `use_float16`, else plain float32."""
  if options.use_bfloat16:
    return keras.mixed_precision.Policy("mixed_bfloat16")
  if options.use_float16:
    return keras.mixed_precision.Policy("mixed_float16")
  return keras.mixed_precision.Policy("float32")


def cpu_has_native_bfloat16(cpuinfo: str = "/proc/cpuinfo"):
  """True if the CPU multiplies bfloat16 natively (AVX512_BF16 or AMX), False
  if not (bfloat16 matmuls are then emulated and slower than float32), None
  where it cannot tell (no `cpuinfo` file, as off Linux).

  Example:
    >>> cpu_has_native_bfloat16("/nonexistent") is None
    True
  """
  try:
    with open(cpuinfo) as f:
      flags = next((line for line in f if line.startswith("flags")), "")
  except OSError:
    return None
  return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def fresh(initializer) -> keras.initializers.Initializer:
  """A new instance with the same config: an unseeded Keras initializer
  instance returns the same values on every call, so each weight needs its own.
  """
  return keras.initializers.get(keras.initializers.serialize(
      keras.initializers.get(initializer)))
