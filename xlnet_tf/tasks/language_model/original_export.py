"""The end of `run_pretrain.py`: the trained weights in the original's
layout, with their config and SentencePiece model, in
`model_dir/original/`, a model folder as a released one is (the fine-tuning
scripts and the original code load it). Its own folder: the original
layout's `checkpoint` state file must not shadow the training
checkpoints'. Its files are in that folder's output ledger
(`data_utils.outputs`), so a file of the user's there is never replaced."""

from __future__ import annotations

from data_utils import paths
from data_utils.atomic import atomic_path
from data_utils.fingerprint import file_sha256
from data_utils.outputs import check_outputs, record_outputs
from xlnet_tf.config import XLNetConfig
from xlnet_tf.io.original import save_original_checkpoint

ORIGINAL_DIR = "original"
_ORIGINAL_CKPT = "xlnet_model.ckpt"
_ORIGINAL_FILES = (f"{_ORIGINAL_CKPT}.index",
                   f"{_ORIGINAL_CKPT}.data-00000-of-00001", "checkpoint",
                   "xlnet_config.json", "spiece.model")


def check_original_export(model_dir: str, overwrite: bool) -> None:
  """Before training: a one-line UsageError unless each file that
  `export_original` writes is absent, or in `model_dir/original/`'s output
  ledger with its current bytes, or `overwrite`. Writes nothing."""
  check_outputs([paths.join(model_dir, ORIGINAL_DIR, name)
                 for name in _ORIGINAL_FILES], "model_dir", overwrite,
                value=model_dir)


def export_original(model, config: XLNetConfig, model_dir: str,
                    spiece_model_file: str = "") -> str:
  """Writes `model`'s weights in the original's layout with its config (and
  the SentencePiece model) into `model_dir/original/`, and records them in
  its ledger. Returns the checkpoint prefix."""
  directory = paths.join(model_dir, ORIGINAL_DIR)
  prefix = save_original_checkpoint(model,
                                    paths.join(directory, _ORIGINAL_CKPT))
  config.to_json(paths.join(directory, "xlnet_config.json"))
  if spiece_model_file:
    with atomic_path(paths.join(directory, "spiece.model")) as tmp:
      paths.download(spiece_model_file, tmp)
  written = [n for n in _ORIGINAL_FILES
             if paths.exists(paths.join(directory, n))]
  record_outputs(directory, {n: file_sha256(paths.join(directory, n))
                             for n in written})
  return prefix
