"""Batch prediction at the compute limit (issue 38): padding, throughput
and worker memory of run_batch_predict.py's bucketings; prints JSON.

    # quick: the small model, few rows, one round (16 jobs, each a fresh
    # process: TensorFlow's import and Beam's start-up dominate)
    XLNET_SHARED=/work/shared .venv/bin/python \\
        benchmarks/bench_batch_predict.py --size small --corpus_rows 64 \\
        --imdb_rows 4 --mix_rows 32 --rss_rows 32 --rounds 1
    # the issue's figures (a quiet machine)
    .venv/bin/python benchmarks/bench_batch_predict.py --size base \\
        --corpus_rows 2048 --imdb_rows 64 --mix_rows 512 --rss_rows 512 \\
        --rounds 3

The job: embeddings (`--job=embed --pooling=masked_mean --layers=-1`) with
a random language model of `--size` (bench_common.SIZES; base is
XLNet-Base's shape), exported with a window of 512, `--batch_size=32`.

1. Inputs x ways (`--inputs`, `--ways`). Inputs: `corpus` (the first
   `--corpus_rows` non-empty lines of the shared corpus: short), `imdb`
   (`--imdb_rows` whole IMDB test reviews: long, several 512-piece windows
   each) and `mix` (`--mix_rows` rows: three single words, then one whole
   review, repeated). Ways: `global`, `bundle`, `none` (`--bucketing`) on
   the DirectRunner with 2 worker processes (multi_processing), and
   `global_1w`: global with 1 worker, in-process. Each run is a fresh
   process; within a round every input's ways take turns. For each run:
   the process's wall seconds, the job's own (from its first log line,
   Beam building the pipeline, to the outputs published: no imports, no
   export checks), rows/s and real tokens/s (`positions_real`: pieces + 2
   markers per row, over the process's wall time), and the manifest's
   padding (`fraction`, `positions_real`, `positions_fed`, `batches`, and
   a summary of `shapes` when the job writes them). `summary` gives each
   figure's median and [min, max] over the rounds.
2. Memory (`--skip_rss` to leave out): `--rss_input`'s first `--rss_rows`
   rows once (1x, one file) and n times for each n of `--rss_scales`
   (default 1,8; n files: the same rows under other keys), each
   bucketing of `--rss_bucketings` (default global,bundle), 2 worker
   processes. Each run also reports its largest batch in positions
   (`largest_batch_positions`, rows x length, from the manifest): what
   bounds a worker's activations.
   While a job runs, a thread walks the driver's process tree (psutil)
   every 0.2 s and keeps each process's largest RSS and its VmHWM (from
   /proc/<pid>/status: the kernel's peak, so nothing between samples is
   missed); the workers are the `sdk_worker_main` Python processes (grand-
   children, under a /bin/sh). The driver is reported apart: the
   DirectRunner's driver holds the data between stages (the runner's
   memory, not the job's). The acceptance: a worker's peak is flat from 1x
   to 8x with global bucketing.

Correctness: every run's predictions are compared by key with the first
run of the same input (ids identical, pooled vectors within 1e-4; the
8x runs' copies with the 1x run's rows): the script stops on a
difference, and reports the largest one. A job that fails is recorded as
its last stderr line (`error`; its whole stderr is kept with `--keep`)
and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# After the path: the script runs from a checkout, not an installed package.
from batch_bench_inputs import (  # noqa: E402
    ROOT, build_export, max_difference, read_predictions, run_job,
    write_copies, write_inputs)
from bench_common import SIZES, print_report  # noqa: E402

WAYS = ("bundle", "global", "none", "global_1w")
INPUTS = ("corpus", "imdb", "mix")
BUCKETINGS = ("global", "bundle", "none")
TOLERANCE = 1e-4
TWO_WORKERS = ("--direct_num_workers=2 "
               "--direct_running_mode=multi_processing")
ONE_WORKER = "--direct_num_workers=1 --direct_running_mode=in_memory"
FIGURES = ("wall_seconds", "job_seconds", "rows_per_second",
           "real_tokens_per_second", "padding_fraction", "batches")


def parse_way(way: str):
  """'global' -> ('global', 2); 'global_1w' -> ('global', 1)."""
  bucketing, _, workers = way.partition("_")
  if bucketing not in BUCKETINGS or workers not in ("", "1w", "2w"):
    raise SystemExit(f"--ways: {way!r}: a bucketing ({BUCKETINGS}), "
                     "optionally with _1w (1 worker, in-process)")
  return bucketing, 1 if workers == "1w" else 2


def command(export: str, pattern: str, out: str, bucketing: str,
            workers: int, batch_size: int, precision: str,
            rows_per_shard: int = 50_000) -> list:
  return [sys.executable, "run_batch_predict.py", f"--export_dir={export}",
          f"--input={pattern}", f"--output_dir={out}", "--job=embed",
          "--pooling=masked_mean", "--layers=-1",
          f"--batch_size={batch_size}", f"--bucketing={bucketing}",
          f"--precision={precision}", f"--rows_per_shard={rows_per_shard}",
          "--runner=DirectRunner",
          "--pipeline_options=" + (ONE_WORKER if workers == 1
                                   else TWO_WORKERS)]


def spread(runs: list) -> dict:
  """Each figure's median and [min, max] over the rounds."""
  out = {}
  for name in FIGURES:
    values = [r[name] for r in runs if r.get(name) is not None]
    if values:
      out[name] = {"median": round(statistics.median(values), 4),
                   "range": [min(values), max(values)]}
  return out


