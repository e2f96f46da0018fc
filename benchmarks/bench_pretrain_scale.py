"""The pretraining record builder at corpus scale; prints JSON.

    # peak memory as the corpus grows, this tree against an older one
    git worktree add /tmp/xlnet_old <old commit>
    .venv/bin/python benchmarks/bench_pretrain_scale.py memory \\
        --old /tmp/xlnet_old --copies 1 2 4 8

    # >= 1 GB three ways: the plain CLI (one process at a time, task after
    # task), Beam's DirectRunner with 1 worker, and with 2 worker processes
    .venv/bin/python benchmarks/bench_pretrain_scale.py scale --gigabytes 1

A corpus of k copies is the shared English corpus k times, each copy's
documents in its own shuffled order (seeded), so no two copies are alike.
Every build is the CLI in a fresh process at the XLNet-Base shape (seq_len
512, reuse_len 256, num_predict 85, perm_size 256, bi_data, bsz_per_host
32), one pass, into a fresh save_dir (tokenization included). Peak RSS is
sampled from /proc every 0.2 s for every process of the build (driver and
workers) and checked against the kernel's own peak (`wait4`) for the top
process; "peak_rss_mb_per_process" is the largest of any one process.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
from bench_common import print_report  # noqa: E402
from data_utils.pretraining.task_split import split_by_size  # noqa: E402
BASE = ["--seq_len=512", "--reuse_len=256", "--num_predict=85",
        "--perm_size=256", "--bi_data", "--bsz_per_host=32", "--seed=0"]


def write_copies(corpus: str, copies: int, out_dir: str, files: int = 1
                 ) -> list:
  """`copies` document-shuffled copies of `corpus` in `files` files."""
  with open(corpus, "rb") as f:
    docs = [d for d in f.read().split(b"\n\n") if d.strip()]
  os.makedirs(out_dir, exist_ok=True)
  paths = [os.path.join(out_dir, f"corpus-{i:03d}.txt") for i in range(files)]
  handles = [open(p, "wb") for p in paths]
  for k in range(copies):
    for i in np.random.default_rng(k).permutation(len(docs)):
      handles[k * files // copies].write(docs[i].strip(b"\n") + b"\n\n")
  for h in handles:
    h.close()
  return paths


def _rss_kb(pid: int) -> int:
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith("VmRSS:"):
          return int(line.split()[1])
  except OSError:
    pass
  return 0


def _descendants(pid: int) -> list:
  out, todo = [], [pid]
  while todo:
    p = todo.pop()
    out.append(p)
    for task in glob.glob(f"/proc/{p}/task/*/children"):
      try:
        with open(task) as f:
          todo += [int(c) for c in f.read().split()]
      except OSError:
        pass
  return out


def run_measured(cmd: list, pythonpath: str) -> dict:
  """Runs `cmd`; returns wall seconds and peak RSS (MB) per process."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=pythonpath)
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, cwd=pythonpath, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
  peaks: dict = {}
  done = threading.Event()

  def sample():
    while not done.is_set():
      for p in _descendants(proc.pid):
        peaks[p] = max(peaks.get(p, 0), _rss_kb(p))
      time.sleep(0.2)
  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  err = proc.stderr.read()
  _, status, usage = os.wait4(proc.pid, 0)
  done.set()
  sampler.join()
  wall = time.perf_counter() - start
  if status != 0:
    raise SystemExit(f"{' '.join(cmd[:4])}...: failed:\n{err[-2000:]}")
  workers = sorted(peaks.values(), reverse=True)
  return {"wall_seconds": round(wall, 1),
          "peak_rss_mb_per_process": round(workers[0] / 1024, 1),
          "peak_rss_mb_top_process_kernel": round(usage.ru_maxrss / 1024, 1),
          "processes_seen": len(peaks)}


def cli(tree: str, inputs: str, save_dir: str, sp: str, *extra) -> list:
  return [sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
          f"--input_glob={inputs}", f"--sp_path={sp}", f"--save_dir={save_dir}",
          *BASE, *extra]


