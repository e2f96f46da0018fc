"""Train-step / inference throughput and peak memory of xlnet-tf next to
Model Garden's XLNetBase and HuggingFace's PyTorch XLNet (when installed), in
one run on the same configs and thread settings; prints JSON.

    .venv/bin/python benchmarks/bench_train_step.py --size base

Implementations are given as variants, `name[+xla][+xla_all][+bf16]
[+compile][+recompute][+inter1]`: e.g. `garden+xla` is Model Garden with
XLA over the whole step, `ours+xla` ours with XLA over the forward/backward
pass as its `Trainer` compiles it (`ours+xla_all`: the update too),
`hf+compile` is HuggingFace under torch.compile, `ours+bf16` is ours in
mixed bfloat16, `+inter1` runs one TensorFlow op at a time (inter-op
threads 1; intra-op threads stay --threads).
Each (variant, mode) runs in its own process (clean peak RSS, same
--threads, default 2). Figures are the best of --rounds medians of --steps
timed steps after --warmup untimed ones, and of --passes such processes:
the variants of a mode take turns pass after pass, so a slow spell of this
shared machine does not land on one variant only. With --interleaved the
TensorFlow variants of a mode share one process and take turns step by step
(their medians then see the same machine; HF keeps its own processes). Per
mode the report gives ours (best float32 variant) over the fastest float32
peer in its best mode, and ours in bf16 over that same peer. The dense
matmul peak of the machine is measured (best of several shapes), with the
CPU model and whether it multiplies bfloat16 natively, and each training
mode reports the fraction of the peak reached (FLOPs = 6 x non-embedding
parameters x tokens + attention). TensorFlow variants train with
`tf_keras.optimizers.legacy.Adam`, the fused Adam kernel that both this
project's trainer and Model Garden's XLNet trainer run; HF with torch's Adam.
Every step clips to global norm 1 and hands the optimizer its gradients as
its project's trainer does: ours dense, Model Garden's embedding gradient as
IndexedSlices (Keras' sparse Adam path).

This file is the driver (processes, turns, report). Each implementation has
its adapter, loaded only by the child process that times it: `step_ours.py`,
`step_garden.py`, `step_hf.py` (the TensorFlow two share `step_tf.py`);
sizes and modes are in `bench_common.py`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import statistics
import sys
from typing import Optional

from bench_common import (FLAGS, MODES, SIZES, figures, flops_per_step,
                          parse_variant, run_child, time_steps, timed)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_IMPLS = {
    "mem512": "ours,ours+recompute,garden,hf",
    None: "ours,ours+xla,ours+bf16,garden,garden+xla,hf,hf+compile",
}


def adapter(name: str):
  """The adapter module of implementation `name` (imported here, in the
  child that times it, so only that child loads its framework)."""
  return importlib.import_module(f"step_{name}")


def variant_args(args, spec: str):
  """`args` with the variant flags of `spec` set (and the others cleared)."""
  name, flags = parse_variant(spec)
  out = argparse.Namespace(**vars(args))
  for flag in FLAGS:
    setattr(out, flag, flag in flags)
  return name, out


def single(args) -> dict:
  """One (variant, mode) measurement in this process."""
  impl = adapter(args.impl)
  step = impl.make_step(args, args.mode)
  # The first call (trace, and XLA's compile) is the first warm-up step.
  first = timed(step)[0]
  rounds = [time_steps(step, max(args.warmup - 1, 0) if i == 0 else
                       args.warmup, args.steps) for i in range(args.rounds)]
  seconds, busy = min(rounds)
  return figures(args.mode, seconds, first_step_seconds=first,
                 rounds=[r[0] for r in rounds],
                 cores_busy=round(busy, 2), source=impl.SOURCE,
                 peak_rss_mb=resource.getrusage(
                     resource.RUSAGE_SELF).ru_maxrss / 1024)


def interleaved(args) -> dict:
  """The TensorFlow variants of one mode in this process, timed step by
  step in turn (ours, garden, ours, ...): a slow spell of the machine then
  lands on every variant alike. Medians over `steps x rounds` steps each;
  no per-variant peak RSS (see `mem512`, which keeps separate processes)."""
  steps = {}
  for spec in args.interleave.split(","):
    name, v_args = variant_args(args, spec)
    steps[spec] = adapter(name).make_step(v_args, args.mode)
  for step in steps.values():
    for _ in range(args.warmup):
      step()
  times = {spec: [] for spec in steps}
  for _ in range(args.steps * args.rounds):
    for spec, step in steps.items():
      times[spec].append(timed(step))
  return {spec: figures(args.mode, statistics.median(w for w, _ in t),
                        steps=[w for w, _ in t], cores_busy=round(
                            statistics.median(b for _, b in t), 2))
          for spec, t in times.items()}


def best_of(old: Optional[dict], new: dict) -> dict:
  """The faster of two measurements of one variant, keeping every pass's
  time (`passes`) and the larger peak RSS; an error only if both failed."""
  if old is None:
    return dict(new, passes=[new.get("seconds_per_step")])
  passes = old["passes"] + [new.get("seconds_per_step")]
  if "seconds_per_step" not in new:
    return dict(old, passes=passes)
  if "seconds_per_step" in old:
    rss = [r["peak_rss_mb"] for r in (old, new) if "peak_rss_mb" in r]
    rss = {"peak_rss_mb": max(rss)} if rss else {}
    if old["seconds_per_step"] <= new["seconds_per_step"]:
      return dict(old, passes=passes, **rss)
    new = dict(new, **rss)
  return dict(new, passes=passes)


def summarize(row: dict, mode: str) -> dict:
  """Ours (best float32 variant) and ours+bf16 over the fastest float32 peer
  in its best mode; latency for batch 1; peak RSS for memory runs."""
  ok = {k: v for k, v in row.items() if "examples_per_sec" in v}

  def best(keep):
    picks = [(v["examples_per_sec"], k) for k, v in ok.items() if keep(k)]
    return max(picks) if picks else None
  ours = best(lambda k: k.startswith("ours") and "bf16" not in k
              and "recompute" not in k)
  ours16 = best(lambda k: k.startswith("ours") and "bf16" in k)
  peer = best(lambda k: not k.startswith("ours") and "bf16" not in k)
  out = {}
  if ours and peer:
    out.update(ours_best=ours[1], fastest_peer=peer[1],
               ours_vs_fastest_peer=ours[0] / peer[0])
    if mode == "infer1":
      out["latency_ms"] = {k: 1000 * v["seconds_per_step"]
                           for k, v in ok.items()}
  if ours16 and peer:
    out["ours_bf16_vs_fastest_fp32_peer"] = ours16[0] / peer[0]
  if mode == "mem512":
    out["peak_rss_mb"] = {k: v["peak_rss_mb"] for k, v in ok.items()}
  return out


def measure_mode(args, mode: str, child) -> dict:
  """Every variant of `mode`, --passes times in turn: `{variant: figures}`."""
  specs = (args.impls or DEFAULT_IMPLS.get(mode, DEFAULT_IMPLS[None]))
  row = {}
  # Thread settings are a process's: `inter1` variants keep their own.
  together = [spec for spec in specs.split(",") if args.interleaved
              and parse_variant(spec)[0] != "hf" and mode != "mem512"
              and "inter1" not in parse_variant(spec)[1]]
  for _ in range(args.passes):
    got = {}
    if together:
      r = child([f"--interleave={','.join(together)}", f"--mode={mode}"])
      # An error of the shared process stands for each of its variants.
      got.update((spec, r.get(spec, r)) for spec in together)
    for spec in specs.split(","):
      if spec not in together:
        name, flags = parse_variant(spec)
        got[spec] = child([f"--impl={name}", f"--mode={mode}",
                           *(f"--{f}" for f in sorted(flags))])
      print(json.dumps({"mode": mode, "variant": spec, **got[spec]}),
            file=sys.stderr, flush=True)  # progress
      row[spec] = best_of(row.get(spec), got[spec])
  return row


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--modes", default="finetune,pretrain,infer1,infer32")
  parser.add_argument("--impls", default=None,
                      help="comma-separated variants (default per mode: "
                      f"{DEFAULT_IMPLS})")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--passes", type=int, default=2,
                      help="processes per variant, taking turns")
  parser.add_argument("--mem_batch", type=int, default=4,
                      help="batch of the mem512 mode")
  parser.add_argument("--interleaved", action="store_true",
                      help="time the TensorFlow variants of a mode in one "
                      "process, a step each in turn (HF still runs in its "
                      "own processes)")
  parser.add_argument("--impl", help=argparse.SUPPRESS)
  parser.add_argument("--interleave", help=argparse.SUPPRESS)
  parser.add_argument("--mode", help=argparse.SUPPRESS)
  parser.add_argument("--peak", help=argparse.SUPPRESS)  # a dtype
  for flag in FLAGS:
    parser.add_argument(f"--{flag}", action="store_true",
                        help=argparse.SUPPRESS)
  return parser.parse_args(argv)


def main():
  args = parse_args()
  MODES["mem512"]["batch"] = args.mem_batch
  if args.peak:
    print(json.dumps(importlib.import_module("matmul_peak").measure(
        args.threads, args.peak)))
    return
  if args.impl:
    print(json.dumps(single(args)))
    return
  if args.interleave:
    print(json.dumps(interleaved(args)))
    return

  def child(extra):
    return run_child([f"--size={args.size}", f"--threads={args.threads}",
                      f"--steps={args.steps}", f"--warmup={args.warmup}",
                      f"--rounds={args.rounds}",
                      f"--mem_batch={args.mem_batch}", *extra],
                     args.threads, ROOT)

  modes = args.modes.split(",")
  for mode in modes:  # before the first child: a typo costs no minutes
    if mode not in MODES:
      raise SystemExit(f"--modes: unknown mode {mode!r}; use {sorted(MODES)}")
  for spec in args.impls.split(",") if args.impls else ():
    parse_variant(spec)
  report = {"benchmark": "train_step", "size": args.size,
            "threads": args.threads, "matmul_gflops": {}}
  for dtype in ("float32", "bfloat16"):
    got = child([f"--peak={dtype}"])
    report["matmul_gflops"][dtype] = got.get("gflops")
    report["cpu"] = report.get("cpu") or got.get("cpu")
    if "error" in got:
      report[f"{dtype}_peak_error"] = got["error"]
  report["results"] = []
  peaks = report["matmul_gflops"]
  for mode in modes:
    row = measure_mode(args, mode, child)
    for spec, r in row.items():
      peak = peaks.get("bfloat16" if "bf16" in spec else "float32")
      if "seconds_per_step" in r and MODES[mode]["train"] and peak:
        r["fraction_of_matmul_peak"] = (
            flops_per_step(args.size, mode) / r["seconds_per_step"] / 1e9 /
            peak)
    report["results"].append({"mode": mode, **MODES[mode], "variants": row,
                              "summary": summarize(row, mode)})
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