class Checker:
  """Each input's first run is the reference of the others."""

  def __init__(self):
    self.refs, self.worst = {}, {}

  def check(self, name: str, what: str, out: str, run: dict,
            same_key=None) -> None:
    if "error" in run:
      return
    got = read_predictions(out)
    if name not in self.refs:
      self.refs[name], self.worst[name] = got, 0.0
      return
    diff = max_difference(self.refs[name], got, what, TOLERANCE,
                          same_key or (lambda key: key))
    self.worst[name] = max(self.worst[name], diff)


def bench_ways(args, export, inputs, checker) -> dict:
  ways = args.ways.split(",")
  runs = {name: {way: [] for way in ways} for name in args.inputs}
  for r in range(args.rounds):
    for name in args.inputs:
      path, rows = inputs[name]
      for way in ways:
        bucketing, workers = parse_way(way)
        out = f"{args.work}/out/{name}_{way}_{r}"
        runs[name][way].append(run_job(command(
            export, path, out, bucketing, workers, args.batch_size,
            args.precision), out, rows, sample=False))
        checker.check(name, f"{name} {way} round {r}", out,
                      runs[name][way][-1])
        print(f"{name} {way} round {r}: {runs[name][way][-1]}",
              file=sys.stderr, flush=True)
  return {name: {way: {"runs": w, "summary": spread(w)}
                 for way, w in by_way.items()}
          for name, by_way in runs.items()}


