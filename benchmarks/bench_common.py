"""What the train-step benchmarks measure and how their processes talk:
model sizes, modes (the issue's reference configs), variant names, the
timing of a step, the FLOPs of a training step and running one measuring
process. Imports no framework, so a driver stays light while its children
load TensorFlow or torch.

Modes:
  finetune  classification train step, batch 8, seq 128, Adam
  pretrain  two-stream train step, batch 4, seq 128, reuse 64, mem 64,
            num_predict 21, tied LM loss
  infer1    classification forward, batch 1, seq 128 (latency)
  infer32   classification forward, batch 32, seq 128 (throughput)
  mem512    classification train step at seq 512 (batch --mem_batch), for
            peak memory with and without recompute
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

SIZES = {
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072,
                 n_token=32000),
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64,
                  d_inner=4096, n_token=32000),
    "small": dict(n_layer=2, d_model=128, n_head=4, d_head=32, d_inner=512,
                  n_token=32000),
}
MODES = {
    "finetune": dict(batch=8, seq=128, train=True),
    "pretrain": dict(batch=4, seq=128, reuse=64, mem=64, num_predict=21,
                     train=True),
    "infer1": dict(batch=1, seq=128, train=False),
    "infer32": dict(batch=32, seq=128, train=False),
    "mem512": dict(batch=4, seq=512, train=True),
}
IMPLS = ("ours", "garden", "hf")
FLAGS = ("xla", "xla_all", "bf16", "compile", "recompute", "inter1")
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_variant(spec: str):
  """'garden+xla' -> ('garden', {'xla'}); unknown parts are an error."""
  name, *flags = spec.split("+")
  if name not in IMPLS:
    raise SystemExit(f"--impls: unknown implementation {name!r} in {spec!r}")
  unknown = set(flags) - set(FLAGS)
  if unknown:
    raise SystemExit(f"--impls: unknown variant flag(s) {sorted(unknown)} in "
                     f"{spec!r}; use {FLAGS}")
  return name, set(flags)


def cpu_seconds() -> float:
  """CPU time of this process so far, every thread, user + system, to the
  nanosecond (`os.times` counts 10 ms ticks: up to 0.017 cores of error on
  a 1.2 s step of 2 cores)."""
  return time.process_time()


def timed(step):
  """`(wall seconds, cores busy)` of one call of `step`: the process's CPU
  seconds over the wall seconds (2.0 = both of 2 cores busy throughout)."""
  c0, t0 = cpu_seconds(), time.perf_counter()
  step()
  wall = time.perf_counter() - t0
  return wall, (cpu_seconds() - c0) / wall


def time_steps(step, warmup: int, steps: int):
  """`(median seconds, median cores busy)` of `steps` calls of `step` after
  `warmup` untimed ones (`step` must wait for its result)."""
  for _ in range(warmup):
    step()
  walls, busy = zip(*(timed(step) for _ in range(steps)))
  return statistics.median(walls), statistics.median(busy)


def time_median(step, warmup: int, steps: int) -> float:
  """Median seconds of `steps` calls of `step` after `warmup` untimed ones."""
  return time_steps(step, warmup, steps)[0]


def figures(mode: str, seconds: float, **extra) -> dict:
  """Seconds per step with the rates they give in `mode`."""
  m = MODES[mode]
  return {"seconds_per_step": seconds, **extra,
          "examples_per_sec": m["batch"] / seconds,
          "tokens_per_sec": m["batch"] * m["seq"] / seconds}


def flops_per_step(size: str, mode: str) -> float:
  """Training FLOPs: 6 x non-embedding params x tokens (forward 2, backward
  4) + the attention products (scores, position scores over 2L rows,
  weighted sum), x 3 for forward and backward."""
  s, m = SIZES[size], MODES[mode]
  d, f, n = s["d_model"], s["d_inner"], s["n_layer"]
  params = n * (5 * d * d + 2 * d * f)  # q k v r o + FFN, no embeddings
  b, l = m["batch"], m["seq"]
  klen = l + m.get("mem", 0)
  attn = n * 2 * b * l * d * (2 * klen + (klen + l))
  return 6 * params * b * l + 3 * attn


def run_child(args: list, threads: Optional[int], pythonpath: str,
              script: str = "bench_train_step.py") -> dict:
  """Runs `script` (of this folder) with `args` in a fresh process whose
  first import path is `pythonpath` (the tree whose `xlnet_tf` it times) and
  returns the JSON of its last line, or `{"error": last stderr line}`."""
  cmd = [sys.executable, os.path.join(HERE, script), *args]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
      p for p in (pythonpath, os.environ.get("PYTHONPATH")) if p))
  if threads:
    # OpenMP reads its thread count when the framework loads, before any
    # code of the child could set it.
    env.setdefault("OMP_NUM_THREADS", str(threads))
  res = subprocess.run(cmd, capture_output=True, text=True, env=env)
  if res.returncode != 0:
    err = res.stderr.strip()
    return {"error": err.splitlines()[-1] if err else
            f"exit {res.returncode}"}
  return json.loads(res.stdout.strip().splitlines()[-1])


def imported_from(result: dict, tree: str) -> None:
  """Refuses (exits) a child's `result` whose `source` (the `__file__` of
  the package it timed) is not inside `tree`."""
  if "error" in result:
    raise SystemExit(f"{tree}: {result['error']}")
  if not os.path.realpath(result["source"]).startswith(
      os.path.realpath(tree) + os.sep):
    raise SystemExit(f"{tree}: the process imported xlnet_tf from "
                     f"{result['source']}, not from this tree")


def print_report(report: dict, load_before, started: float) -> None:
  """Prints a benchmark's JSON `report` with what says how quiet the
  machine was: the load averages before and after, and the wall time since
  `started` (other processes slow a 2-thread run down)."""
  print(json.dumps(dict(report, load_average_1_5_15={
      "before": [round(x, 2) for x in load_before],
      "after": [round(x, 2) for x in os.getloadavg()]},
      wall_seconds=round(time.time() - started, 1)), indent=2))
