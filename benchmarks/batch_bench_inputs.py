"""Helpers of bench_batch_predict.py: the model, the inputs, one job run
with its process tree's memory sampled, and the predictions compared.

Imports no framework (the driver stays light; the job's processes load
TensorFlow and Beam): the model is built in a child process.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1 << 20
# An absl log line's time (the first one the job writes comes from Beam's
# pipeline construction, after the imports and the export's checks).
_ABSL = re.compile(r"^[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")
_DONE = "batch prediction: "  # run.publish logs it once the files are out


def build_export(work: str, sp: str, config: dict, window: int) -> str:
  """A random language model of `config`, exported (run_generate.py's
  language-model export) into `work`/export."""
  code = f"""
import sys; sys.path.insert(0, {ROOT!r})
import xlnet_tf as xt
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.language_model.serving import export_language_model
config = xt.XLNetConfig(**{config!r}, ff_activation="gelu", untie_r=True)
lm = build_model("lm", config, xt.RunOptions(dropout=0.0, dropatt=0.0))
lm.build()
export_language_model(lm, {sp!r}, {work!r} + "/export", {window}, 1)
"""
  res = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       capture_output=True, text=True)
  if res.returncode != 0:
    raise SystemExit(res.stderr[-3000:])
  return f"{work}/export"


def _corpus_lines(shared: str, n: int) -> List[str]:
  lines = []
  with open(glob.glob(f"{shared}/data/corpus/*.txt")[0],
            encoding="utf-8") as g:
    for line in g:
      if line.strip():
        lines.append(line.strip())
        if len(lines) == n:
          break
  return lines


def _reviews(shared: str, n: int) -> List[str]:
  """`n` IMDB test reviews, pos and neg alternating."""
  files = [sorted(glob.glob(f"{shared}/data/imdb/aclImdb/test/{label}/*.txt"))
           for label in ("pos", "neg")]
  texts = []
  for i in range(n):
    with open(files[i % 2][i // 2], encoding="utf-8") as g:
      texts.append(g.read().strip())
  return texts


def _write(path: str, texts: List[str]) -> None:
  with open(path, "w", encoding="utf-8") as f:
    for text in texts:
      f.write((json.dumps({"text": text}) if path.endswith(".jsonl")
               else text) + "\n")


def write_inputs(shared: str, work: str, corpus_rows: int, imdb_rows: int,
                 mix_rows: int) -> Dict[str, Tuple[str, int]]:
  """name -> (file, rows), each file in its own folder `work`/name/:
    corpus  the first `corpus_rows` non-empty lines of the shared corpus
    imdb    `imdb_rows` whole reviews (JSONL)
    mix     `mix_rows` rows, three single words (each the first word of a
            corpus line) then one whole review, repeated (JSONL)"""
  lines = _corpus_lines(shared, max(corpus_rows, mix_rows))
  texts = {"corpus": lines[:corpus_rows],
           "imdb": _reviews(shared, imdb_rows)}
  long = _reviews(shared, imdb_rows + mix_rows // 4 + 1)[imdb_rows:]
  texts["mix"] = [long[i // 4] if i % 4 == 3 else lines[i].split()[0]
                  for i in range(mix_rows)]
  inputs = {}
  for name, rows in texts.items():
    os.makedirs(f"{work}/{name}")
    path = f"{work}/{name}/part-0." + ("txt" if name == "corpus" else "jsonl")
    _write(path, rows)
    inputs[name] = (path, len(rows))
  return inputs


def write_copies(path: str, folder: str, copies: int) -> str:
  """`copies` copies of `path` in `folder` (part-0 ... : the same rows
  under other keys); returns their glob."""
  os.makedirs(folder)
  ext = os.path.splitext(path)[1]
  with open(path, encoding="utf-8") as f:
    text = f.read()
  for i in range(copies):
    with open(f"{folder}/part-{i}{ext}", "w", encoding="utf-8") as f:
      f.write(text)
  return f"{folder}/part-*{ext}"


def _hwm(pid: int) -> Optional[int]:
  """The process's peak resident set (VmHWM, bytes) so far."""
  try:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None


class TreeMemory:
  """Samples the resident memory of a process and of all its descendants
  every `every` seconds on a thread: each process's largest sampled RSS,
  and its last VmHWM read (the kernel's own peak, so nothing between two
  samples is missed while the process lives). Beam's worker processes are
  grand-children (`/bin/sh -c python -m ...sdk_worker_main`)."""

  def __init__(self, pid: int, every: float = 0.2):
    self.root, self.every = pid, every
    self.seen: Dict[int, dict] = {}
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def _sample(self) -> None:
    try:
      root = psutil.Process(self.root)
      procs = [root] + root.children(recursive=True)
    except psutil.Error:
      return
    for p in procs:
      try:
        rss = p.memory_info().rss
        info = self.seen.setdefault(p.pid, {"cmd": " ".join(p.cmdline()),
                                            "name": p.name(), "rss": 0})
      except psutil.Error:
        continue
      info["rss"] = max(info["rss"], rss)
      info["hwm"] = _hwm(p.pid) or info.get("hwm", 0)

  def _run(self) -> None:
    while not self._stop.is_set():
      self._sample()
      self._stop.wait(self.every)

  def stop(self) -> dict:
    """{"driver": {...}, "workers": [{...}, ...]} in MB (shells and other
    helpers left out)."""
    self._stop.set()
    self._thread.join()
    mb = lambda v: round(v / MB, 1)  # noqa: E731
    report = {"driver": None, "workers": []}
    for pid, info in sorted(self.seen.items()):
      entry = {"pid": pid, "peak_rss_mb": mb(info["rss"]),
               "vm_hwm_mb": mb(info.get("hwm", 0))}
      if pid == self.root:
        report["driver"] = entry
      elif "sdk_worker_main" in info["cmd"] and info["name"] not in (
          "sh", "bash", "dash"):
        report["workers"].append(entry)
    return report