def bench_memory(args, export, inputs, checker) -> dict:
  path, _ = inputs[args.rss_input]
  with open(path, encoding="utf-8") as f:
    rows = f.read().splitlines()[:args.rss_rows]
  base = f"{args.work}/rss_rows{os.path.splitext(path)[1]}"
  with open(base, "w", encoding="utf-8") as f:
    f.write("\n".join(rows) + "\n")
  scales = [int(n) for n in args.rss_scales.split(",")]
  patterns = {n: write_copies(base, f"{args.work}/rss{n}x", n)
              for n in scales}
  result = {"input": args.rss_input, "rows_1x": len(rows)}
  for bucketing in args.rss_bucketings.split(","):
    by_scale = {}
    for n, pattern in patterns.items():
      out = f"{args.work}/out/rss_{bucketing}_{n}x"
      # Shards of at most the 1x rows: a shard's writer holds its rows to
      # sort them, so bigger inputs make more shards, not bigger ones.
      run = run_job(command(export, pattern, out, bucketing, 2,
                            args.batch_size, args.precision,
                            rows_per_shard=len(rows)),
                    out, n * len(rows), sample=True)
      # Every copy's rows are the 1x rows: compare them by line.
      checker.check("rss", f"memory {bucketing} {n}x", out, run,
                    lambda key: (re.sub(r"^part-\d+", "part-0", key[0]),
                                 key[1]))
      # What bounds a worker's peak: its largest batch, in positions.
      with open(f"{out}/manifest.json", encoding="utf-8") as f:
        shapes = json.load(f)["padding"].get("shapes", [])
      run["largest_batch_positions"] = max(
          (rows_ * length for rows_, length, _ in shapes), default=None)
      print(f"memory {bucketing} {n}x: {run}", file=sys.stderr, flush=True)
      by_scale[f"{n}x"] = run
    peaks = {s: max((w["vm_hwm_mb"] for w in r.get("memory", {}).get(
        "workers", [])), default=None) for s, r in by_scale.items()}
    by_scale["worker_peak_mb"] = peaks
    if all(peaks.values()):
      first = peaks[f"{scales[0]}x"]
      by_scale["worker_peak_over_first"] = {
          s: round(p / first, 3) for s, p in peaks.items()}
    result[bucketing] = by_scale
  return result


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog="\n".join(__doc__.split("\n")[2:]))
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--window", type=int, default=512)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", default="float32",
                      choices=("float32", "bfloat16"))
  parser.add_argument("--corpus_rows", type=int, default=2048)
  parser.add_argument("--imdb_rows", type=int, default=64)
  parser.add_argument("--mix_rows", type=int, default=512)
  parser.add_argument("--inputs", default=",".join(INPUTS),
                      help="comma-separated, of " + ", ".join(INPUTS))
  parser.add_argument("--ways", default=",".join(WAYS),
                      help="comma-separated bucketings, _1w for 1 worker "
                           "in-process (default: %(default)s)")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--skip_rss", action="store_true",
                      help="leave out the memory runs")
  parser.add_argument("--rss_input", default="mix", choices=INPUTS)
  parser.add_argument("--rss_rows", type=int, default=512,
                      help="rows of the 1x input of the memory runs")
  parser.add_argument("--rss_scales", default="1,8",
                      help="comma-separated copies of the 1x input")
  parser.add_argument("--rss_bucketings", default="global,bundle",
                      help="comma-separated bucketings of the memory runs")
  parser.add_argument("--keep", default=None,
                      help="work in this folder and keep it (inputs, "
                           "outputs, each job's stderr)")
  args = parser.parse_args()
  args.inputs = [n for n in args.inputs.split(",") if n]
  unknown = set(args.inputs) - set(INPUTS)
  if unknown:
    raise SystemExit(f"--inputs: unknown {sorted(unknown)}; use {INPUTS}")
  for way in args.ways.split(","):
    parse_way(way)
  started, load = time.time(), os.getloadavg()
  sp = f"{args.shared}/data/spiece/spiece.model"
  with tempfile.TemporaryDirectory() as tmp:
    args.work = args.keep or tmp
    os.makedirs(f"{args.work}/out", exist_ok=True)
    export = build_export(args.work, sp, SIZES[args.size], args.window)
    inputs = write_inputs(args.shared, args.work, args.corpus_rows,
                          args.imdb_rows, args.mix_rows)
    checker = Checker()
    report = {"size": args.size, "window": args.window,
              "batch_size": args.batch_size, "precision": args.precision,
              "rounds": args.rounds,
              "rows": {n: inputs[n][1] for n in args.inputs},
              "ways": {w: dict(zip(("bucketing", "workers"), parse_way(w)))
                       for w in args.ways.split(",")}}
    if args.inputs and args.rounds:
      report["results"] = bench_ways(args, export, inputs, checker)
    if not args.skip_rss:
      report["memory"] = bench_memory(args, export, inputs, checker)
    report["max_pooled_difference"] = {n: float(f"{d:.3g}")
                                       for n, d in checker.worst.items()}
  print_report(report, load, started)


if __name__ == "__main__":
  main()
