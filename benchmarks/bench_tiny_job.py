"""A tiny fine-tuning job end to end, as the tests run them: run_classifier.py
on 64 RTE pairs with a 2-layer model (train 20 steps, predict 120 rows,
export both servables), in one or more source trees taking turns; prints
JSON. What it measures is the fixed cost of a job (start-up, tracing the
step, exporting), which the steady step of a real size hides.

    .venv/bin/python benchmarks/bench_tiny_job.py --trees OLD_TREE,. --rounds 3

Per tree and round: wall and CPU seconds of the whole process (children
included), and the seconds from the trainer's choice of XLA or the graph
to its last step (the first step's trace), and from there to the export's
last line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

from bench_common import HERE

ROOT = os.path.dirname(HERE)
CONFIG = dict(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64,
              n_token=32000, ff_activation="gelu", untie_r=True)
STAMP = re.compile(r"^I\d{4} (\d\d:\d\d:\d\d\.\d+) .*?\] (.*)$", re.M)


def phases(log: str) -> dict:
  """Seconds between the trainer's XLA-or-graph line, its last step line
  and the last export line of the job's log."""
  marks = {}
  for clock, message in STAMP.findall(log):
    t = datetime.strptime(clock, "%H:%M:%S.%f")
    if message.startswith("forward/backward pass:"):
      marks["choice"] = t
    elif re.match(r"step \d+/\d+ loss", message):
      marks["last_step"] = t
    elif message.startswith("exported "):
      marks["exported"] = t
  out = {}
  if {"choice", "last_step"} <= set(marks):
    out["to_last_step"] = (marks["last_step"] - marks["choice"]).total_seconds()
  if {"last_step", "exported"} <= set(marks):
    out["to_export"] = (marks["exported"] - marks["last_step"]).total_seconds()
  return out


def one_job(tree: str, data: str, shared: str) -> dict:
  work = tempfile.mkdtemp(prefix="tiny_job_")
  try:
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
      json.dump(CONFIG, f)
    cmd = [sys.executable, os.path.join(tree, "run_classifier.py"),
           f"--model_config_path={config}",
           f"--spiece_model_file={shared}/data/spiece/spiece.model",
           "--task_name=rte", f"--data_dir={data}",
           f"--output_dir={work}/data", f"--model_dir={work}/model",
           "--do_train", "--do_predict", "--max_seq_length=64",
           "--train_batch_size=16", "--train_steps=20", "--iterations=20",
           "--predict_batch_size=64", "--learning_rate=1e-3",
           "--nojit_compile"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=tree, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
      return {"error": res.stderr.strip().splitlines()[-1]}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, **phases(res.stderr)}
  finally:
    shutil.rmtree(work, ignore_errors=True)


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--trees", default=".",
                      help="comma-separated source trees (each with its "
                      "run_classifier.py), timed in turn")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  args = parser.parse_args()
  trees = [os.path.abspath(t) for t in args.trees.split(",")]
  for tree in trees:  # before the first job: a typo costs no minutes
    if not os.path.isfile(os.path.join(tree, "run_classifier.py")):
      raise SystemExit(f"--trees: {tree} has no run_classifier.py")
  data = tempfile.mkdtemp(prefix="tiny_rte_")
  for name, rows in (("train.tsv", 64), ("dev.tsv", 64), ("test.tsv", 120)):
    with open(f"{args.shared}/data/glue/RTE/{name}", encoding="utf-8") as f:
      lines = f.read().splitlines()[:rows + 1]
    with open(os.path.join(data, name), "w", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n")
  runs = {tree: [] for tree in trees}
  for _ in range(args.rounds):
    for tree in trees:
      runs[tree].append(one_job(tree, data, args.shared))
      print(json.dumps({"tree": tree, **runs[tree][-1]}), file=sys.stderr,
            flush=True)  # progress
  shutil.rmtree(data, ignore_errors=True)
  report = {"benchmark": "tiny_job", "rounds": args.rounds, "trees": {}}
  for tree, got in runs.items():
    ok = [r for r in got if "wall" in r]
    report["trees"][tree] = {
        "runs": got, **{f"median_{k}": statistics.median(r[k] for r in ok)
                        for k in ("wall", "cpu", "to_last_step", "to_export")
                        if ok and all(k in r for r in ok)}}
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
