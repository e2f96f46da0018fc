"""Times SQuAD preprocessing of the full dev set; prints JSON.

    .venv/bin/python benchmarks/bench_squad_prepro.py [--num_proc 2]

Reports questions/s of building every feature (reading, tokenization, one
alignment per paragraph, windows) in one process and with a pool of
`--num_proc` processes (pool start-up included), for the run_squad.py
defaults (max_seq_length 512, doc_stride 128, max_query_length 64). The
original's time for the same set: benchmarks/README.md.
"""

import argparse
import json
import os
import sys
import time

from absl import logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
from data_utils.squad import alignment  # noqa: E402
from data_utils.squad.features import FeatureSettings, convert_examples  # noqa: E402,E501
from data_utils.squad.reader import read_squad  # noqa: E402
from data_utils.tokenization import SentencePieceTokenizer  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--num_proc", type=int, default=2)
  parser.add_argument("--max_seq_length", type=int, default=512)
  parser.add_argument("--original_piece_snapping", action="store_true")
  args = parser.parse_args()

  logging.set_verbosity(logging.WARNING)
  path = os.path.join(args.shared, "data", "squad", "dev-v1.1.json")
  tok = SentencePieceTokenizer(os.path.join(args.shared, "data", "spiece",
                                            "spiece.model"))
  settings = FeatureSettings(
      max_seq_length=args.max_seq_length,
      original_piece_snapping=args.original_piece_snapping)
  out = {"file": path, "max_seq_length": args.max_seq_length,
         "pieces": "original" if args.original_piece_snapping else
         "split (classes + digits)"}
  for name, n in (("single_process", 1), (f"pool_{args.num_proc}",
                                           args.num_proc)):
    if n < 2 and name != "single_process":
      continue
    alignment._char_alignment.cache_clear()
    t0 = time.perf_counter()
    data = read_squad(path)
    features, stats = convert_examples(data.examples, tok, settings,
                                       is_training=False, num_proc=n)
    seconds = time.perf_counter() - t0
    out[name] = {"seconds": round(seconds, 2),
                 "questions_per_sec": round(len(data.examples) / seconds, 1),
                 "questions": len(data.examples),
                 "features": len(features)}
  out["cpus"] = os.cpu_count()
  print(json.dumps(out, indent=2))


if __name__ == "__main__":
  main()
