"""The training settings chosen for speed where the user leaves them unset:
what measured fastest on each kind of CPU (docs/speed.md#measured), not
what is assumed.

XLA for the forward/backward pass (`TrainOptions.jit_compile`), by what
the CPU itself has (its flags), not by caps put on the libraries:
- on an AVX2-only CPU, XLA trained faster than TensorFlow's graph
  (TensorFlow's own kernels are built for AVX, without AVX2 or FMA; XLA
  compiles for this CPU, fuses the elementwise ops and keeps both cores
  busier);
- on a CPU with AVX-512 the graph is faster, and stays so with oneDNN (and
  XLA) capped at AVX2 (`ONEDNN_MAX_CPU_ISA=AVX2`): the cap does not make
  such a CPU train like an AVX2-only one;
- on a GPU, with several replicas in one process, or where the CPU is
  unknown, the graph (not measured); a TPU compiles every step anyway.
"""

from __future__ import annotations

from typing import Optional, Tuple

from xlnet_tf.cpu import CPUINFO, cpu_flags


def fastest_jit_compile(flags: Optional[frozenset], accelerator: bool
                        ) -> Tuple[bool, str]:
  """`(XLA or not, why)` for training on a machine with CPU `flags`
  (`cpu.cpu_flags`) and an `accelerator` (a GPU) or none.

  Example:
    >>> fastest_jit_compile(frozenset({"avx2", "fma"}), False)
    (True, 'XLA, the faster on a CPU without AVX-512')
    >>> fastest_jit_compile(frozenset({"avx2", "avx512f"}), False)
    (False, "TensorFlow's graph, the faster on a CPU with AVX-512")
  """
  if accelerator:
    return False, "TensorFlow's graph on an accelerator"
  if flags is None:
    return False, "TensorFlow's graph (the CPU's flags are unknown)"
  if "avx512f" in flags:
    return False, "TensorFlow's graph, the faster on a CPU with AVX-512"
  return True, "XLA, the faster on a CPU without AVX-512"


def resolve_jit_compile(asked: Optional[bool], strategy: str,
                        accelerator: bool, replicas: int,
                        cpuinfo: str = CPUINFO) -> Tuple[bool, str]:
  """`(XLA or not, why)`: `asked` where the user set it, else the fastest
  here (`fastest_jit_compile`) for one replica in this process; with
  `strategy` 'tpu' the TPU compiles anyway, and several replicas in one
  process (mirrored) keep the graph, as XLA was not measured there.

  Example:
    >>> resolve_jit_compile(False, "default", False, 1)
    (False, 'asked (--jit_compile=false)')
    >>> resolve_jit_compile(None, "mirrored", False, 2)
    (False, "TensorFlow's graph with 2 replicas in this process")
  """
  if asked is not None:
    return asked, f"asked (--jit_compile={str(asked).lower()})"
  if strategy == "tpu":
    return False, "the TPU compiles every step itself"
  if replicas > 1:
    return False, f"TensorFlow's graph with {replicas} replicas in this process"
  return fastest_jit_compile(cpu_flags(cpuinfo), accelerator)
