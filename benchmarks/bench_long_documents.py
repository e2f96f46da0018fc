"""Long documents (issue 19): how long the shared IMDB reviews are, and the
training step of an XLNet-Base classifier reading 4 segments of 128 with a
memory of 128 next to one window of 512 and truncation to 128; prints JSON.

    .venv/bin/python benchmarks/bench_long_documents.py

Lengths: every review of `aclImdb/{train,test}` (read by the project's
`read_imdb`, encoded by `SentencePieceTokenizer` with the released model,
cased as `run_classifier.py`'s default) in pieces, before `<sep> <cls>`:
counts over 128 and 512 pieces, counts that need more than one window of
128 (over 126 pieces: the window also holds `<sep> <cls>`) or more than 4
(over 510), and percentiles.

Steps: each variant of `long_documents_step.py` (batch --batch, full
length documents) runs in its own process (clean peak RSS, --threads
threads); the variants take turns, --passes rounds, the order rotated each
round, so a slow spell of this shared machine does not land on one variant
only. A process reports the median of --steps timed steps after --warmup
untimed ones; the report gives per variant every round's figure, their
median, min, max and spread ((max - min) / median), the rounds' peak RSS,
and each variant's examples/s over truncation's.

First step (`--first_step`, issue 28): a classifier (--first_step_size,
default a tiny one of 2 layers of 16; batch --first_step_batch, dropout
0.1) reading n segments of --segment_length with a memory of --mem_len
(16 and 16), gradients through the last --bptt_segments (1), for n in
--segments: the time from building the model to the end of its first
training step (tracing included), the median of --steps more steps, and
the peak RSS (and the RSS before the model: TensorFlow's own). Two
variants, each n in a fresh process, taking turns (the order rotated each
round): `loop` (this tree: the segments before the last `bptt_segments` in
one `tf.while_loop`) and `unrolled` (a Python loop over the segments:
`xlnet_tf/tasks/pooling.py` of --unrolled_rev in a temporary copy of this
tree's `xlnet_tf`), the latter for --unrolled_segments only, since it
grows with n.

    .venv/bin/python benchmarks/bench_long_documents.py --first_step
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
from bench_common import (SIZES, imported_from, run_child,  # noqa: E402
                          time_median)
from data_utils.classification.reader import read_imdb  # noqa: E402
from data_utils.tokenization import SentencePieceTokenizer  # noqa: E402

SHARED = os.environ.get("XLNET_SHARED",
                        os.path.join(os.path.dirname(ROOT), "shared"))
PERCENTILES = (50, 75, 90, 95, 99)
# The last commit whose PooledTaskModel read the segments in a Python loop.
UNROLLED_REV = "a7383e48072a22af06d47fc373ac727db23b2ddc"


def review_lengths(imdb_dir: str, spiece: str) -> dict:
  """Piece counts of the reviews of both splits and what they imply."""
  tok = SentencePieceTokenizer(spiece)
  t0 = time.perf_counter()
  lengths = {split: np.array([len(tok.encode_ids(e.text_a))
                              for e in read_imdb(imdb_dir, split)])
             for split in ("train", "test")}
  seconds = time.perf_counter() - t0

  def stats(n):
    return {"reviews": int(n.size),
            "over_128_pieces": int((n > 128).sum()),
            "over_512_pieces": int((n > 512).sum()),
            "over_one_window_of_128": int((n > 126).sum()),
            "over_four_windows_of_128": int((n > 510).sum()),
            "mean": round(float(n.mean()), 1),
            "percentiles": {f"p{p}": int(np.percentile(n, p))
                            for p in PERCENTILES},
            "max": int(n.max())}
  both = np.concatenate(list(lengths.values()))
  out = {split: stats(n) for split, n in lengths.items()}
  out["all"] = stats(both)
  out["all"]["share_over_128_pieces"] = round(float((both > 128).mean()), 4)
  out["all"]["share_over_512_pieces"] = round(float((both > 512).mean()), 4)
  out["tokenize_seconds"] = round(seconds, 1)
  return out


def single(args) -> dict:
  """One variant's measurement in this (child) process."""
  worker = importlib.import_module("long_documents_step")
  step, tokens = worker.make_step(args.variant, args.size, args.batch,
                                  args.threads)
  seconds = time_median(step, args.warmup, args.steps)
  return {"variant": args.variant, "source": worker.SOURCE,
          "seconds_per_step": seconds,
          "examples_per_sec": args.batch / seconds,
          "document_tokens_per_sec": args.batch * tokens / seconds,
          "peak_rss_mb": resource.getrusage(
              resource.RUSAGE_SELF).ru_maxrss / 1024}


