"""The pretraining-records job on local disk and in buckets; prints JSON.

    git -C /work/main worktree add /tmp/xlnet_old <commit before issue 36>
    .venv/bin/python benchmarks/bench_buckets.py --old /tmp/xlnet_old \\
        --rounds 3 [--mib 2]

Two comparisons, each taking turns in one run (the order rotates every
round, so a slow spell of a shared machine lands on all alike):

  local_old_vs_new  the job with every path local, run by the tree before
                    the path layer (--old) and by this tree: the path
                    layer's cost on local paths (it should be none).
  bucket_overhead   this tree's job with its inputs and save_dir on local
                    disk, in a GCS server (fake-gcs-server) and in an S3
                    server (moto), both on 127.0.0.1: the cost of the
                    stores' protocol and the uploads, without a network's
                    latency or bandwidth.

A run is one CLI process: `create_pretrain_data` on the first --mib MiB of
the shared corpus, cut into 2 files (2 tasks), 1 pass, at a small shape
(seq_len 128, reuse_len 64, bsz_per_host 8, num_predict 20, perm_size 32).
The inputs are put in place before the clock starts; the figure is the
process's wall time. Every run's outputs are hashed: the report says
whether every tree and store wrote the same bytes (exit status 1 if not).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
# After the path: the object-store servers the tests use.
from object_stores import (make_gcs_bucket, make_s3_bucket,  # noqa: E402
                           start_gcs_server, start_s3_server, stop_server)

SHAPE = ["--seq_len=128", "--reuse_len=64", "--bsz_per_host=8",
         "--num_predict=20", "--perm_size=32", "--bi_data", "--num_task=2",
         "--num_passes=1", "--seed=3"]


def shared_dir():
  return os.environ.get("XLNET_SHARED",
                        os.path.join(os.path.dirname(ROOT), "shared"))


def write_inputs(directory, mib):
  """The first `mib` MiB of the shared corpus (whole lines) as 2 files."""
  corpus = os.path.join(shared_dir(), "data", "corpus",
                        "gutenberg_state_union.txt")
  with open(corpus, "rb") as f:
    lines = f.read(int(mib * (1 << 20))).splitlines(keepends=True)[:-1]
  half = len(lines) // 2
  for i, part in enumerate((lines[:half], lines[half:])):
    with open(os.path.join(directory, f"part-{i}.txt"), "wb") as f:
      f.writelines(part)


def put_inputs(local_dir, url, env):
  """Uploads the input files to `url` (a subprocess: gcsfs reads its
  settings when imported)."""
  code = ("import sys\nfrom data_utils import paths\n"
          "for name in ('part-0.txt', 'part-1.txt'):\n"
          "  paths.upload(paths.join(sys.argv[1], name),"
          " paths.join(sys.argv[2], name))\n")
  subprocess.run([sys.executable, "-c", code, local_dir, url], cwd=ROOT,
                 env={**os.environ, **env}, check=True)


def outputs_sha256(save_dir, env, records_only=False):
  """{relative name: sha256} of the records, record-infos and
  corpus_info.json under `save_dir` (local or a URL); `records_only`: of
  the TFRecord files alone."""
  code = ("import json, sys\nfrom data_utils import paths\n"
          "from data_utils.fingerprint import file_sha256\n"
          "root = sys.argv[1]\n"
          "names = [n for n in paths.walk_files(root) if (n == "
          "'corpus_info.json' or n.startswith('tfrecords/') and not "
          "n.startswith('tfrecords/.')) and n.endswith(sys.argv[2])]\n"
          "print(json.dumps({n: file_sha256(paths.join(root, n)) "
          "for n in names}, sort_keys=True))\n")
  suffix = ".tfrecords" if records_only else ""
  out = subprocess.run([sys.executable, "-c", code, save_dir, suffix],
                       cwd=ROOT,
                       env={**os.environ, **env}, check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def run_job(tree, inputs, save_dir, env, threads):
  """Wall seconds of one `create_pretrain_data` process of `tree`."""
  sp_path = os.path.join(shared_dir(), "data", "spiece", "spiece.model")
  cmd = [sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
         f"--input_glob={inputs}/part-*.txt", f"--sp_path={sp_path}",
         f"--save_dir={save_dir}", *SHAPE]
  child_env = {**os.environ, **env, "PYTHONPATH": tree,
               "OMP_NUM_THREADS": str(threads), "TF_CPP_MIN_LOG_LEVEL": "2"}
  start = time.perf_counter()
  proc = subprocess.run(cmd, cwd=tree, env=child_env, capture_output=True,
                        text=True)
  seconds = time.perf_counter() - start
  if proc.returncode != 0:
    raise RuntimeError(f"{tree}: {' '.join(cmd)} failed:\n"
                       f"{proc.stderr[-3000:]}")
  return seconds


def spread(seconds):
  return {"rounds": [round(s, 3) for s in seconds],
          "median": round(statistics.median(seconds), 3),
          "min": round(min(seconds), 3), "max": round(max(seconds), 3),
          "spread": round((max(seconds) - min(seconds)) /
                          statistics.median(seconds), 4)}


def take_turns(variants, rounds, one_run):
  """{variant: [seconds per round]}, the order rotated each round; also
  {variant: [output sha256 maps]}."""
  times = {v: [] for v in variants}
  hashes = {v: [] for v in variants}
  for r in range(rounds):
    order = variants[r % len(variants):] + variants[:r % len(variants)]
    for v in order:
      seconds, digest = one_run(v, r)
      times[v].append(seconds)
      hashes[v].append(digest)
      print(f"round {r + 1}/{rounds} {v}: {seconds:.2f} s", file=sys.stderr,
            flush=True)
  return times, hashes


def report(times, base):
  out = {v: spread(s) for v, s in times.items()}
  for v in times:
    if v != base:
      out[v]["over_" + base] = round(
          statistics.median(times[v]) / statistics.median(times[base]), 4)
      out[v]["round_ratios"] = [round(a / b, 4) for a, b in
                                zip(times[v], times[base])]
  return out


def same_bytes(hashes):
  first = next(iter(hashes.values()))[0]
  return bool(first) and all(h == first for runs in hashes.values()
                             for h in runs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--old", help="the tree before the path layer (a git "
                      "worktree); without it, only bucket_overhead runs")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--mib", type=float, default=2.0)
  parser.add_argument("--threads", type=int, default=2)
  args = parser.parse_args()

  work = tempfile.mkdtemp(prefix="bench-buckets-")
  inputs = os.path.join(work, "inputs")
  os.makedirs(inputs)
  write_inputs(inputs, args.mib)
  result = {"mib": args.mib, "rounds": args.rounds, "shape": SHAPE,
            "machine": os.uname().machine, "cpus": os.cpu_count()}

  if args.old:
    trees = {"old": os.path.abspath(args.old), "new": ROOT}

    def local_run(tree, r):
      save_dir = os.path.join(work, f"{tree}-{r}")
      seconds = run_job(trees[tree], inputs, save_dir, {}, args.threads)
      # The records alone: the record-infos of the tree before named the
      # inputs by absolute path (now relative to their common folder).
      return seconds, outputs_sha256(save_dir, {}, records_only=True)
    times, hashes = take_turns(["old", "new"], args.rounds, local_run)
    result["local_old_vs_new"] = {**report(times, "old"),
                                  "same_bytes": same_bytes(hashes)}

  procs = []
  try:
    s3_proc, s3 = start_s3_server(work)
    procs.append(s3_proc)
    gcs_proc, gcs = start_gcs_server(work)
    procs.append(gcs_proc)
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    make_s3_bucket(s3, bucket)
    make_gcs_bucket(gcs, bucket)
    stores = {"local": ("", {}), "gs": (f"gs://{bucket}", gcs.env),
              "s3": (f"s3://{bucket}", s3.env)}
    for name, (root, env) in stores.items():
      if root:
        put_inputs(inputs, f"{root}/inputs", env)

    def store_run(name, r):
      root, env = stores[name]
      where = f"{root}/inputs" if root else inputs
      save_dir = f"{root}/out-{r}" if root else os.path.join(work, f"local-{r}")
      seconds = run_job(ROOT, where, save_dir, env, args.threads)
      return seconds, outputs_sha256(save_dir, env)
    times, hashes = take_turns(list(stores), args.rounds, store_run)
    result["bucket_overhead"] = {**report(times, "local"),
                                 "same_bytes": same_bytes(hashes)}
  finally:
    for proc in procs:
      stop_server(proc)

  print(json.dumps(result, indent=2))
  ok = all(part.get("same_bytes", True) for part in result.values()
           if isinstance(part, dict))
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  main()
