"""TFLite against the SavedModel it came from: size on disk and batch-1
latency of a features export, three variants in one run.

An XLNet classifier of `--size` (default XLNet-Base: 12 layers, d_model
768, 12 heads of 64, d_inner 3072, n_token 32000) with random weights
(dropout off, 2 classes) is exported with
`tasks/classification/serving.export_classifier` (the features `serving_default`
only, record length `--seq_len`), then converted by
`xlnet_tf.export.tflite.convert_features_export` to float32 and int8 (dynamic
range) flatbuffers, written beside it. Variants:
  saved_model     the export's serving_default (`tf.saved_model.load`),
                  `tf.config.threading` intra/inter-op threads = --threads
  tflite_float32  `xlnet_tf.export.tflite.TFLiteModel(num_threads=--threads)`
  tflite_int8     the same on the int8 flatbuffer
Every call takes numpy features of batch 1 (one SST-2-like sentence: 24
tokens, LEFT padded to --seq_len) and returns numpy outputs, so each side
pays its own input and output copies. After `--warmup` untimed calls per
variant, `--rounds` rounds of `--calls` turns: in a turn each variant makes
one timed call (the order rotated every turn). Per variant: the median of
each round (ms), the median and 10th/90th percentiles of all timed calls,
the spread of the round medians ((max - min) / median), the size on disk
(SavedModel: the whole directory), the ratio to the SavedModel, and the
largest logit difference from the SavedModel on 8 random inputs. The load
average before and after is kept (other work on the cores changes the
figures).

    python benchmarks/bench_tflite.py --rounds=3 > tflite.json
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ai_edge_litert  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from bench_common import SIZES, print_report  # noqa: E402
from data_utils.tokenization import CLS_ID, SEP_ID  # noqa: E402
from xlnet_tf.config import RunOptions, XLNetConfig  # noqa: E402
from xlnet_tf.encoder import XLNetModel  # noqa: E402
from xlnet_tf.tasks.classification.model import XLNetClassifier  # noqa: E402
from xlnet_tf.tasks.classification.serving import (  # noqa: E402
    export_classifier)
from xlnet_tf.export.tflite import (TFLITE_VARIANTS, TFLiteModel,  # noqa: E402
                                    convert_features_export)

VARIANTS = ("saved_model",) + tuple(f"tflite_{v}" for v in TFLITE_VARIANTS)


def log(message: str) -> None:
  print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
        flush=True)


def dir_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(base, f))
             for base, _, files in os.walk(path) for f in files)


def features(rng, batch: int, length: int, n_real: int) -> dict:
  """`batch` rows of `n_real` random pieces + `<sep> <cls>`, LEFT padded
  as `classification.features.convert_example` lays a single text out."""
  ids = np.zeros([batch, length], np.int32)
  segs = np.full([batch, length], 4, np.int32)  # SEG_ID_PAD
  mask = np.ones([batch, length], np.float32)
  start = length - n_real - 2
  ids[:, start:-2] = rng.randint(9, 32000, [batch, n_real])
  ids[:, -2], ids[:, -1] = SEP_ID, CLS_ID
  segs[:, start:-1], segs[:, -1] = 0, 2
  mask[:, start:] = 0.0
  return {"input_ids": ids, "segment_ids": segs, "input_mask": mask}


def saved_model_runner(path: str):
  sig = tf.saved_model.load(path).signatures["serving_default"]

  def run(**inputs):
    out = sig(**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}
  return run


def timed(fn, inputs) -> float:
  t0 = time.perf_counter()
  fn(**inputs)
  return time.perf_counter() - t0


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="base", choices=sorted(SIZES))
  p.add_argument("--seq_len", type=int, default=128)
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--calls", type=int, default=20)
  p.add_argument("--warmup", type=int, default=3)
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out_dir", default=None,
                 help="where the export and .tflite files go (default: a "
                 "temporary folder, removed at the end)")
  args = p.parse_args(argv)
  if args.rounds < 1 or args.calls < 1:
    p.error("--rounds and --calls must be at least 1")

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  started = time.time()
  load_before = os.getloadavg()
  with tempfile.TemporaryDirectory() as tmp:
    out_dir = args.out_dir or tmp
    os.makedirs(out_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    model = XLNetClassifier(XLNetModel(
        XLNetConfig(**SIZES[args.size]), RunOptions(dropout=0.0,
                                                    dropatt=0.0)),
        n_class=2, task_name="sst-2")
    model.build()
    seconds = {}
    t0 = time.perf_counter()
    sm_path = export_classifier(model, os.path.join(out_dir, "saved_model"),
                                args.seq_len, False,
                                labels=["negative", "positive"])
    seconds["export"] = round(time.perf_counter() - t0, 1)
    log(f"SavedModel export: {seconds['export']} s")
    del model
    sizes = {"saved_model": dir_bytes(sm_path)}
    paths = {}
    for v in TFLITE_VARIANTS:
      t0 = time.perf_counter()
      flatbuffer = convert_features_export(sm_path, v)
      seconds[f"convert_{v}"] = round(time.perf_counter() - t0, 1)
      paths[v] = os.path.join(out_dir, f"model_{v}.tflite")
      with open(paths[v], "wb") as f:
        f.write(flatbuffer)
      sizes[f"tflite_{v}"] = os.path.getsize(paths[v])
      log(f"convert {v}: {seconds[f'convert_{v}']} s, "
          f"{sizes[f'tflite_{v}'] / 1e6:.1f} MB")
    del flatbuffer

    runners = {"saved_model": saved_model_runner(sm_path)}
    for v in TFLITE_VARIANTS:
      runners[f"tflite_{v}"] = TFLiteModel(paths[v], args.threads)
    rng = np.random.RandomState(args.seed)
    one = features(rng, 1, args.seq_len, 24)
    # Agreement with the SavedModel on a few inputs (random weights: the
    # logits are small, so this is a sanity check, not an accuracy).
    check = features(rng, 8, args.seq_len, 24)
    reference = runners["saved_model"](**check)["logits"]
    logit_diff = {}
    for name in VARIANTS[1:]:
      logit_diff[name] = float(np.max(np.abs(
          runners[name](**check)["logits"] - reference)))

    first_call = {}
    for name in VARIANTS:
      first_call[name] = round(timed(runners[name], one) * 1e3, 1)
      for _ in range(args.warmup - 1):
        timed(runners[name], one)
      log(f"warm-up {name}: first call {first_call[name]} ms")

    # Turns call by call (the order rotated each call), so that a slow
    # spell of a shared machine lands on every variant alike.
    times = {name: [[] for _ in range(args.rounds)] for name in VARIANTS}
    for r in range(args.rounds):
      for i in range(args.calls):
        shift = (r * args.calls + i) % len(VARIANTS)
        for name in VARIANTS[shift:] + VARIANTS[:shift]:
          times[name][r].append(timed(runners[name], one) * 1e3)
      log(f"round {r + 1}: " + ", ".join(
          f"{name} {statistics.median(times[name][r]):.1f} ms"
          for name in VARIANTS))

  results = {}
  base_median = statistics.median(sum(times["saved_model"], []))
  for name in VARIANTS:
    every = sum(times[name], [])
    rounds = [statistics.median(c) for c in times[name]]
    median = statistics.median(every)
    results[name] = {
        "size_bytes": sizes[name], "size_mb": round(sizes[name] / 1e6, 1),
        "round_median_ms": [round(x, 2) for x in rounds],
        "median_ms": round(median, 2),
        "p10_ms": round(float(np.percentile(every, 10)), 2),
        "p90_ms": round(float(np.percentile(every, 90)), 2),
        "spread": round((max(rounds) - min(rounds)) / median, 3),
        "first_call_ms": first_call[name],
        "latency_vs_saved_model": round(median / base_median, 3),
        "size_vs_saved_model": round(sizes[name] / sizes["saved_model"], 3)}
    if name in logit_diff:
      results[name]["max_abs_logit_diff_vs_saved_model"] = float(
          f"{logit_diff[name]:.3g}")
  print_report({
      "benchmark": "tflite", "size": args.size, "seq_len": args.seq_len,
      "batch": 1, "threads": args.threads, "rounds": args.rounds,
      "calls_per_round": args.calls, "warmup_calls": args.warmup,
      "versions": {"tensorflow": tf.__version__,
                   "ai_edge_litert": getattr(ai_edge_litert, "__version__",
                                             "?")},
      "seconds": seconds, "results": results}, load_before, started)
  return 0


if __name__ == "__main__":
  sys.exit(main())