def num_examples(save_dir: str) -> int:
  total = 0
  for path in glob.glob(os.path.join(save_dir, "tfrecords", "record_info-*")):
    with open(path) as f:
      total += json.load(f)["num_example"]
  return total


def memory(args, corpus: str, sp: str, work: str) -> dict:
  trees = {"new": ROOT}
  if args.old:
    trees["old"] = os.path.abspath(args.old)
  rows = []
  for i, k in enumerate(args.copies):
    data = os.path.join(work, f"x{k}")
    path = write_copies(corpus, k, data)[0]
    order = list(trees) if i % 2 == 0 else list(trees)[::-1]
    for name in order:
      out = os.path.join(work, f"out-{name}-{k}")
      r = run_measured(cli(trees[name], path, out, sp), trees[name])
      r.update(tree=name, copies=k, corpus_mb=round(
          os.path.getsize(path) / 2**20, 1), examples=num_examples(out))
      r["examples_per_sec"] = round(r["examples"] / r["wall_seconds"], 1)
      rows.append(r)
      shutil.rmtree(out)
    shutil.rmtree(data)
  return {"benchmark": "pretrain_data_memory", "rows": rows}


def scale(args, corpus: str, sp: str, work: str) -> dict:
  per_copy = os.path.getsize(corpus)
  copies = int(np.ceil(args.gigabytes * 2**30 / per_copy))
  data = os.path.join(work, "corpus")
  paths = write_copies(corpus, copies, data, files=args.files)
  inputs = os.path.join(data, "corpus-*.txt")
  size = sum(os.path.getsize(p) for p in paths)
  split = [f"--task_size_mb={args.task_size_mb}"]
  num_task = len(split_by_size(paths, args.task_size_mb))
  rows = []
  ways = {
      "plain_cli_1_process": None,
      "direct_runner_1_worker": "--direct_num_workers=1",
      "direct_runner_2_workers": "--direct_num_workers=2 "
                                 "--direct_running_mode=multi_processing"}
  for way, options in ways.items():
    out = os.path.join(work, f"out-{way}")
    if options is None:
      runs = [run_measured(cli(ROOT, inputs, out, sp, *split, f"--task={t}"),
                           ROOT) for t in range(num_task)]
      r = {"wall_seconds": round(sum(x["wall_seconds"] for x in runs), 1),
           "peak_rss_mb_per_process": max(x["peak_rss_mb_per_process"]
                                          for x in runs),
           "processes": num_task}
    else:
      r = run_measured(cli(ROOT, inputs, out, sp, *split,
                           "--runner=DirectRunner",
                           f"--pipeline_options={options}"), ROOT)
    r.update(way=way, examples=num_examples(out))
    r["examples_per_sec"] = round(r["examples"] / r["wall_seconds"], 1)
    rows.append(r)
    shutil.rmtree(out)
  return {"benchmark": "pretrain_data_scale_out",
          "corpus_gb": round(size / 2**30, 3), "files": len(paths),
          "tasks": num_task, "task_size_mb": args.task_size_mb,
          "rows": rows}


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("mode", choices=["memory", "scale"])
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--old", help="an older source tree (memory mode)")
  parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 4, 8])
  parser.add_argument("--gigabytes", type=float, default=1.0)
  parser.add_argument("--files", type=int, default=16)
  parser.add_argument("--task_size_mb", type=float, default=64)
  parser.add_argument("--work", default=None,
                      help="scratch folder (default: a temp folder)")
  args = parser.parse_args()
  corpus = os.path.join(args.shared, "data", "corpus",
                        "gutenberg_state_union.txt")
  sp = os.path.join(args.shared, "data", "spiece", "spiece.model")
  load, started = os.getloadavg(), time.time()
  work = tempfile.mkdtemp(dir=args.work)
  try:
    report = (memory if args.mode == "memory" else scale)(args, corpus, sp,
                                                          work)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  print_report(report, load, started)


if __name__ == "__main__":
  main()
