"""The training default, XLA or the graph, against what it weighs: the first
step (trace, and XLA's compile) and the steady step of each, measured, and
the whole run projected from them; prints JSON.

    .venv/bin/python benchmarks/bench_jit_default.py --size base

Per mode (`finetune`: batch 8 of 128, a 1,000-step run; `pretrain`: batch 4
of 128 with 64 of memory, a 100,000-step run, projected), `ours` (the
graph) and `ours+xla` (XLA over the forward/backward pass, as the `Trainer`
compiles it) each run in a process of their own, taking turns pass after
pass (`bench_train_step.py` times them). A run's projected seconds are
`first + (steps - 1) x steady`. The report gives, per mode, which variant
that projection favours and what the default rule (`xlnet_tf.training.
fastest`) picks on this CPU, and what it would pick on an AVX2-only CPU
(whose constants it carries) for the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from bench_common import MODES, SIZES, run_child

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import xlnet_tf as xt  # noqa: E402 (the tree this file belongs to)
from xlnet_tf.cpu import cpu_flags  # noqa: E402
from xlnet_tf.flops import training_flops  # noqa: E402
from xlnet_tf.training import fastest  # noqa: E402

RUN_STEPS = {"finetune": 1000, "pretrain": 100000}
KIND = {"finetune": "fine-tuning", "pretrain": "pretraining"}
VARIANTS = {"ours": "graph", "ours+xla": "xla"}


def run_size(size: str, mode: str, steps: int) -> fastest.RunSize:
  config = xt.XLNetConfig(**SIZES[size])
  m = MODES[mode]
  return fastest.RunSize(
      training_flops(config, m["batch"] * m["seq"], m["seq"] + m.get("mem", 0)),
      config.n_layer, steps, KIND[mode])


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--modes", default="finetune,pretrain")
  parser.add_argument("--passes", type=int, default=2)
  parser.add_argument("--steps", type=int, default=5,
                      help="timed steady steps per process")
  parser.add_argument("--threads", type=int, default=2)
  args = parser.parse_args()
  modes = args.modes.split(",")
  for mode in modes:  # before the first child: a typo costs no minutes
    if mode not in RUN_STEPS:
      raise SystemExit(f"--modes: unknown mode {mode!r}; use {sorted(RUN_STEPS)}")
  flags = cpu_flags()
  report = {"benchmark": "jit_default", "size": args.size,
            "threads": args.threads, "cpu_flags_avx512f": "avx512f" in (
                flags or ()), "results": []}
  for mode in modes:
    got = {v: [] for v in VARIANTS}
    for _ in range(args.passes):
      for spec in VARIANTS:
        name, *extra = spec.split("+")
        r = run_child([f"--size={args.size}", f"--threads={args.threads}",
                       f"--steps={args.steps}", "--warmup=2", "--rounds=1",
                       f"--impl={name}", f"--mode={mode}",
                       *(f"--{f}" for f in extra)],
                      args.threads, ROOT, "bench_train_step.py")
        print(json.dumps({"mode": mode, "variant": spec, **r}),
              file=sys.stderr, flush=True)  # progress
        got[spec].append(r)
    steps = RUN_STEPS[mode]
    row = {}
    for spec, runs in got.items():
      ok = [r for r in runs if "seconds_per_step" in r]
      if not ok:
        row[VARIANTS[spec]] = {"error": runs[-1].get("error")}
        continue
      first = [r["first_step_seconds"] for r in ok]
      steady = [r["seconds_per_step"] for r in ok]
      row[VARIANTS[spec]] = {
          "first_step_seconds": first, "steady_step_seconds": steady,
          "peak_rss_mb": max(r["peak_rss_mb"] for r in ok),
          "projected_run_seconds": statistics.median(first) + (
              steps - 1) * statistics.median(steady)}
    size = run_size(args.size, mode, steps)
    here = fastest.resolve_jit_compile(None, "default", False, 1, size)
    avx2 = fastest.fastest_jit_compile(frozenset({"avx2", "fma"}), False,
                                       size, args.threads)
    result = {"mode": mode, "run_steps": steps, **row,
              "default_here": "xla" if here[0] else "graph",
              "default_here_because": here[1],
              "default_on_avx2_only": "xla" if avx2[0] else "graph",
              "default_on_avx2_only_because": avx2[1]}
    totals = {k: v["projected_run_seconds"] for k, v in row.items()
              if "projected_run_seconds" in v}
    if len(totals) == 2:
      result["faster_projected"] = min(totals, key=totals.get)
      result["default_here_is_faster"] = (
          result["default_here"] == result["faster_projected"])
    report["results"].append(result)
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
