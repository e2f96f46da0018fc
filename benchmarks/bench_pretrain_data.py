"""Times the pretraining record builder, reference and fast path; prints JSON.

    .venv/bin/python benchmarks/bench_pretrain_data.py [--lines 20000] \
        [--rounds 3] [--max_steps 0]

Tokenizes the first `--lines` lines of the shared corpus once, then builds
the same pass (generator `default_rng([0, 0, 0])`, as `build_pass` seeds
task 0 pass 0) with each variant, taking turns: round r runs both, the
first variant alternating, so drift on a shared machine hits both alike.

  reference  `reference_examples.host_steps`, each example dict serialized by
             `records.example_bytes` (int64/float protobuf features)
  fast       `fast_examples.host_step_records` (serialized records)

Each variant writes its records to a TFRecord file with
`records.write_records`, as the builder does. Per variant and round:
`examples_per_sec` (building, serializing and writing) and
`build_examples_per_sec` (the time spent producing the records, writing
left out). The sha256 of each variant's concatenated records (every
round) shows the two produce the same bytes; the exit status is 1 when
they do not. Defaults: the XLNet-Base shape (seq_len 512, reuse_len 256,
num_predict 85, perm_size 256, bi_data, bsz_per_host 32).
"""

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
import numpy as np  # noqa: E402

from data_utils.pretraining import (examples, fast_examples,  # noqa: E402
                                    reference_examples)
from data_utils.records import (example_bytes, float_feature,  # noqa: E402
                                int_feature, write_records)
from data_utils.tokenization import SentencePieceTokenizer  # noqa: E402


def reference_steps(data, sent_ids, cfg, is_start, rng):
  """Per host step, the reference records: example dicts serialized with
  protobuf (what the builder wrote before the fast path)."""
  for step in reference_examples.host_steps(data, sent_ids, cfg, is_start,
                                            rng):
    yield [example_bytes({
        k: float_feature(v.tolist()) if v.dtype.kind == "f"
        else int_feature(v.tolist()) for k, v in ex.items()})
        for ex in step]


VARIANTS = {"reference": reference_steps,
            "fast": fast_examples.host_step_records}


def run_variant(name, data, sent_ids, cfg, is_start, max_steps, out_dir):
  """One build of the pass: `(examples/s, build-only examples/s, sha256
  of the concatenated records, steps)`."""
  rng = np.random.default_rng([0, 0, 0])
  steps = VARIANTS[name](data, sent_ids, cfg, is_start, rng)
  sha = hashlib.sha256()
  kept = []
  n_steps = 0
  t_build = 0.0

  def records():
    nonlocal n_steps, t_build
    while not max_steps or n_steps < max_steps:
      t0 = time.perf_counter()
      step = next(steps, None)
      t_build += time.perf_counter() - t0
      if step is None:
        return
      kept.append(step)       # hashed after the clock stops
      n_steps += 1
      yield from step

  path = os.path.join(out_dir, f"{name}.tfrecords")
  t0 = time.perf_counter()
  n = write_records(path, records())
  t_all = time.perf_counter() - t0
  for step in kept:
    for record in step:
      sha.update(record)
  os.remove(path)
  return n / t_all, n / t_build, sha.hexdigest(), n_steps


def summary(values):
  median = statistics.median(values)
  return {"median": round(median, 1), "min": round(min(values), 1),
          "max": round(max(values), 1),
          "spread_pct": round(100 * (max(values) - min(values)) / median, 1)}


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--lines", type=int, default=20000)
  parser.add_argument("--seq_len", type=int, default=512)
  parser.add_argument("--reuse_len", type=int, default=256)
  parser.add_argument("--num_predict", type=int, default=85)
  parser.add_argument("--bsz_per_host", type=int, default=32)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--max_steps", type=int, default=0,
                      help="host steps per build (0 = the whole stream)")
  args = parser.parse_args()

  corpus = os.path.join(args.shared, "data", "corpus",
                        "gutenberg_state_union.txt")
  sp = os.path.join(args.shared, "data", "spiece", "spiece.model")
  tok = SentencePieceTokenizer(sp)
  with open(corpus, encoding="utf-8") as f:
    lines = [line for _, line in zip(range(args.lines), f)]

  t0 = time.perf_counter()
  data, sent_ids = reference_examples.lines_to_ids(lines, tok.encode_ids, True)
  t_tok = time.perf_counter() - t0
  # The builder's stream dtype (ids_cache: int32 ids, bool sentence ids).
  data = data.astype(np.int32)

  cfg = examples.PretrainDataConfig(
      seq_len=args.seq_len, reuse_len=args.reuse_len,
      bsz_per_host=args.bsz_per_host, num_predict=args.num_predict,
      perm_size=args.reuse_len, bi_data=True)
  cfg.validate()
  is_start = examples.start_piece_table(
      [tok.id_to_piece(i) for i in range(tok.vocab_size)])

  names = list(VARIANTS)
  rates = {name: [] for name in names}
  build_rates = {name: [] for name in names}
  shas = {name: set() for name in names}
  steps = {}
  order = []
  with tempfile.TemporaryDirectory() as out:
    for r in range(args.rounds):
      turn = names if r % 2 == 0 else names[::-1]
      order.append(turn)
      for name in turn:
        rate, build_rate, sha, steps[name] = run_variant(
            name, data, sent_ids, cfg, is_start, args.max_steps, out)
        rates[name].append(round(rate, 1))
        build_rates[name].append(round(build_rate, 1))
        shas[name].add(sha)

  equal = len(shas["reference"]) == 1 and shas["reference"] == shas["fast"]
  variants = {}
  for name in names:
    variants[name] = dict(
        examples_per_sec=rates[name], **summary(rates[name]),
        build_examples_per_sec=build_rates[name],
        build_median=summary(build_rates[name])["median"],
        sha256=sorted(shas[name]))
  print(json.dumps({
      "benchmark": "pretrain_data_builder",
      "config": cfg.to_dict(),
      "lines": len(lines),
      "tokens": int(len(data)),
      "tokenize_seconds": round(t_tok, 3),
      "tokenize_lines_per_sec": round(len(lines) / t_tok, 1),
      "tokenize_tokens_per_sec": round(len(data) / t_tok, 1),
      "host_steps": steps["fast"],
      "examples": steps["fast"] * cfg.bsz_per_host,
      "rounds": args.rounds,
      "order": order,
      "variants": variants,
      "speedup_median": round(variants["fast"]["median"]
                              / variants["reference"]["median"], 2),
      "build_speedup_median": round(variants["fast"]["build_median"]
                                    / variants["reference"]["build_median"],
                                    2),
      "records_equal": equal,
      "load_average": [round(x, 2) for x in os.getloadavg()],
  }, indent=2))
  if not equal or steps["fast"] != steps["reference"]:
    sys.exit(1)


if __name__ == "__main__":
  main()