def _clock(line: str) -> Optional[float]:
  m = _ABSL.match(line)
  return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def job_seconds(stderr: str) -> Optional[float]:
  """From the job's first absl log line (Beam building the pipeline) to
  the driver's "batch prediction: ..." line (the outputs published): the
  pipeline (worker start-up and model loads included) without the
  process's imports and the export's checks."""
  start = end = None
  for line in stderr.splitlines():
    t = _clock(line)
    if t is None:
      continue
    start = t if start is None else start
    if _DONE in line:
      end = t
  if start is None or end is None:
    return None
  return round((end - start) % 86400, 1)


def shapes_summary(shapes: list) -> dict:
  """`padding.shapes` ([rows, length, count] per batch shape) in brief."""
  batches = sum(c for _, _, c in shapes)
  return {"distinct": len(shapes), "batches": batches,
          "mean_fed_length": round(sum(l * c for _, l, c in shapes)
                                   / max(batches, 1), 1),
          "mean_rows": round(sum(r * c for r, _, c in shapes)
                             / max(batches, 1), 1),
          "max_length": max((l for _, l, _ in shapes), default=0)}


def run_job(cmd: List[str], out: str, rows: int, sample: bool) -> dict:
  """Runs one job (a fresh process) and returns its figures: wall seconds
  of the process and of the job (`job_seconds`), rows/s and real tokens/s
  over the wall time, the manifest's padding, and with `sample` the
  memory of its process tree (`TreeMemory`)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  t0 = time.perf_counter()
  with open(out + ".stderr", "w+", encoding="utf-8") as err:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=err)
    memory = TreeMemory(proc.pid) if sample else None
    code = proc.wait()
    wall = time.perf_counter() - t0
    err.seek(0)
    stderr = err.read()
  rss = memory.stop() if memory else None
  if code != 0:  # recorded, and the benchmark goes on
    lines = [l for l in stderr.splitlines() if l.strip()] or [f"exit {code}"]
    return {"error": lines[-1][:400], "stderr": out + ".stderr"}
  with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
    padding = json.load(f)["padding"]
  result = {"wall_seconds": round(wall, 1), "job_seconds": job_seconds(
      stderr), "rows_per_second": round(rows / wall, 2),
            "real_tokens_per_second": round(padding["positions_real"] / wall,
                                            1),
            "padding_fraction": round(padding["fraction"], 4),
            "positions_real": padding["positions_real"],
            "positions_fed": padding["positions_fed"],
            "batches": padding["batches"],
            "bucketing_in_manifest": padding.get("bucketing")}
  if "shapes" in padding:
    result["shapes"] = shapes_summary(padding["shapes"])
  if rss is not None:
    result["memory"] = rss
  return result


def read_predictions(out: str) -> Dict[Tuple[str, int], tuple]:
  """(file, line) -> (ids, pooled vectors) of a job's prediction shards."""
  rows = {}
  for path in sorted(glob.glob(f"{out}/predictions-*.jsonl")):
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        rows[(row["file"], row["line"])] = (tuple(row["ids"]), np.asarray(
            [row["pooled"][k] for k in sorted(row["pooled"])], np.float32))
  return rows


def max_difference(ref: dict, got: dict, what: str, tolerance: float,
                   same_key=lambda key: key) -> float:
  """The largest pooled difference of `got` against `ref` by key (`same_key`
  maps a key of `got` to `ref`'s); exits unless the keys and ids are the
  same and every value is within `tolerance`."""
  if {same_key(k) for k in got} != set(ref) or not got:
    raise SystemExit(f"{what}: not the rows of the first run "
                     f"({len(got)} against {len(ref)})")
  worst = 0.0
  for key, (ids, pooled) in got.items():
    ref_ids, ref_pooled = ref[same_key(key)]
    if ids != ref_ids:
      raise SystemExit(f"{what}: {key}: other ids than the first run")
    worst = max(worst, float(np.max(np.abs(pooled - ref_pooled))))
  if worst > tolerance:
    raise SystemExit(f"{what}: pooled vectors differ by {worst:.3g} "
                     f"(more than {tolerance})")
  return worst