def first_step(args) -> dict:
  """One (variant, n) of `--first_step` in this (child) process, with the
  `xlnet_tf` of `args.tree`."""
  sys.path.insert(0, args.tree)
  worker = importlib.import_module("long_documents_step")
  rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  t0 = time.perf_counter()
  step = worker.make_segments_step(
      args.first_step_size, args.n_segments, args.segment_length,
      args.mem_len, args.bptt_segments, args.first_step_batch, args.threads,
      args.xla)
  step()
  first = time.perf_counter() - t0
  return {"variant": args.variant, "n_segments": args.n_segments,
          "source": worker.SOURCE, "first_step_seconds": first,
          "seconds_per_step": time_median(step, 0, args.steps),
          "rss_before_model_mb": rss_before,
          "peak_rss_mb": resource.getrusage(
              resource.RUSAGE_SELF).ru_maxrss / 1024}


def unrolled_tree(rev: str) -> str:
  """A temporary copy of this tree's `xlnet_tf` with `tasks/pooling.py` of
  `rev` (the caller removes it)."""
  tree = tempfile.mkdtemp(prefix="xlnet_unrolled_")
  shutil.copytree(os.path.join(ROOT, "xlnet_tf"),
                  os.path.join(tree, "xlnet_tf"),
                  ignore=shutil.ignore_patterns("__pycache__"))
  old = subprocess.run(["git", "show", f"{rev}:xlnet_tf/tasks/pooling.py"],
                       cwd=ROOT, capture_output=True, text=True, check=True)
  with open(os.path.join(tree, "xlnet_tf", "tasks", "pooling.py"), "w",
            encoding="utf-8") as f:
    f.write(old.stdout)
  return tree


def spread_of(values: list) -> dict:
  med = statistics.median(values)
  return {"rounds": [round(v, 4) for v in values], "median": round(med, 4),
          "min": round(min(values), 4), "max": round(max(values), 4),
          "spread": round((max(values) - min(values)) / med, 3)}


def first_step_report(args) -> dict:
  """Every (variant, n) of `--first_step`, --passes rounds in turn."""
  segments = [int(n) for n in args.segments.split(",") if n]
  jobs = [("loop", n) for n in segments] + [
      ("unrolled", int(n)) for n in args.unrolled_segments.split(",") if n]
  trees = {"loop": ROOT, "unrolled": unrolled_tree(args.unrolled_rev)}
  rounds = {job: [] for job in jobs}
  try:
    for k in range(args.passes):
      for variant, n in jobs[k % len(jobs):] + jobs[:k % len(jobs)]:
        r = run_child([
            "--first_step", f"--variant={variant}", f"--n_segments={n}",
            f"--tree={trees[variant]}",
            f"--first_step_size={args.first_step_size}",
            f"--first_step_batch={args.first_step_batch}",
            f"--segment_length={args.segment_length}",
            f"--mem_len={args.mem_len}", f"--threads={args.threads}",
            f"--bptt_segments={args.bptt_segments}", f"--steps={args.steps}"]
            + (["--xla"] if args.xla else []), args.threads, ROOT,
            script=os.path.basename(__file__))
        imported_from(r, trees[variant])
        rounds[(variant, n)].append(r)
        print(json.dumps({"pass": k, **r}), file=sys.stderr, flush=True)
  finally:
    shutil.rmtree(trees["unrolled"])
  report = {}
  for (variant, n), rs in rounds.items():
    report.setdefault(variant, {})[str(n)] = {
        "first_step_seconds": spread_of([r["first_step_seconds"] for r in rs]),
        "seconds_per_step": spread_of([r["seconds_per_step"] for r in rs]),
        "peak_rss_mb": spread_of([r["peak_rss_mb"] for r in rs]),
        "rss_before_model_mb": round(max(r["rss_before_model_mb"]
                                         for r in rs))}
  return report


