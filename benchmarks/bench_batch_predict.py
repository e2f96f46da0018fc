"""Batch inference three ways at the XLNet-Base shape; prints JSON.

    .venv/bin/python benchmarks/bench_batch_predict.py --imdb_rows 64 \\
        --corpus_rows 512 --rounds 2

The job is embedding (`masked_mean` of the last layer, window 512) of the
shared IMDB reviews (test/pos and test/neg, one review per file, long) and
of the shared English corpus (its first non-empty lines, short), with a
random Base-shaped language model:
  script        run_embed.py: one process, the checkpoint, its own length
                sorting within chunks of 32 batches
  beam_1        run_batch_predict.py --job=embed on the export, DirectRunner
                with 1 worker (in-process), length bucketing
  beam_2        the same with 2 worker processes (multi_processing)
  beam_1_flat   beam_1 without bucketing (--nobucketing): the padding it
                costs
Every way is a fresh process (TensorFlow's import and the model's load
included in its wall time); the ways take turns within each round. Rows/s
is rows over wall seconds. The padding fraction is the manifest's (padded
positions over all positions fed).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
from bench_common import SIZES, print_report  # noqa: E402

WAYS = ("script", "beam_1", "beam_2", "beam_1_flat")


def build_model(work: str, sp: str, size: str, window: int) -> dict:
  """A random LM of `size`: its original checkpoint and its export."""
  code = f"""
import sys; sys.path.insert(0, {ROOT!r})
import xlnet_tf as xt
from xlnet_tf.io import save_original_checkpoint
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.language_model.serving import export_language_model
config = xt.XLNetConfig(**{SIZES[size]!r}, ff_activation="gelu", untie_r=True)
lm = build_model("lm", config, xt.RunOptions(dropout=0.0, dropatt=0.0))
lm.build()
save_original_checkpoint(lm, {work!r} + "/lm/model.ckpt")
config.to_json({work!r} + "/lm/xlnet_config.json")
export_language_model(lm, {sp!r}, {work!r} + "/export", {window}, 1)
"""
  res = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       capture_output=True, text=True)
  if res.returncode != 0:
    raise SystemExit(res.stderr[-3000:])
  return {"checkpoint": f"{work}/lm/model.ckpt", "export": f"{work}/export"}


def write_inputs(shared: str, work: str, imdb_rows: int, corpus_rows: int
                 ) -> dict:
  reviews = []
  for label in ("pos", "neg"):
    reviews.append(sorted(glob.glob(
        f"{shared}/data/imdb/aclImdb/test/{label}/*.txt")))
  imdb = f"{work}/imdb.jsonl"
  with open(imdb, "w", encoding="utf-8") as f:
    for i in range(imdb_rows):
      with open(reviews[i % 2][i // 2], encoding="utf-8") as g:
        f.write(json.dumps({"text": g.read().strip()}) + "\n")
  corpus = f"{work}/corpus.txt"
  with open(glob.glob(f"{shared}/data/corpus/*.txt")[0],
            encoding="utf-8") as g, open(corpus, "w", encoding="utf-8") as f:
    kept = 0
    for line in g:
      if line.strip() and kept < corpus_rows:
        f.write(line.strip() + "\n")
        kept += 1
  return {"imdb": (imdb, imdb_rows), "corpus": (corpus, corpus_rows)}


def command(way: str, model: dict, sp: str, path: str, out: str,
            window: int, batch: int) -> list:
  if way == "script":
    return [sys.executable, "run_embed.py",
            f"--init_checkpoint={model['checkpoint']}",
            f"--spiece_model_file={sp}", f"--input_file={path}",
            f"--output_file={out}.jsonl", "--pooling=masked_mean",
            "--layers=-1", "--nopiece_vectors", f"--max_seq_length={window}",
            f"--batch_size={batch}"]
  cmd = [sys.executable, "run_batch_predict.py",
         f"--export_dir={model['export']}", f"--input={path}",
         f"--output_dir={out}", "--job=embed", "--pooling=masked_mean",
         "--layers=-1", f"--batch_size={batch}"]
  if way == "beam_2":
    cmd.append("--pipeline_options=--direct_num_workers=2 "
               "--direct_running_mode=multi_processing")
  if way == "beam_1_flat":
    cmd.append("--nobucketing")
  return cmd


def run_way(cmd: list, out: str) -> dict:
  t0 = time.perf_counter()
  res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  wall = time.perf_counter() - t0
  if res.returncode != 0:
    raise SystemExit(res.stderr[-3000:])
  result = {"wall_seconds": round(wall, 1)}
  manifest = os.path.join(out, "manifest.json")
  if os.path.exists(manifest):
    with open(manifest, encoding="utf-8") as f:
      padding = json.load(f)["padding"]
    result["padding_fraction"] = round(padding["fraction"], 4)
    result["batches"] = padding["batches"]
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--window", type=int, default=512)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--imdb_rows", type=int, default=64)
  parser.add_argument("--corpus_rows", type=int, default=512)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--ways", default=",".join(WAYS))
  args = parser.parse_args()
  ways = args.ways.split(",")
  started, load = time.time(), os.getloadavg()
  sp = f"{args.shared}/data/spiece/spiece.model"
  with tempfile.TemporaryDirectory() as work:
    model = build_model(work, sp, args.size, args.window)
    inputs = write_inputs(args.shared, work, args.imdb_rows,
                          args.corpus_rows)
    results = {name: {w: [] for w in ways} for name in inputs}
    for r in range(args.rounds):
      for name, (path, rows) in inputs.items():
        for way in ways:
          out = f"{work}/out_{name}_{way}_{r}"
          result = run_way(command(way, model, sp, path, out, args.window,
                                   args.batch_size), out)
          result["rows_per_second"] = round(rows / result["wall_seconds"], 2)
          results[name][way].append(result)
  report = {"size": args.size, "window": args.window,
            "batch_size": args.batch_size, "rounds": args.rounds,
            "rows": {n: rows for n, (_, rows) in inputs.items()},
            "results": results}
  print_report(report, load, started)


if __name__ == "__main__":
  main()
