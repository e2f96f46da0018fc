"""The batch-prediction job against transformers and against the model's
own forward rate (issue 38); prints one JSON.

    XLNET_SHARED=/work/shared .venv/bin/python benchmarks/bench_vs_transformers.py \\
        --size base --corpus_rows 512 --imdb_rows 64 --rounds 2
    # a quick check that everything runs
    XLNET_SHARED=/work/shared .venv/bin/python benchmarks/bench_vs_transformers.py \\
        --size small --corpus_rows 64 --imdb_rows 16 --rounds 1

One random classifier of `--size` (2 classes), built by this project and
saved three ways (vs_transformers_tf.py build): a native checkpoint, the
features export run_classifier.py writes, and HF weights. Inputs, the same
rows for every way (one TSV, header `text<TAB>label`): the first
`--corpus_rows` non-empty lines of the shared corpus (short) and
`--imdb_rows` IMDB test reviews (long; `<br />` as a space, as the IMDB
reader; every way keeps the first window - 2 pieces, then <sep> <cls>, as
`convert_example`). Ways, each a fresh process timed from outside (imports
and model load included), taking turns within each round (the order
rotates by round):
  hf      transformers' XLNetForSequenceClassification in PyTorch on the
          HF weights (vs_transformers_hf.py: sorted by length, batches of
          --batch_size, LEFT padded, inference_mode, no mems, 2 threads)
  beam_1  run_batch_predict.py on the export, --bucketing=global,
          DirectRunner in-process
  beam_2  the same with 2 worker processes (multi_processing)
  script  run_classifier.py --do_predict on the TSV with the checkpoint
          (every row padded to the window, as its records are)
Each round also measures, per input: `tokenize_seconds` (this project's
tokenizer over all rows, in this process), `nomodel` (beam_1 with the model
replaced by a stub answering at once: the job's wall without model load and
forward) and `forward` (a fresh process loads the export and times
`serve_features` on the job's batch shapes, all positions real: the
model's own rate on that work).

Per way: `rows_per_second` = rows / process wall; hf also
`rows_per_second_forward` (its model calls only) and beam_1
`rows_per_second_model` (rows / (wall - nomodel wall): load and forward).
Goal A: `vs_hf` = a way's rows/s over hf's in the same round; beam_1's
`vs_hf_model` its rows_per_second_model over hf's rows_per_second_forward. Goal B:
`forward_ratio` = the job's positions_real / its wall, over the forward
rate on its shapes (the manifest's `padding.shapes`, or, before it
carries them, [rows/batches, positions_fed/rows] x batches:
`shapes_source` says which). `agreement`: labels that differ and the max
|difference of probabilities| between hf and beam_1 (same weights),
over all rows and over the rows whose pieces are identical
(`pieces_differ`: rows where transformers' tokenizer gives other ids).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
# After the path: the project from this checkout.
from bench_common import SIZES, print_report  # noqa: E402
from data_utils.tokenization import (CLS_ID, SEP_ID,  # noqa: E402
                                     SentencePieceTokenizer)

WAYS = ("hf", "beam_1", "beam_2", "script")
TWO_WORKERS = ("--pipeline_options=--direct_num_workers=2 "
               "--direct_running_mode=multi_processing")
CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni",
             "amx_bf16", "amx_tile", "amx_int8")


def cpu() -> dict:
  model, flags = "?", set()
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      key, _, value = line.partition(":")
      if key.strip() == "model name":
        model = value.strip()
      elif key.strip() == "flags":
        flags = set(value.split())
  return {"model": model, "cores": os.cpu_count(),
          "flags": [x for x in CPU_FLAGS if x in flags]}


def clean(text: str) -> str:
  return " ".join(text.replace("<br />", " ").split())


def write_inputs(shared: str, work: str, corpus_rows: int, imdb_rows: int
                 ) -> dict:
  """`{name: (data_dir, texts)}`: each input a `test.tsv` in its folder."""
  texts = {"corpus": [], "imdb": []}
  with open(glob.glob(f"{shared}/data/corpus/*.txt")[0],
            encoding="utf-8") as g:
    for line in g:
      if len(texts["corpus"]) == corpus_rows:
        break
      if line.strip():
        texts["corpus"].append(clean(line))
  reviews = [sorted(glob.glob(f"{shared}/data/imdb/aclImdb/test/{label}/*.txt"))
             for label in ("pos", "neg")]
  for i in range(imdb_rows):
    with open(reviews[i % 2][i // 2], encoding="utf-8") as g:
      texts["imdb"].append(clean(g.read()))
  inputs = {}
  for name, rows in texts.items():
    if not rows:
      continue
    os.makedirs(f"{work}/{name}", exist_ok=True)
    with open(f"{work}/{name}/test.tsv", "w", encoding="utf-8") as f:
      f.write("text\tlabel\n" + "".join(f"{t}\t0\n" for t in rows))
    inputs[name] = (f"{work}/{name}", rows)
  return inputs


def run(cmd: list, env_extra=None) -> tuple:
  """(stdout's last JSON line or None, wall seconds); exits on failure."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env_extra or {}))
  t0 = time.perf_counter()
  res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
  wall = time.perf_counter() - t0
  if res.returncode != 0:
    raise SystemExit(f"{' '.join(cmd)}\n{res.stderr[-3000:]}")
  lines = [x for x in res.stdout.strip().splitlines() if x.startswith("{")]
  return (json.loads(lines[-1]) if lines else None), wall


def tf_child(*args) -> list:
  return [sys.executable, os.path.join(HERE, "vs_transformers_tf.py"), *args]


def beam_cmd(model: dict, data_dir: str, out: str, batch: int) -> list:
  return ["run_batch_predict.py", f"--export_dir={model['export']}",
          f"--input={data_dir}/test.tsv", f"--output_dir={out}",
          "--text_column=text", f"--batch_size={batch}", "--bucketing=global"]


def beam_rows(out: str, n: int) -> np.ndarray:
  """Probabilities by row (TSV line 1 is the header, row 0 line 2)."""
  probs = np.full((n, 2), np.nan)
  for path in glob.glob(f"{out}/predictions-*.jsonl"):
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        probs[row["line"] - 2] = row["probabilities"]
  return probs


def script_labels(predict_dir: str, n: int) -> np.ndarray:
  labels = np.full(n, -1)
  with open(f"{predict_dir}/generic.tsv", encoding="utf-8") as f:
    for row in list(csv.reader(f, delimiter="\t"))[1:]:
      labels[int(row[0].split("-")[1]) - 1] = int(row[1])  # guid test-<k>
  return labels


def run_way(way: str, args, model, data_dir: str, rows: int, out: str
            ) -> dict:
  if way == "hf":
    res, wall = run([sys.executable, os.path.join(HERE, "vs_transformers_hf.py"),
                     f"--hf_dir={model['hf']}", f"--spiece={args.spiece}",
                     f"--input={data_dir}/test.tsv", f"--out={out}.json",
                     f"--tokenizer={args.hf_tokenizer}",
                     f"--window={args.window}",
                     f"--batch_size={args.batch_size}", "--threads=2"],
                    {"OMP_NUM_THREADS": "2"})
    with open(f"{out}.json", encoding="utf-8") as f:
      saved = json.load(f)
    res.update(wall_seconds=round(wall, 2),
               rows_per_second_forward=round(rows / res["forward_seconds"], 2))
    return dict(res, _probs=np.asarray(saved["probabilities"]),
                _crc=saved["ids_crc32"])
  if way == "script":
    _, wall = run([sys.executable, "run_classifier.py", "--task_name=generic",
                   "--label_list=0,1", f"--data_dir={data_dir}",
                   f"--model_config_path={model['config']}",
                   f"--spiece_model_file={args.spiece}",
                   f"--predict_ckpt={model['checkpoint']}",
                   f"--model_dir={out}/model", f"--output_dir={out}/data",
                   f"--predict_dir={out}/pred", "--do_predict",
                   f"--max_seq_length={args.window}",
                   f"--predict_batch_size={args.batch_size}"])
    return {"wall_seconds": round(wall, 2),
            "_labels": script_labels(f"{out}/pred", rows)}
  cmd = [sys.executable, *beam_cmd(model, data_dir, out, args.batch_size)]
  if way == "beam_2":
    cmd.append(TWO_WORKERS)
  _, wall = run(cmd)
  with open(f"{out}/manifest.json", encoding="utf-8") as f:
    padding = json.load(f)["padding"]
  return {"wall_seconds": round(wall, 2), "padding": padding,
          "_probs": beam_rows(out, rows)}


def shapes_of(padding: dict, rows: int) -> tuple:
  if padding.get("shapes"):
    return [list(map(int, s)) for s in padding["shapes"]], "manifest"
  batches = padding["batches"]
  return ([[round(rows / batches), round(padding["positions_fed"] / rows),
            batches]], "fallback [rows/batches, positions_fed/rows] x batches")


def agreement(hf: dict, probs: np.ndarray, same: np.ndarray) -> dict:
  diff = np.abs(hf["_probs"] - probs).max(-1)
  labels = hf["_probs"].argmax(-1) != probs.argmax(-1)
  return {"labels_differ": int(labels.sum()),
          "max_abs_dprob": float(np.nanmax(diff)),
          "labels_differ_same_pieces": int(labels[same].sum()),
          "max_abs_dprob_same_pieces": float(np.nanmax(diff[same]))
          if same.any() else None}


def our_pieces(sp: str, texts, window: int) -> tuple:
  """(seconds to tokenize every row with this project's tokenizer, each
  row's ids as the classifier reads them)."""
  t0 = time.perf_counter()
  tok = SentencePieceTokenizer(sp)
  ids = [tok.encode_ids(t)[:window - 2] + [SEP_ID, CLS_ID] for t in texts]
  return time.perf_counter() - t0, ids


def one_round(r: int, args, model, inputs, ways) -> dict:
  order = ways[r % len(ways):] + ways[:r % len(ways)]
  report = {}
  for name, (data_dir, texts) in inputs.items():
    n, res = len(texts), {}
    for way in order:
      res[way] = run_way(way, args, model, data_dir, n,
                         f"{args.work}/out_{name}_{way}_{r}")
      res[way]["rows_per_second"] = round(n / res[way]["wall_seconds"], 2)
    tok_s, ids = our_pieces(args.spiece, texts, args.window)
    extra = {"tokenize_seconds": round(tok_s, 3),
             "positions_real_ours": sum(map(len, ids))}
    same = np.ones(n, bool)
    if "hf" in res:
      same = np.array([zlib.crc32(np.asarray(x, np.int32).tobytes()) == c
                       for x, c in zip(ids, res["hf"]["_crc"])])
      extra["pieces_differ"] = int((~same).sum())
    if "beam_1" in res:
      out = f"{args.work}/out_{name}_nomodel_{r}"
      _, wall = run(tf_child("nomodel", "--", *beam_cmd(
          model, data_dir, out, args.batch_size)[1:]))
      extra["nomodel_wall_seconds"] = round(wall, 2)
      b1 = res["beam_1"]
      b1["model_seconds"] = round(b1["wall_seconds"] - wall, 2)
      # Not positive: the two walls' noise exceeds the model's share.
      b1["rows_per_second_model"] = round(n / b1["model_seconds"], 2) \
          if b1["model_seconds"] > 0 else None
    forwards = {}
    for way in ("beam_1", "beam_2"):
      if way not in res:
        continue
      pad = res[way]["padding"]
      shapes, source = shapes_of(pad, n)
      key = json.dumps(shapes)
      if key not in forwards:
        forwards[key] = run(tf_child("forward", f"--export={model['export']}",
                                     f"--shapes={key}",
                                     f"--reps={args.forward_reps}"))[0]
      fwd = forwards[key]
      job_rate = pad["positions_real"] / res[way]["wall_seconds"]
      res[way].update(
          padding_fraction=round(pad["fraction"], 4), batches=pad["batches"],
          positions_real=pad["positions_real"],
          positions_per_second=round(job_rate, 1), shapes=shapes,
          shapes_source=source, forward=fwd,
          forward_ratio=round(job_rate / fwd["positions_per_second"], 3))
      res[way].pop("padding")
    if "hf" in res:
      hf_rate = res["hf"]["rows_per_second"]
      for way in res:
        res[way]["vs_hf"] = round(res[way]["rows_per_second"] / hf_rate, 2)
        if way != "hf" and "_probs" in res[way]:
          res[way]["agreement_with_hf"] = agreement(res["hf"],
                                                    res[way]["_probs"], same)
        elif way == "script":
          res[way]["agreement_with_hf"] = {"labels_differ": int(
              (res["hf"]["_probs"].argmax(-1) != res[way]["_labels"]).sum())}
      if res.get("beam_1", {}).get("rows_per_second_model"):
        res["beam_1"]["vs_hf_model"] = round(
            res["beam_1"]["rows_per_second_model"]
            / res["hf"]["rows_per_second_forward"], 2)
    for way in res:
      for k in [k for k in res[way] if k.startswith("_")]:
        del res[way][k]
    report[name] = {"ways": res, **extra}
  return report


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--corpus_rows", type=int, default=512)
  parser.add_argument("--imdb_rows", type=int, default=64)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--ways", default=",".join(WAYS))
  parser.add_argument("--work_dir", default=None,
                      help="Kept afterwards (default: a temporary folder).")
  parser.add_argument("--window", type=int, default=512)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--hf_tokenizer", default="transformers",
                      choices=("transformers", "project"))
  parser.add_argument("--forward_reps", type=int, default=2)
  args = parser.parse_args()
  ways = args.ways.split(",")
  if set(ways) - set(WAYS):
    raise SystemExit(f"--ways: unknown {sorted(set(ways) - set(WAYS))}; "
                     f"use {WAYS}")
  args.spiece = f"{args.shared}/data/spiece/spiece.model"
  started, load = time.time(), os.getloadavg()
  with tempfile.TemporaryDirectory() as tmp:
    args.work = os.path.abspath(args.work_dir or tmp)
    os.makedirs(args.work, exist_ok=True)
    model, build_s = run(tf_child("build", f"--size={args.size}",
                                  f"--work={args.work}",
                                  f"--spiece={args.spiece}",
                                  f"--window={args.window}"))
    inputs = write_inputs(args.shared, args.work, args.corpus_rows,
                          args.imdb_rows)
    rounds = [one_round(r, args, model, inputs, ways)
              for r in range(args.rounds)]
  report = {"cpu": cpu(), "size": args.size, "window": args.window,
            "batch_size": args.batch_size, "hf_tokenizer": args.hf_tokenizer,
            "rows": {n: len(t) for n, (_, t) in inputs.items()},
            "build_seconds": round(build_s, 1), "rounds": rounds}
  print_report(report, load, started)


if __name__ == "__main__":
  main()
