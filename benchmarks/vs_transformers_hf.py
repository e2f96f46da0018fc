"""The `hf` way of bench_vs_transformers.py: transformers'
`XLNetForSequenceClassification` (PyTorch) over a TSV's `text` column, as
a user would batch it; its own process (no TensorFlow in it).

    vs_transformers_hf.py --hf_dir W/hf --spiece spiece.model \\
        --input rows.tsv --out probs.json [--tokenizer transformers]

Tokenizes every row (`--tokenizer=transformers`: `XLNetTokenizer` built
from the SentencePiece model's pieces and scores; `project`: this
project's tokenizer), truncated as `convert_example` does (first
window - 2 pieces, then <sep> <cls>), sorts by length, cuts batches of
`--batch_size`, pads each LEFT to its longest row (attention_mask 0 on
padding, token type 3), runs the model in eval under
`torch.inference_mode()` without memory (`use_mems=False`), takes the
argmax. Prints one JSON line of seconds (import, load, tokenize, forward,
wall from the process start); writes each row's probabilities and a
CRC32 of its ids to `--out`.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # before the imports: the process's own wall

# pylint: disable=wrong-import-position
import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_CLS,  # noqa: E402
                                     SEP_ID, SentencePieceTokenizer)

PAD_TYPE = 3  # transformers' XLNet pads token types with 3 (masked anyway)


def read_texts(path: str):
  with open(path, encoding="utf-8") as f:
    next(f)  # the header
    return [line.rstrip("\n").split("\t")[0] for line in f]


def hf_tokenizer(sp_path: str):
  """transformers' XLNetTokenizer on the SentencePiece model. Built from the
  pieces and scores because `from_pretrained` on spiece.model needs
  protobuf >= 7 for its converter here (TensorFlow pins 6); the
  normalizer's precompiled charsmap is not carried over."""
  sp = spm.SentencePieceProcessor(model_file=sp_path)
  vocab = [(sp.id_to_piece(i), sp.get_score(i))
           for i in range(sp.get_piece_size())]
  return transformers.XLNetTokenizer(vocab=vocab)


def tokenize(texts, how: str, sp_path: str, window: int):
  """Per row: ids and token types, `convert_example`'s truncation."""
  if how == "transformers":
    enc = hf_tokenizer(sp_path)(texts, truncation=True, max_length=window,
                                return_token_type_ids=True)
    return enc["input_ids"], enc["token_type_ids"]
  tok = SentencePieceTokenizer(sp_path)
  ids = [tok.encode_ids(t)[:window - 2] + [SEP_ID, CLS_ID] for t in texts]
  return ids, [[SEG_ID_A] * (len(x) - 1) + [SEG_ID_CLS] for x in ids]


def batches(ids, types, batch_size: int, pad_id: int):
  """Rows sorted by length, `batch_size` at a time, LEFT padded."""
  order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
  for s in range(0, len(order), batch_size):
    rows = order[s:s + batch_size]
    length = max(len(ids[i]) for i in rows)
    x = np.full((len(rows), length), pad_id, np.int64)
    t = np.full((len(rows), length), PAD_TYPE, np.int64)
    m = np.zeros((len(rows), length), np.int64)
    for b, i in enumerate(rows):
      n = len(ids[i])
      x[b, length - n:], t[b, length - n:], m[b, length - n:] = (
          ids[i], types[i], 1)
    yield rows, torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(m)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--hf_dir", required=True)
  parser.add_argument("--spiece", required=True)
  parser.add_argument("--input", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--tokenizer", default="transformers",
                      choices=("transformers", "project"))
  parser.add_argument("--window", type=int, default=512)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--threads", type=int, default=2)
  args = parser.parse_args()
  torch.set_num_threads(args.threads)
  t_import = time.perf_counter()
  model = transformers.XLNetForSequenceClassification.from_pretrained(
      args.hf_dir)
  model.eval()
  model.config.use_mems_eval = False
  t_load = time.perf_counter()
  texts = read_texts(args.input)
  ids, types = tokenize(texts, args.tokenizer, args.spiece, args.window)
  t_tok = time.perf_counter()
  probs = [None] * len(texts)
  real = fed = n_batches = 0
  with torch.inference_mode():
    for rows, x, t, m in batches(ids, types, args.batch_size,
                                 model.config.pad_token_id):
      logits = model(input_ids=x, token_type_ids=t, attention_mask=m,
                     use_mems=False).logits
      p = torch.softmax(logits, -1).numpy()
      p.argmax(-1)  # the labels a user would take
      for b, i in enumerate(rows):
        probs[i] = p[b].tolist()
      real += int(m.sum())
      fed += m.numel()
      n_batches += 1
  t_fwd = time.perf_counter()
  with open(args.out, "w", encoding="utf-8") as f:
    json.dump({"probabilities": probs,
               "ids_crc32": [zlib.crc32(np.asarray(x, np.int32).tobytes())
                             for x in ids]}, f)
  print(json.dumps({
      "import_seconds": round(t_import - T0, 2),
      "load_seconds": round(t_load - t_import, 2),
      "tokenize_seconds": round(t_tok - t_load, 2),
      "forward_seconds": round(t_fwd - t_tok, 2),
      "in_process_wall_seconds": round(time.perf_counter() - T0, 2),
      "positions_real": real, "positions_fed": fed, "batches": n_batches,
      "threads": torch.get_num_threads(), "tokenizer": args.tokenizer}))


if __name__ == "__main__":
  main()