def summarize(rounds: list) -> dict:
  """A variant's rounds (child results, errors included) in one entry."""
  ok = [r for r in rounds if "seconds_per_step" in r]
  out = {"errors": [r["error"] for r in rounds if "error" in r]}
  if not ok:
    return out
  rates = [r["examples_per_sec"] for r in ok]
  med = statistics.median(rates)
  out.update(
      examples_per_sec=med,
      examples_per_sec_rounds=[round(x, 4) for x in rates],
      min=min(rates), max=max(rates),
      spread=(max(rates) - min(rates)) / med,
      seconds_per_step=statistics.median(r["seconds_per_step"] for r in ok),
      document_tokens_per_sec=statistics.median(
          r["document_tokens_per_sec"] for r in ok),
      peak_rss_mb_rounds=[round(r["peak_rss_mb"]) for r in ok],
      peak_rss_mb=max(r["peak_rss_mb"] for r in ok))
  return out


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--imdb_dir", default=os.path.join(
      SHARED, "data", "imdb", "aclImdb"))
  parser.add_argument("--spiece", default=os.path.join(
      SHARED, "data", "spiece", "spiece.model"))
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--variants", default="segments_4x128_mem128,"
                      "window_512,truncate_128",
                      help="comma-separated, from long_documents_step.py")
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--steps", type=int, default=4)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--passes", type=int, default=3,
                      help="rounds of one process per variant, in turn")
  parser.add_argument("--skip_lengths", action="store_true")
  parser.add_argument("--skip_steps", action="store_true")
  parser.add_argument("--first_step", action="store_true",
                      help="time to the first training step and peak RSS "
                      "against the number of segments (see above)")
  parser.add_argument("--segments", default="4,16,64,200")
  parser.add_argument("--unrolled_segments", default="4,16")
  parser.add_argument("--unrolled_rev", default=UNROLLED_REV)
  parser.add_argument("--segment_length", type=int, default=16)
  parser.add_argument("--mem_len", type=int, default=16)
  parser.add_argument("--bptt_segments", type=int, default=1)
  parser.add_argument("--first_step_size", default="tiny",
                      choices=["tiny"] + sorted(SIZES))
  parser.add_argument("--first_step_batch", type=int, default=8)
  parser.add_argument("--xla", action="store_true")
  parser.add_argument("--variant", help=argparse.SUPPRESS)
  parser.add_argument("--n_segments", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--tree", help=argparse.SUPPRESS)
  return parser.parse_args(argv)


def main():
  args = parse_args()
  if args.variant:
    print(json.dumps(first_step(args) if args.first_step else single(args)))
    return
  if args.first_step:
    t0 = time.perf_counter()
    report = {"benchmark": "long_documents_first_step",
              "size": args.first_step_size,
              "batch": args.first_step_batch,
              "segment_length": args.segment_length,
              "mem_len": args.mem_len, "bptt_segments": args.bptt_segments,
              "xla": args.xla, "threads": args.threads, "steps": args.steps,
              "passes": args.passes, "unrolled_rev": args.unrolled_rev,
              "cpu_count": os.cpu_count(),
              "variants": first_step_report(args),
              "seconds_total": 0}
    report["seconds_total"] = round(time.perf_counter() - t0)
    print(json.dumps(report, indent=2))
    return
  variants = args.variants.split(",")
  report = {"benchmark": "long_documents", "size": args.size,
            "batch": args.batch, "threads": args.threads,
            "steps": args.steps, "warmup": args.warmup,
            "passes": args.passes, "cpu_count": os.cpu_count()}
  if not args.skip_lengths:
    report["imdb_pieces"] = review_lengths(args.imdb_dir, args.spiece)
    print(json.dumps({"imdb_pieces": report["imdb_pieces"]["all"]}),
          file=sys.stderr, flush=True)  # progress
  if args.skip_steps:
    print(json.dumps(report, indent=2))
    return
  t0 = time.perf_counter()
  rounds = {v: [] for v in variants}
  for k in range(args.passes):
    for v in variants[k % len(variants):] + variants[:k % len(variants)]:
      r = run_child([f"--variant={v}",
                     f"--size={args.size}", f"--batch={args.batch}",
                     f"--threads={args.threads}", f"--steps={args.steps}",
                     f"--warmup={args.warmup}"], args.threads, ROOT,
                    script=os.path.basename(__file__))
      rounds[v].append(r)
      print(json.dumps({"pass": k, **r}), file=sys.stderr, flush=True)
  report["variants"] = {v: summarize(r) for v, r in rounds.items()}
  base = report["variants"].get("truncate_128", {}).get("examples_per_sec")
  if base:
    report["examples_per_sec_over_truncate_128"] = {
        v: s["examples_per_sec"] / base
        for v, s in report["variants"].items() if "examples_per_sec" in s}
  report["step_seconds_total"] = round(time.perf_counter() - t0)
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
