"""The fine-tuning and pretraining train steps of two source trees of this
project, taking turns in one run; prints JSON.

    git worktree add /tmp/xlnet_old <old commit>
    .venv/bin/python benchmarks/bench_old_vs_new.py --old /tmp/xlnet_old \\
        --new . --rounds 6

Each round times, for each mode, one process per tree, the trees in turn
and their order flipped every round, so a slow spell of a shared machine
lands on both alike. A process imports `xlnet_tf` from its tree (first on
its PYTHONPATH, ahead of the editable install; the report names the file it
imported) and times the step as `bench_train_step.py --impl=ours` does, with
the same configs (`bench_common.py`): the median of --steps steps after
--warmup untimed ones, in float32 on --threads threads. Per mode the report
gives each tree's per-round medians, their median, min and max, the ratio
new/old of the medians of medians (seconds per step: above 1 = the new tree
is slower) and the new/old ratio within each round with its min and max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from bench_common import SIZES, imported_from, run_child

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = ("old", "new")


def time_tree(args, tree: str, mode: str) -> dict:
  """One process timing `mode` with the `xlnet_tf` of `tree`."""
  r = run_child(["--impl=ours", f"--mode={mode}", f"--size={args.size}",
                 f"--threads={args.threads}", f"--steps={args.steps}",
                 f"--warmup={args.warmup}", "--rounds=1"], args.threads, tree)
  imported_from(r, tree)
  return r


def spread(seconds: list) -> dict:
  return {"rounds": seconds, "median": statistics.median(seconds),
          "min": min(seconds), "max": max(seconds)}


def compare(times: dict) -> dict:
  """`{"old": [s, ...], "new": [s, ...]}` (a median per round) -> report."""
  ratio = statistics.median(times["new"]) / statistics.median(times["old"])
  per_round = [n / o for o, n in zip(times["old"], times["new"])]
  return {**{tree: spread(times[tree]) for tree in TREES},
          "new_over_old": ratio, "within_3_percent": abs(ratio - 1) <= 0.03,
          "round_ratios": per_round, "round_ratio_min": min(per_round),
          "round_ratio_max": max(per_round)}


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--old", required=True,
                      help="source tree of the old code (e.g. a worktree)")
  parser.add_argument("--new", default=ROOT,
                      help="source tree of the new code (default: this one)")
  parser.add_argument("--rounds", type=int, default=6,
                      help="rounds (even: each tree goes first as often)")
  parser.add_argument("--modes", default="finetune,pretrain")
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--warmup", type=int, default=3)
  args = parser.parse_args(argv)
  for tree in TREES:
    path = os.path.realpath(getattr(args, tree))
    if not os.path.isfile(os.path.join(path, "xlnet_tf", "__init__.py")):
      parser.error(f"--{tree}: {path} holds no xlnet_tf package")
    setattr(args, tree, path)
  modes = args.modes.split(",")
  if not set(modes) <= {"finetune", "pretrain"} or args.rounds < 1:
    parser.error("--modes takes finetune and/or pretrain; --rounds >= 1")
  args.modes = modes
  return args


def main():
  args = parse_args()
  start = time.time()
  times = {mode: {tree: [] for tree in TREES} for mode in args.modes}
  sources = {}
  for k in range(args.rounds):
    order = TREES if k % 2 == 0 else TREES[::-1]
    for mode in args.modes:
      for tree in order:
        r = time_tree(args, getattr(args, tree), mode)
        sources[tree] = r["source"]
        times[mode][tree].append(r["seconds_per_step"])
        print(json.dumps({"round": k, "mode": mode, "tree": tree,
                          "seconds_per_step": r["seconds_per_step"]}),
              file=sys.stderr, flush=True)  # progress
  print(json.dumps({
      "benchmark": "old_vs_new", "size": args.size, "threads": args.threads,
      "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
      "trees": {tree: {"path": getattr(args, tree), "xlnet_tf": sources[tree]}
                for tree in TREES},
      "seconds_per_step": {mode: compare(times[mode]) for mode in args.modes},
      "elapsed_seconds": round(time.time() - start)}, indent=2))


if __name__ == "__main__":
  main()
