"""What this machine's CPU can do, as the kernels see it: its instruction
set flags (`/proc/cpuinfo`) and the cap `ONEDNN_MAX_CPU_ISA` puts on what
oneDNN uses of them. The speed choices that depend on them (bfloat16 in
`precision`, XLA in `training.fastest`, the kernels' transposed copy) read
them here."""

from __future__ import annotations

import os
from typing import Mapping, Optional

CPUINFO = "/proc/cpuinfo"

# oneDNN's ISA names (`ONEDNN_MAX_CPU_ISA`), lowest first; a cap of
# `AVX2` or below hides AVX-512 from oneDNN's kernels.
_BELOW_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


def cpu_flags(cpuinfo: str = CPUINFO) -> Optional[frozenset]:
  """The instruction-set flags of the first CPU in `cpuinfo`, None where it
  cannot tell (no such file, as off Linux).

  Example:
    >>> cpu_flags("/nonexistent") is None
    True
  """
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      line = next((line for line in f if line.startswith("flags")), "")
  except OSError:
    return None
  return frozenset(line.partition(":")[2].split())


def onednn_avx512(flags: Optional[frozenset],
                  environ: Mapping[str, str] = os.environ) -> Optional[bool]:
  """True if oneDNN's kernels use AVX-512 here: the CPU has it
  (`avx512f` in `flags`) and `ONEDNN_MAX_CPU_ISA` does not cap oneDNN
  below it. None if `flags` is None (unknown CPU).

  Example:
    >>> onednn_avx512(frozenset({"avx2", "avx512f"}), {})
    True
    >>> onednn_avx512(frozenset({"avx2", "avx512f"}),
    ...               {"ONEDNN_MAX_CPU_ISA": "avx2"})
    False
    >>> onednn_avx512(frozenset({"avx2", "fma"}), {})
    False
  """
  if flags is None:
    return None
  cap = environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
  return "avx512f" in flags and cap not in _BELOW_AVX512


def bfloat16_matmuls_crash(flags: Optional[frozenset],
                           environ: Mapping[str, str] = os.environ) -> bool:
  """True where TensorFlow's bfloat16 matmuls crash the process: on a CPU
  with AVX-512 TensorFlow hands them to oneDNN, which segfaults when
  `ONEDNN_MAX_CPU_ISA` caps it below AVX-512 (TensorFlow 2.20; an
  AVX2-only CPU computes them without oneDNN).

  Example:
    >>> bfloat16_matmuls_crash(frozenset({"avx2", "avx512f"}),
    ...                        {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    True
    >>> bfloat16_matmuls_crash(frozenset({"avx2", "fma"}),
    ...                        {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    False
  """
  return (flags is not None and "avx512f" in flags
          and not onednn_avx512(flags, environ))
