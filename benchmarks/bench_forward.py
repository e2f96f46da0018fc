"""Forward rate (positions/s) of a classifier export as the batch-prediction
worker runs it (`xlnet_tf/batch_predict/engine.py`), next to HuggingFace's
PyTorch `XLNetForSequenceClassification`; prints JSON.

    .venv/bin/python benchmarks/bench_forward.py --rounds 3

Each variant lives in its own process (thread pools and oneDNN settings
are per process and fixed at start), loaded and warmed once (XLA compiles
each shape then: its time is reported); the driver then asks the
processes in turn, round after round, to time every shape, so a slow
spell of this shared machine lands on all variants alike. Per shape and
variant: positions/s of each round (the median of --steps calls), their
median and spread (max/min - 1), the load (and freeze) seconds, and the
first call's (XLA: compile) seconds.

Variants (default: all but bf16):
  saved         the loaded SavedModel's signature, called as before issue 38
  frozen        engine.FrozenSignature float32 (frozen graph, no XLA)
  xla           engine float32, xla_after=0 (XLA from the first call)
  xla_inter1    xla with inter_op_parallelism_threads=1
  frozen_eigen  frozen with TF_ENABLE_ONEDNN_OPTS=0 (Eigen kernels)
  bf16          engine bfloat16 (emulated on CPUs without AVX512_BF16/AMX)
  hf            transformers' XLNetForSequenceClassification, torch.no_grad
The export is XLNet-Base sized with random weights (built once into
--export_dir when missing); HF gets the same architecture, other weights.
Inputs have no padding (every position real).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_common import SIZES, print_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("saved", "frozen", "xla", "xla_inter1", "frozen_eigen", "bf16",
            "hf")
DEFAULT = "saved,frozen,xla,xla_inter1,frozen_eigen,hf"


def shapes_of(text: str):
  """'32x128,8x512' -> [(32, 128), (8, 512)]."""
  return [tuple(int(x) for x in s.split("x")) for s in text.split(",")]


def build_export(path: str, size: str, max_len: int) -> None:
  """A classifier export of `size` with random weights at `path`."""
  import xlnet_tf as xt  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.classification.serving import \
      export_classifier  # pylint: disable=import-outside-toplevel
  cfg = xt.XLNetConfig(**SIZES[size], ff_activation="gelu", untie_r=True)
  model = xt.XLNetClassifier(xt.XLNetModel(cfg, xt.RunOptions()), n_class=2,
                             task_name="sst-2")
  model.build(None)
  export_classifier(model, path, max_len, False, ["negative", "positive"])


def _tf_runner(args):
  """A callable (B, L) -> runs one forward of the export and waits."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  threads = 1 if args.variant == "xla_inter1" else args.threads
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  from xlnet_tf.batch_predict.engine import (  # pylint: disable=import-outside-toplevel
      FrozenSignature, load_export)
  if args.variant == "saved":
    sig = tf.saved_model.load(args.export_dir).signatures["serve_features"]
  elif args.variant.startswith("frozen"):
    loaded = tf.saved_model.load(args.export_dir)  # alive while it freezes
    sig = FrozenSignature(loaded.signatures["serve_features"])
  else:
    precision = "bfloat16" if args.variant == "bf16" else "float32"
    sig = load_export(args.export_dir, precision,
                      xla_after=0 if args.variant.startswith("xla") else None
                      ).signatures["serve_features"]
  rng = np.random.default_rng(0)

  def run(b, l):
    feed = {"input_ids": tf.constant(rng.integers(10, 32000, (b, l)),
                                     tf.int32),
            "segment_ids": tf.zeros([b, l], tf.int32),
            "input_mask": tf.zeros([b, l], tf.float32)}
    sig(**feed)["probabilities"].numpy()
  return run


def _hf_runner(args):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(args.threads)
  s = SIZES[args.size]
  cfg = transformers.XLNetConfig(
      vocab_size=s["n_token"], d_model=s["d_model"], n_layer=s["n_layer"],
      n_head=s["n_head"], d_inner=s["d_inner"], ff_activation="gelu",
      untie_r=True, num_labels=2)
  model = transformers.XLNetForSequenceClassification(cfg).eval()

  def run(b, l):
    with torch.no_grad():
      model(torch.randint(10, s["n_token"], (b, l))).logits.numpy()
  return run


