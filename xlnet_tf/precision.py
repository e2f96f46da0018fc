"""Numeric precision: the Keras dtype policy of `use_bfloat16` /
`use_float16`, and whether this CPU computes bfloat16 natively."""

from __future__ import annotations

import os
from typing import Optional

import tf_keras as keras

from xlnet_tf.config import ConfigError, RunOptions
from xlnet_tf.cpu import CPUINFO, bfloat16_matmuls_crash, cpu_flags


def bfloat16_crash_problem(cpuinfo: str = CPUINFO) -> Optional[str]:
  """Why bfloat16 compute is refused on this machine, or None: where
  TensorFlow's bfloat16 matmuls would crash the process
  (`cpu.bfloat16_matmuls_crash`), a crash no error handler can catch.

  Example:
    >>> bfloat16_crash_problem("/nonexistent") is None
    True
  """
  if not bfloat16_matmuls_crash(cpu_flags(cpuinfo)):
    return None
  return ("TensorFlow's bfloat16 matmuls crash on this CPU with AVX-512 when "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA')} caps "
          "oneDNN below it; unset ONEDNN_MAX_CPU_ISA or compute in float32")


def dtype_policy(options: RunOptions):
  """The Keras dtype policy the layers use: 16-bit compute with float32
  weights under `use_bfloat16` / `use_float16`, else plain float32.
  `use_bfloat16` is refused (ConfigError) where TensorFlow's bfloat16
  matmuls would crash the process (`bfloat16_crash_problem`)."""
  if options.use_bfloat16:
    problem = bfloat16_crash_problem()
    if problem:
      raise ConfigError(f"use_bfloat16: {problem}")
    return keras.mixed_precision.Policy("mixed_bfloat16")
  if options.use_float16:
    return keras.mixed_precision.Policy("mixed_float16")
  return keras.mixed_precision.Policy("float32")


def cpu_has_native_bfloat16(cpuinfo: str = CPUINFO):
  """True if the CPU multiplies bfloat16 natively (AVX512_BF16 or AMX), False
  if not (bfloat16 matmuls are then emulated and slower than float32), None
  where it cannot tell (no `cpuinfo` file, as off Linux).

  Example:
    >>> cpu_has_native_bfloat16("/nonexistent") is None
    True
  """
  flags = cpu_flags(cpuinfo)
  return None if flags is None else bool({"avx512_bf16", "amx_bf16"} & flags)
