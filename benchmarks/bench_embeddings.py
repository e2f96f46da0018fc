"""Embedding throughput (texts/s): ours (`xlnet_tf.tasks.language_model.embeddings.
Embedder`) vs transformers' `XLNetModel`, same texts, same weights.

XLNet-Base shape with random weights (ours, exported with `save_hf_weights`
and loaded by transformers), float32, 2 threads each (`tf.config.threading`,
`torch.set_num_threads`). Both get the same token ids, the same batches
(sorted by length within chunks, LEFT padded to the longest text of the
batch rounded up to 8, `pieces <sep> <cls>`) and return the same things:
per-piece vectors of the last layer and the padding-excluding mean, as
numpy arrays. Tokenization is timed apart (it is the same Python code for
both). The variants take turns, round after round (the order alternates);
per variant the median, min and max texts/s over the rounds and the spread
((max - min) / median). The JSON also holds the largest difference between
the two models' outputs (piece vectors and means, every text).

    python benchmarks/bench_embeddings.py --num_texts=256 --rounds=3
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
# As bench_generation: spinning torch threads collapse when the cores are shared.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bench_common import SIZES  # noqa: E402
from data_utils.lm.embedding_files import (  # noqa: E402
    layout_length, text_pieces, window_features)
from data_utils.text_inputs import read_texts  # noqa: E402
from data_utils.tokenization import SentencePieceTokenizer  # noqa: E402
from xlnet_tf.config import RunOptions, XLNetConfig  # noqa: E402
from xlnet_tf.pretrained import build_model, save_hf_weights  # noqa: E402
from xlnet_tf.tasks.language_model.embeddings import Embedder, embed_pieces  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "..", "shared")


def _batches(pieces, batch_size, chunk_batches=32):
  """The batches `embed_pieces` forms: indices sorted by length per chunk."""
  chunk = batch_size * chunk_batches
  for begin in range(0, len(pieces), chunk):
    order = sorted(range(begin, min(begin + chunk, len(pieces))),
                   key=lambda i: len(pieces[i].ids))
    for b in range(0, len(order), batch_size):
      yield order[b:b + batch_size]


def run_ours(embedder, pieces, batch_size):
  out = {}
  for i, vectors, pooled in embed_pieces(embedder, pieces, batch_size):
    out[i] = (vectors[:, 0], pooled["masked_mean"][0])
  return out


def run_hf(model, pieces, batch_size, max_seq_length):
  out = {}
  with torch.inference_mode():
    for batch in _batches(pieces, batch_size):
      counts = [len(pieces[i].ids) for i in batch]
      length = layout_length(counts, max_seq_length)
      f = window_features([pieces[i].ids for i in batch], length)
      keep = torch.from_numpy(1.0 - f["input_mask"])
      hidden = model(input_ids=torch.from_numpy(f["input_ids"]).long(),
                     token_type_ids=torch.from_numpy(f["segment_ids"]).long(),
                     attention_mask=keep, use_mems=False).last_hidden_state
      mean = (hidden * keep[:, :, None]).sum(1) / keep.sum(1, keepdim=True)
      hidden, mean = hidden.numpy(), mean.numpy()
      for b, (i, n) in enumerate(zip(batch, counts)):
        out[i] = (hidden[b, length - n - 2:length - 2], mean[b])
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--input_file",
                      default=os.path.join(SHARED, "data/glue/SST-2/dev.tsv"))
  parser.add_argument("--spiece_model_file",
                      default=os.path.join(SHARED, "data/spiece/spiece.model"))
  parser.add_argument("--num_texts", type=int, default=256)
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  args = parser.parse_args()

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  torch.set_num_threads(args.threads)

  texts = read_texts(args.input_file)[:args.num_texts]
  tokenizer = SentencePieceTokenizer(args.spiece_model_file)
  t0 = time.perf_counter()
  pieces = [text_pieces(tokenizer, t) for t in texts]
  tokenize_rate = len(texts) / (time.perf_counter() - t0)
  window = args.max_seq_length - 2
  pieces = [p._replace(ids=p.ids[:window], pieces=p.pieces[:window])
            for p in pieces]  # one window each, as transformers reads them

  tf.random.set_seed(0)
  lm = build_model("lm", XLNetConfig(**SIZES[args.size]),
                   RunOptions(dropout=0.0, dropatt=0.0))
  lm.encoder(tf.constant([[5, 6]]))
  with tempfile.TemporaryDirectory() as tmp:
    save_hf_weights(lm, tmp, architecture="XLNetModel")
    hf = transformers.XLNetModel.from_pretrained(tmp).eval()
  embedder = Embedder(lm.encoder, layers=[-1], poolings=("masked_mean",),
                      max_seq_length=args.max_seq_length)
  variants = {
      "ours": lambda: run_ours(embedder, pieces, args.batch_size),
      "transformers": lambda: run_hf(hf, pieces, args.batch_size,
                                     args.max_seq_length),
  }
  # Warm-up (traces our graphs for every batch length) and agreement.
  results = {name: fn() for name, fn in variants.items()}
  diff = max(float(np.max(np.abs(np.concatenate(
      [a[None] if a.ndim == 1 else a for a in results["ours"][i]])
      - np.concatenate([b[None] if b.ndim == 1 else b
                        for b in results["transformers"][i]]))))
             for i in range(len(pieces)))
  rates = {name: [] for name in variants}
  for r in range(args.rounds):
    names = list(variants) if r % 2 == 0 else list(variants)[::-1]
    for name in names:
      t0 = time.perf_counter()
      variants[name]()
      rates[name].append(len(pieces) / (time.perf_counter() - t0))
  report = {"size": args.size, "texts": len(pieces),
            "pieces": sum(len(p.ids) for p in pieces),
            "batch_size": args.batch_size,
            "max_seq_length": args.max_seq_length, "threads": args.threads,
            "rounds": args.rounds, "tokenize_texts_per_sec": tokenize_rate,
            "max_abs_diff": diff}
  for name, values in rates.items():
    med = statistics.median(values)
    report[name] = {"texts_per_sec_median": med, "min": min(values),
                    "max": max(values),
                    "spread": (max(values) - min(values)) / med,
                    "rounds": values}
  report["ratio_ours_over_transformers"] = (
      report["ours"]["texts_per_sec_median"]
      / report["transformers"]["texts_per_sec_median"])
  print(json.dumps(report))


if __name__ == "__main__":
  main()