def child(args) -> None:
  """Loads, warms every shape (reporting the first call's seconds), then
  times a round per line read from stdin, printing one JSON line each."""
  t0 = time.perf_counter()
  run = (_hf_runner if args.variant == "hf" else _tf_runner)(args)
  load_seconds = round(time.perf_counter() - t0, 2)
  shapes = shapes_of(args.shapes)
  first = {}
  for b, l in shapes:
    t0 = time.perf_counter()
    run(b, l)
    first[f"{b}x{l}"] = round(time.perf_counter() - t0, 2)
    for _ in range(args.warmup):
      run(b, l)
  print(json.dumps({"ready": True, "load_seconds": load_seconds,
                    "first_call_seconds": first}), flush=True)
  for _ in sys.stdin:
    out = {}
    for b, l in shapes:
      times = []
      for _ in range(args.steps):
        t0 = time.perf_counter()
        run(b, l)
        times.append(time.perf_counter() - t0)
      out[f"{b}x{l}"] = b * l / statistics.median(times)
    print(json.dumps(out), flush=True)


def cpu_facts() -> dict:
  """The CPU's model, cores and the flags that matter here."""
  model, flags = None, []
  with open("/proc/cpuinfo") as f:
    for line in f:
      if line.startswith("model name") and model is None:
        model = line.split(":", 1)[1].strip()
      if line.startswith("flags"):
        flags = line.split()
        break
  wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
  return {"model": model, "cores": os.cpu_count(),
          "flags": [x for x in wanted if x in flags]}


def start(args, variant: str):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=os.pathsep.join([ROOT, os.environ.get(
                 "PYTHONPATH", "")]))
  if variant == "frozen_eigen":
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
  cmd = [sys.executable, os.path.abspath(__file__), "--child", variant,
         f"--export_dir={args.export_dir}", f"--shapes={args.shapes}",
         f"--steps={args.steps}", f"--threads={args.threads}",
         f"--warmup={args.warmup}",
         f"--size={args.size}"]
  proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=env)
  line = proc.stdout.readline()
  if not line:
    raise SystemExit(f"{variant}: the process ended before it was ready")
  return proc, json.loads(line)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--export_dir", default="/tmp/xlnet_bench_forward")
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--shapes", default="32x32,32x128,8x512")
  parser.add_argument("--variants", default=DEFAULT)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=2)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--warmup", type=int, default=1,
                      help="untimed calls per shape after the first")
  parser.add_argument("--child", choices=VARIANTS, dest="variant")
  args = parser.parse_args(argv)
  if args.variant:
    child(args)
    return
  started, load = time.time(), os.getloadavg()
  if not os.path.exists(os.path.join(args.export_dir, "saved_model.pb")):
    build_export(args.export_dir, args.size,
                 max(l for _, l in shapes_of(args.shapes)))
  procs, ready = {}, {}
  for v in args.variants.split(","):  # one at a time: compiles don't overlap
    procs[v], ready[v] = start(args, v)
    print(json.dumps({"variant": v, **ready[v]}), file=sys.stderr, flush=True)
  rounds = {v: [] for v in procs}
  for r in range(args.rounds):
    for v, proc in procs.items():
      proc.stdin.write("round\n")
      proc.stdin.flush()
      rounds[v].append(json.loads(proc.stdout.readline()))
      print(json.dumps({"round": r, "variant": v, **rounds[v][-1]}),
            file=sys.stderr, flush=True)
  for proc in procs.values():
    proc.stdin.close()
    proc.wait()
  result = {}
  for shape in args.shapes.split(","):
    row = {}
    for v in procs:
      rates = [x[shape] for x in rounds[v]]
      row[v] = {"positions_per_sec": [round(x, 1) for x in rates],
                "median": round(statistics.median(rates), 1),
                "spread": round(max(rates) / min(rates) - 1, 3),
                "load_seconds": ready[v]["load_seconds"],
                "first_call_seconds": ready[v]["first_call_seconds"][shape]}
    if "hf" in row:
      hf = row["hf"]["median"]
      row["vs_hf"] = {v: round(x["median"] / hf, 3) for v, x in row.items()
                      if v != "hf"}
    result[shape] = row
  print_report({"size": args.size, "threads": args.threads,
                "steps": args.steps, "rounds": args.rounds,
                "cpu": cpu_facts(), "shapes": result}, load, started)


if __name__ == "__main__":
  main()
