"""TensorFlow side of bench_vs_transformers.py; each mode a fresh process.

    vs_transformers_tf.py build --size small --work W --spiece S --window 512
        A random classifier of `--size` (2 classes "0"/"1", summary "last"
        with its projection, as run_classifier.py builds it for
        --task_name=generic): W/model/ckpt-1 (native checkpoint, for
        run_classifier.py --predict_ckpt) with W/model/xlnet_config.json,
        W/export/features/1 (the features export run_classifier.py writes
        after training) and W/hf (save_hf_weights, for transformers).
    vs_transformers_tf.py forward --export E --shapes '[[32, 40, 3], ...]'
        The export's `serve_features`, loaded as the job's workers load it
        (`engine.load_export`; `--loader=saved_model`: tf.saved_model.load),
        on each [rows, length, count] with
        all-real random ids (input_mask 0, segment_ids 0): one untimed call
        per shape, then min(count, --reps) timed calls; a shape's time is
        their median x count. Prints seconds, positions (sum rows*length*
        count) and positions_per_second.
    vs_transformers_tf.py nomodel -- <run_batch_predict.py flags>
        run_batch_predict.py in this process with the model replaced by a
        stub answering zeros at once (the export is still checked, the
        texts read, tokenized, bucketed, the outputs written): the job's
        wall without model load and forward. In-process DirectRunner only
        (worker processes would load the real export).
Each mode prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
# After the path: the project from this checkout.
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import run_batch_predict  # noqa: E402
import xlnet_tf as xt  # noqa: E402
from bench_common import SIZES  # noqa: E402
from data_utils.errors import run_app  # noqa: E402
from xlnet_tf.batch_predict import handler  # noqa: E402
from xlnet_tf.batch_predict.engine import load_export  # noqa: E402
from xlnet_tf.export.layout import prepare_export_root, version_dir  # noqa: E402
from xlnet_tf.io.native import save_native_checkpoint  # noqa: E402
from xlnet_tf.pretrained import build_model, save_hf_weights  # noqa: E402
from xlnet_tf.tasks.classification.formats import CLASSIFIER_EXPORT_KIND  # noqa: E402
from xlnet_tf.tasks.classification.serving import export_classifier  # noqa: E402

LABELS = ["0", "1"]


def build(args) -> dict:
  tf.random.set_seed(args.seed)
  config = xt.XLNetConfig(**SIZES[args.size], ff_activation="gelu",
                          untie_r=True)
  model = build_model("classification", config,
                      xt.RunOptions(dropout=0.0, dropatt=0.0), n_class=2,
                      task_name="generic", summary_type="last",
                      use_summ_proj=True)
  work = args.work
  os.makedirs(f"{work}/model", exist_ok=True)
  ckpt = save_native_checkpoint(model, f"{work}/model/ckpt-1")
  config.to_json(f"{work}/model/xlnet_config.json")
  root = f"{work}/export"
  prepare_export_root(root, CLASSIFIER_EXPORT_KIND)
  export = export_classifier(model, version_dir(root, "features", 1),
                             args.window, False, labels=LABELS,
                             sp_model_path=args.spiece, text_signatures=False)
  save_hf_weights(model, f"{work}/hf", labels=LABELS)
  return {"checkpoint": ckpt, "config": f"{work}/model/xlnet_config.json",
          "export": export, "hf": f"{work}/hf"}


def forward(args) -> dict:
  loaded = (load_export(args.export) if args.loader == "engine"
            else tf.saved_model.load(args.export))
  signature = loaded.signatures["serve_features"]
  rng = np.random.default_rng(0)
  per_shape, total_s, positions = [], 0.0, 0
  for rows, length, count in json.loads(args.shapes):
    feats = {"input_ids": tf.constant(rng.integers(
                 10, 32000, (rows, length)), tf.int32),
             "segment_ids": tf.zeros([rows, length], tf.int32),
             "input_mask": tf.zeros([rows, length], tf.float32)}
    signature(**feats)["logits"].numpy()  # untimed: this shape's first call
    times = []
    for _ in range(min(count, args.reps)):
      t0 = time.perf_counter()
      signature(**feats)["logits"].numpy()
      times.append(time.perf_counter() - t0)
    seconds = statistics.median(times) * count
    total_s += seconds
    positions += rows * length * count
    per_shape.append([rows, length, count, round(seconds, 3)])
  return {"loader": args.loader, "seconds": round(total_s, 3), "positions": positions,
          "positions_per_second": round(positions / total_s, 1),
          "shapes_seconds": per_shape}


class _StubModel:
  """Stands for a loaded classifier export: answers zeros at once."""

  def __init__(self):
    self.signatures = {"serve_features": self.serve,
                       "serving_default": self.serve}

  @staticmethod
  def serve(input_ids, segment_ids, input_mask):
    del segment_ids, input_mask
    b = tf.shape(input_ids)[0]
    return {"logits": tf.zeros([b, 2]), "probabilities": tf.fill([b, 2], 0.5),
            "class_id": tf.zeros([b], tf.int32),
            "label": tf.fill([b], LABELS[0])}


def nomodel(argv) -> None:
  handler.load_export = lambda *args, **kwargs: _StubModel()
  run_batch_predict.define_flags()
  sys.argv = ["run_batch_predict.py", *argv]
  run_app("run_batch_predict", run_batch_predict.main)


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "nomodel":
    rest = sys.argv[2:]
    nomodel(rest[1:] if rest[:1] == ["--"] else rest)
    return
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="mode", required=True)
  b = sub.add_parser("build")
  b.add_argument("--size", required=True, choices=sorted(SIZES))
  b.add_argument("--work", required=True)
  b.add_argument("--spiece", required=True)
  b.add_argument("--window", type=int, default=512)
  b.add_argument("--seed", type=int, default=0)
  f = sub.add_parser("forward")
  f.add_argument("--export", required=True)
  f.add_argument("--shapes", required=True)
  f.add_argument("--reps", type=int, default=2)
  f.add_argument("--loader", default="engine",
                 choices=("engine", "saved_model"))
  args = parser.parse_args()
  print(json.dumps(build(args) if args.mode == "build" else forward(args)))


if __name__ == "__main__":
  main()
