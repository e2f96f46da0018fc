"""Any checkpoint, layout detected: native TF2, the original's names, or a
HuggingFace directory. Sits above the three readers (none imports another)."""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.checkpoint_files import (is_native_checkpoint, open_checkpoint,
                                       resolve_checkpoint)
from xlnet_tf.io.dims import check_config_fits
from xlnet_tf.io.hf import load_hf_weights
from xlnet_tf.io.hf_files import check_hf_directory, is_hf_directory
from xlnet_tf.io.native import load_native_checkpoint
from xlnet_tf.io.original import load_original_checkpoint


def check_checkpoint(path: str, flag: str | None = None) -> None:
  """The cheap check of a checkpoint about to be loaded (a TF prefix or
  directory, either layout, or a HuggingFace directory): it exists, its
  index (or header) parses and its data files are there. Tensor data is
  verified when it is read (TF checks each tensor's CRC32C). Errors are one
  line starting with `--flag=path` (default: the path)."""
  label = f"--{flag}={path}" if flag else None
  if is_hf_directory(path):
    check_hf_directory(path, label)
  else:
    open_checkpoint(path, label)


def check_init_checkpoint(train_opts, will_train: bool = True,
                          config=None) -> None:
  """`check_checkpoint` of `train_opts.init_checkpoint` when training will
  load it: not without training, nor when `model_dir` already holds a
  checkpoint (the trainer resumes from that one instead). With `config`
  (an `XLNetConfig`) its shape must be the checkpoint's too
  (`check_config_fits`)."""
  path = train_opts.init_checkpoint
  if not (will_train and path):
    return
  if tf.train.latest_checkpoint(train_opts.model_dir):
    return
  check_checkpoint(path, "init_checkpoint")
  if config is not None:
    check_config_fits(config, path, f"--model_config_path={config.path}"
                      if config.path else "the model config")


def load_checkpoint(obj, path: str, strict: bool = False):
  """Loads either TF layout (native TF2 or the original's names, detected)
  or a HuggingFace directory (config.json + model.safetensors) into `obj`.
  Returns the `LoadReport` (`HFLoadReport` for HF; None for native, whose
  restore matches the whole object graph or raises)."""
  if is_hf_directory(path):
    return load_hf_weights(obj, path, strict=strict)
  prefix = resolve_checkpoint(path)
  if is_native_checkpoint(prefix):
    load_native_checkpoint(obj, prefix)
    return None
  return load_original_checkpoint(obj, prefix, strict=strict)
