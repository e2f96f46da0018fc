"""The machine's dense matmul peak (what a training step's FLOPs are set
against), its CPU model and whether it multiplies bfloat16 natively."""

from __future__ import annotations

import os

import tensorflow as tf
from xlnet_tf.cpu import CPUINFO, cpu_flags, onednn_avx512
from xlnet_tf.precision import cpu_has_native_bfloat16

import step_tf
from bench_common import time_median

# The flags that decide which kernels oneDNN and XLA can use.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16",
             "amx_tile", "amx_bf16")


def measure(threads: int, dtype: str) -> dict:
  """GFLOP/s of dense matmuls in `dtype` ('float32' or 'bfloat16'), the best
  over shapes XLNet-Base multiplies, with the CPU's description. One dtype
  per process: oneDNN capped below AVX-512 aborts the process on a
  bfloat16 matmul."""
  step_tf.set_threads(threads)
  shapes = ((2048, 2048, 2048), (1024, 768, 3072), (1024, 3072, 768))
  best = 0.0
  for m, k, n in shapes:
    a = tf.cast(tf.random.normal([m, k]), dtype)
    b = tf.cast(tf.random.normal([k, n]), dtype)
    seconds = time_median(
        step_tf.compiled(lambda a=a, b=b: tf.matmul(a, b), False), 2, 7)
    best = max(best, 2 * m * k * n / seconds / 1e9)
  return {"gflops": best, "cpu": cpu_description()}


def cpu_description() -> dict:
  """The CPU's model, its flags of `ISA_FLAGS`, the oneDNN cap
  (`ONEDNN_MAX_CPU_ISA`) and what oneDNN makes of them."""
  model = None
  if os.path.exists(CPUINFO):
    with open(CPUINFO, encoding="utf-8") as f:
      model = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), None)
  flags = cpu_flags()
  return {"model": model,
          "flags": [f for f in ISA_FLAGS if f in (flags or ())],
          "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
          "onednn_avx512": onednn_avx512(flags),
          "native_bfloat16": cpu_has_native_bfloat16()}
