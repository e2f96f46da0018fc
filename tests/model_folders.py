"""Tiny model folders on disk, as a user downloads them, and a user's CSV
task: the same random pretrained model (encoder and LM head) in the
released layout (xlnet_config.json,
spiece.model, xlnet_model.ckpt.*) and HuggingFace's (config.json,
model.safetensors, spiece.model), with the released 32,000-piece
SentencePiece model; one layer of width 16."""

import csv
import os
import shutil

import numpy as np

import xlnet_tf as xt
from xlnet_tf import pretrained

CONFIG = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000, ff_activation="gelu",
                        untie_r=True)
LABELS = ("neg", "pos")


def write_folders(released, hf, spiece_model):
  """Writes both folders (paths `released`, `hf`) of one random pretrained
  model, its encoder and LM head, as the releases hold them."""
  lm = xt.XLNetPretrainer(xt.XLNetModel(
      CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0)))
  lm.encoder(np.zeros([1, 4], np.int32))
  rng = np.random.RandomState(0)
  for _, var in sorted(lm.original_weights().items()):
    var.assign(rng.normal(0, 0.3, var.shape.as_list()).astype(np.float32))
  xt.save_original_checkpoint(lm, os.path.join(released, "xlnet_model.ckpt"))
  CONFIG.to_json(os.path.join(released, "xlnet_config.json"))
  pretrained.save_hf_weights(lm, str(hf))
  for folder in (released, hf):
    shutil.copy(spiece_model, os.path.join(folder, "spiece.model"))


def write_csv_task(folder, sizes=(("train", 16), ("dev", 6), ("test", 5))):
  """train/dev/test.csv with a header `text,label` (test.csv without the
  label); labels neg/pos by the first word. Returns {split: rows}."""
  os.makedirs(folder, exist_ok=True)
  words = ["good", "bad", "fine", "awful", "great", "poor"]
  out = {}
  for split, n in sizes:
    rows = []
    for i in range(n):
      w = words[(i + len(split)) % len(words)]
      rows.append([f"{w}, said the review {i}",
                   LABELS[words.index(w) % 2 == 0]])
    with open(os.path.join(folder, f"{split}.csv"), "w", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["text", "label"] if split != "test" else ["text"])
      writer.writerows(rows if split != "test" else [r[:1] for r in rows])
    out[split] = rows
  return out
