"""XLA or TensorFlow's graph for the forward/backward pass
(`TrainOptions.jit_compile`) where the user leaves it unset: whichever
finishes the run sooner, compile included (docs/speed.md#the-xla-default).

The rule, in one sentence: XLA only on a CPU without AVX-512, training one
replica in this process, when the steps of the run times the time XLA saves
per step there exceeds the time XLA takes to compile the step; otherwise
the graph. Both sides are estimates from the model's size:
- a step's seconds: its training FLOPs (`flops.training_flops`) over the
  graph's rate per core on such a CPU;
- the share of a step XLA saves: measured separately for fine-tuning and
  for the two-stream pretraining step;
- the compile's seconds: a part per layer.
The constants below were measured on a 2-core AVX2-only EPYC
(benchmarks/README.md, "The training default: XLA or the graph").

On a CPU with AVX-512 the graph is faster step for step, and stays so with
oneDNN capped at AVX2 (`ONEDNN_MAX_CPU_ISA`), so the CPU's own flags
decide; on a GPU, with several replicas in one process or where the CPU is
unknown, the graph (XLA not measured there); a TPU compiles every step
anyway.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Tuple

from xlnet_tf.cpu import CPUINFO, cpu_flags

# The share of a step's time XLA saved on the AVX2-only EPYC, rounded down
# from the mean of the runs there: fine-tuning +1.2%, pretraining +7%.
XLA_SAVES = {"fine-tuning": 0.01, "pretraining": 0.05}
# The graph's training rate there (XLNet-Base, float32), FLOP/s per core.
GRAPH_FLOPS_PER_CORE = 40e9
# XLA's compile of the forward/backward pass there, seconds per layer
# (XLNet-Base fine-tuning: 206 s); the pretraining step compiles 1.3x as
# long as fine-tuning's, and a fixed part is lost in the noise (both
# measured on a 2-layer and a 12-layer model).
COMPILE_SECONDS_PER_LAYER = {"fine-tuning": 17.0, "pretraining": 22.0}


@dataclasses.dataclass(frozen=True)
class RunSize:
  """What a run costs: `step_flops`, the training FLOPs of one optimizer
  step in this process (0 where unknown); `layers` the model's layer count;
  `steps` the run's `train_steps`; `kind` 'fine-tuning' or 'pretraining'
  (the two-stream step)."""
  step_flops: float
  layers: int
  steps: int
  kind: str = "fine-tuning"


def xla_pays(size: RunSize, cores: int) -> Tuple[bool, str]:
  """`(XLA or not, why)` on a CPU without AVX-512 with `cores` cores: XLA
  when `size.steps` steps at the share of a step it saves outweigh its
  compile, all estimated.

  Example:
    >>> base = 6 * 92e6 * 8 * 128    # XLNet-Base, batch 8 of 128 tokens
    >>> xla_pays(RunSize(base, 12, 1000), cores=2)[0]
    False
    >>> xla_pays(RunSize(base, 12, 10000), cores=2)[0]
    True
    >>> xla_pays(RunSize(base / 2, 12, 100000, "pretraining"), cores=2)[1]
    'XLA: over 100,000 steps it saves ~17,664 s (5% of ~3.5 s a step), its compile takes ~264 s'
  """
  step = size.step_flops / (GRAPH_FLOPS_PER_CORE * max(cores, 1))
  share = XLA_SAVES[size.kind]
  saved = size.steps * share * step
  compile_s = COMPILE_SECONDS_PER_LAYER[size.kind] * size.layers
  because = (f"over {size.steps:,} steps it saves ~{saved:,.0f} s ({share:.0%} "
             f"of ~{step:.2g} s a step), its compile takes ~{compile_s:,.0f} s")
  if saved > compile_s:
    return True, f"XLA: {because}"
  return False, f"TensorFlow's graph: XLA would not pay, {because}"


def fastest_jit_compile(flags: Optional[frozenset], accelerator: bool,
                        size: RunSize, cores: int) -> Tuple[bool, str]:
  """`(XLA or not, why)` for a run of `size` on a machine with CPU `flags`
  (`cpu.cpu_flags`), `cores` cores and an `accelerator` (a GPU) or none.

  Example:
    >>> run = RunSize(6 * 92e6 * 4 * 128, 12, 100000, "pretraining")
    >>> fastest_jit_compile(frozenset({"avx2", "avx512f"}), False, run, 2)
    (False, "TensorFlow's graph, the faster on a CPU with AVX-512")
    >>> fastest_jit_compile(frozenset({"avx2", "fma"}), False, run, 2)[0]
    True
  """
  if accelerator:
    return False, "TensorFlow's graph on an accelerator"
  if flags is None:
    return False, "TensorFlow's graph (the CPU's flags are unknown)"
  if "avx512f" in flags:
    return False, "TensorFlow's graph, the faster on a CPU with AVX-512"
  return xla_pays(size, cores)


def resolve_jit_compile(asked: Optional[bool], strategy: str,
                        accelerator: bool, replicas: int, size: RunSize,
                        cpuinfo: str = CPUINFO) -> Tuple[bool, str]:
  """`(XLA or not, why)`: `asked` where the user set it, else the fastest
  here (`fastest_jit_compile`) for one replica in this process; with
  `strategy` 'tpu' the TPU compiles anyway, and several replicas in one
  process (mirrored) keep the graph, as XLA was not measured there.

  Example:
    >>> resolve_jit_compile(False, "default", False, 1, RunSize(0, 1, 1))
    (False, 'asked (--jit_compile=false)')
    >>> resolve_jit_compile(None, "mirrored", False, 2, RunSize(0, 1, 1))
    (False, "TensorFlow's graph with 2 replicas in this process")
  """
  if asked is not None:
    return asked, f"asked (--jit_compile={str(asked).lower()})"
  if strategy == "tpu":
    return False, "the TPU compiles every step itself"
  if replicas > 1:
    return False, f"TensorFlow's graph with {replicas} replicas in this process"
  return fastest_jit_compile(cpu_flags(cpuinfo), accelerator, size,
                             len(os.sched_getaffinity(0)))
