"""Tiny language models on disk for the LM scripts' preflight tests: the
released SentencePiece vocabulary (32000 pieces), one layer of width 16
(fresh weights: these tests never get as far as running them), written in
each layout `--init_checkpoint` takes, and a config of another width."""

import dataclasses
import os

import xlnet_tf as xt
from xlnet_tf.io import save_native_checkpoint, save_original_checkpoint
from xlnet_tf.pretrained import build_model, save_hf_weights

CONFIG = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000, ff_activation="gelu",
                        untie_r=True)
# What a user passes by mistake: another model's width.
WIDE = dataclasses.replace(CONFIG, d_model=32, d_head=16)


@dataclasses.dataclass(frozen=True)
class Checkpoints:
  """`original`, `native`: checkpoint prefixes with their
  xlnet_config.json beside; `hf`: an HF directory; `wide_config`: WIDE's
  xlnet_config.json."""
  original: str
  native: str
  hf: str
  wide_config: str


def write_checkpoints(directory) -> Checkpoints:
  directory = str(directory)
  lm = build_model("lm", CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0))
  original = save_original_checkpoint(
      lm, os.path.join(directory, "original", "model.ckpt"))
  native = save_native_checkpoint(
      lm, os.path.join(directory, "native", "ckpt-1"))
  for prefix in (original, native):
    CONFIG.to_json(os.path.join(os.path.dirname(prefix),
                                "xlnet_config.json"))
  hf = os.path.join(directory, "hf")
  save_hf_weights(lm, hf)
  wide = os.path.join(directory, "wide_config.json")
  WIDE.to_json(wide)
  return Checkpoints(original, native, hf, wide)
