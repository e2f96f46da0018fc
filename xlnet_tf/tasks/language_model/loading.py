"""A language model for inference from any checkpoint layout: its config
and attention options (`language_model_config`) and the model with its
weights (`load_language_model`). Pretraining's `run_options.json` and
`xlnet_config.json` are found beside a checkpoint (`file_beside`)."""

from __future__ import annotations

from typing import Optional, Tuple

from data_utils import paths
from data_utils.text_files import read_json
from xlnet_tf.checkpoint_files import CheckpointError, resolve_checkpoint
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.io.hf_config import HF_CONFIG, config_from_hf
from xlnet_tf.io.hf_files import is_hf_directory, read_hf_config
from xlnet_tf.io.load import load_checkpoint
from xlnet_tf.model_folder import read_config
from xlnet_tf.tasks.language_model.model import XLNetPretrainer


# Run options a language-model use keeps from the run that trained the
# weights; dropout, memory and bi_data are the inference's own.
_KEPT_OPTIONS = ("attn_type", "clamp_len", "same_length")


def file_beside(prefix: str, name: str) -> Optional[str]:
  """`name` in the checkpoint's directory or the one above it (run_pretrain
  writes `model_dir/run_options.json` and `model_dir/original/...`)."""
  folder = paths.dirname(paths.absolute(prefix))
  for where in (folder, paths.dirname(folder)):
    path = paths.join(where, name)
    if paths.isfile(path):
      return path
  return None


def language_model_config(path: str, model_config_path: Optional[str] = None
                          ) -> Tuple[XLNetConfig, Optional[str], dict]:
  """`(config, the file it was read from, kept run options)` of the
  checkpoint at `path`, as `load_language_model` reads them (no weight is
  read): the config is `model_config_path`, else `xlnet_config.json` beside
  the checkpoint (or in the directory above it), else an HF directory's
  config.json (file None); the run options are the attention options
  (attn_type, clamp_len, same_length) of `run_options.json` beside the
  checkpoint or of HF's config."""
  if is_hf_directory(path):
    spec = config_from_hf(read_hf_config(path), paths.join(path, HF_CONFIG))
    kept = {k: getattr(spec.options, k) for k in _KEPT_OPTIONS}
    if model_config_path:
      return read_config(model_config_path), model_config_path, kept
    return spec.config, None, kept
  prefix = resolve_checkpoint(path)
  config_path = model_config_path or file_beside(prefix, "xlnet_config.json")
  if config_path is None:
    raise CheckpointError(f"{path}: no xlnet_config.json beside the "
                          "checkpoint; pass the model config")
  kept = {}
  options_path = file_beside(prefix, "run_options.json")
  if options_path:
    saved = read_json(options_path, CheckpointError)
    if isinstance(saved, dict):
      kept = {k: saved[k] for k in _KEPT_OPTIONS if k in saved}
    try:
      RunOptions(**kept)
    except ConfigError as e:
      raise CheckpointError(f"{options_path}: {e}") from None
  return read_config(config_path), config_path, kept


def load_language_model(path: str, model_config_path: Optional[str] = None,
                        clamp_len: Optional[int] = None,
                        need_lm_head: bool = True
                        ) -> Tuple[XLNetPretrainer, object]:
  """An `XLNetPretrainer` (encoder + tied LM head) for inference, from any
  checkpoint: an HF directory, the original layout (a released model, or
  `run_pretrain.py`'s `model_dir/original/`) or a native `model_dir`.

  The config and attention options are `language_model_config`'s;
  `clamp_len` overrides. Dropout is off, bi_data off, and no memory is kept
  unless a call asks for it. Returns `(model, load report)`; with
  `need_lm_head`, a checkpoint without the LM bias is an error (a fine-tuned
  encoder has no LM).
  """
  config, _, kept = language_model_config(path, model_config_path)
  overrides = {} if clamp_len is None else {"clamp_len": clamp_len}
  options = RunOptions(**{**kept, **overrides, "dropout": 0.0,
                          "dropatt": 0.0})
  lm = XLNetPretrainer(XLNetModel(config, options))
  report = load_checkpoint(lm, path)
  missing = list(getattr(report, "missing", None) or [])
  if need_lm_head and any("lm_loss" in n or "mask_emb" in n for n in missing):
    raise CheckpointError(f"{path}: has no LM head (lm_loss/bias, mask_emb): "
                          "a fine-tuned checkpoint cannot score or generate")
  encoder_missing = [n for n in missing if "lm_loss" not in n
                     and "mask_emb" not in n]
  if encoder_missing:
    raise CheckpointError(f"{path}: not an XLNet checkpoint of this config; "
                          f"missing {', '.join(encoder_missing[:3])}")
  return lm, report
