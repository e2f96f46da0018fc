"""Times the pretraining data builder on the shared corpus; prints JSON.

    .venv/bin/python benchmarks/bench_pretrain_data.py [--lines 20000]

Reports tokenization (lines/s, tokens/s) and record building (examples/s)
separately, for the XLNet-Base pretraining shape by default (seq_len 512,
reuse_len 256, num_predict 85, bi_data, bsz_per_host 32).
"""

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# After the path: the script runs from a checkout, not an installed package.
from data_utils.pretraining import examples  # noqa: E402
from data_utils.pretraining.create_pretrain_data import build_pass  # noqa: E402,E501
from data_utils.tokenization import SentencePieceTokenizer  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--shared", default=os.environ.get(
      "XLNET_SHARED", os.path.join(os.path.dirname(ROOT), "shared")))
  parser.add_argument("--lines", type=int, default=20000)
  parser.add_argument("--seq_len", type=int, default=512)
  parser.add_argument("--reuse_len", type=int, default=256)
  parser.add_argument("--num_predict", type=int, default=85)
  parser.add_argument("--bsz_per_host", type=int, default=32)
  args = parser.parse_args()

  corpus = os.path.join(args.shared, "data", "corpus",
                        "gutenberg_state_union.txt")
  sp = os.path.join(args.shared, "data", "spiece", "spiece.model")
  tok = SentencePieceTokenizer(sp)
  with open(corpus, encoding="utf-8") as f:
    lines = [line for _, line in zip(range(args.lines), f)]

  t0 = time.perf_counter()
  data, sent_ids = examples.lines_to_ids(lines, tok.encode_ids, True)
  t_tok = time.perf_counter() - t0

  cfg = examples.PretrainDataConfig(
      seq_len=args.seq_len, reuse_len=args.reuse_len,
      bsz_per_host=args.bsz_per_host, num_predict=args.num_predict,
      perm_size=args.reuse_len, bi_data=True)
  is_start = examples.start_piece_table(
      [tok.id_to_piece(i) for i in range(tok.vocab_size)])
  with tempfile.TemporaryDirectory() as out:
    t0 = time.perf_counter()
    info = build_pass(data, sent_ids, cfg, is_start, out, "train", 0, 0, 0, {})
    t_build = time.perf_counter() - t0
  print(json.dumps({
      "benchmark": "pretrain_data_builder",
      "config": cfg.to_dict(),
      "lines": len(lines),
      "tokens": int(len(data)),
      "tokenize_seconds": round(t_tok, 3),
      "tokenize_lines_per_sec": round(len(lines) / t_tok, 1),
      "tokenize_tokens_per_sec": round(len(data) / t_tok, 1),
      "examples": info["num_example"],
      "build_seconds": round(t_build, 3),
      "build_examples_per_sec": round(info["num_example"] / t_build, 1),
  }, indent=2))


if __name__ == "__main__":
  main()
