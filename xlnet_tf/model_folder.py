"""A model folder given once: `--init_checkpoint=DIR` also names the model's
config and its SentencePiece model when DIR holds them, and a config may be
named (`base`, `large`) instead of written out.

The folders this reads:

  released     DIR/xlnet_config.json, DIR/spiece.model, DIR/xlnet_model.ckpt.*
               (the zips of github.com/zihangdai/xlnet)
  HuggingFace  DIR/config.json, DIR/model.safetensors[, DIR/spiece.model]
               (e.g. `xlnet/xlnet-base-cased` downloaded from the Hub)
  xlnet-tf     a run_pretrain `model_dir` or its `original/` (each holds
               xlnet_config.json)

A config is the original's `xlnet_config.json`, HuggingFace's `config.json`
(mapped by `xlnet_tf.io.hf_config`) or a name of `NAMED_CONFIGS`. A flag
given as well as the folder must agree with it: one line names what differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Optional

from absl import flags

from data_utils import paths
from data_utils.errors import UsageError
from xlnet_tf.config import ConfigError, XLNetConfig
from xlnet_tf.io.hf_config import HF_CONFIG, config_from_hf
from xlnet_tf.io.hf_files import is_hf_directory

ORIGINAL_CONFIG = "xlnet_config.json"
SPIECE_MODEL = "spiece.model"

# The released models' xlnet_config.json (XLNet-Base and -Large, cased).
NAMED_CONFIGS = {
    "base": XLNetConfig(n_layer=12, d_model=768, n_head=12, d_head=64,
                        d_inner=3072, n_token=32000, ff_activation="gelu",
                        untie_r=True, path="base"),
    "large": XLNetConfig(n_layer=24, d_model=1024, n_head=16, d_head=64,
                         d_inner=4096, n_token=32000, ff_activation="gelu",
                         untie_r=True, path="large"),
}


def read_config(value: str) -> XLNetConfig:
  """The config `value` names: a name of `NAMED_CONFIGS`, an original
  `xlnet_config.json` or an HF `config.json` (told apart by their keys:
  `n_token` against `vocab_size`). Its `.path` is `value`.

  Example:
    >>> read_config("large").d_model
    1024
  """
  if value in NAMED_CONFIGS:
    return NAMED_CONFIGS[value]
  if not paths.isfile(value):
    raise ConfigError(f"{value}: no such config file, and not one of the "
                      f"named configs ({', '.join(NAMED_CONFIGS)})")
  try:
    data = json.loads(paths.read_bytes(value).decode("utf-8"))
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
    raise ConfigError(f"{value}: not valid JSON ({e})") from None
  if isinstance(data, dict) and "n_token" not in data and "vocab_size" in data:
    config = config_from_hf(data, value).config
  else:
    config = XLNetConfig.from_dict(data, source=value)
  return dataclasses.replace(config, path=value)


def differences(a: XLNetConfig, b: XLNetConfig) -> str:
  """'key a vs b' for each key where the two configs differ, or ''.

  Example:
    >>> differences(NAMED_CONFIGS["base"], NAMED_CONFIGS["large"])[:36]
    'd_inner 3072 vs 4096, d_model 768 vs'
  """
  return ", ".join(f"{k} {getattr(a, k)} vs {getattr(b, k)}"
                   for k in XLNetConfig.KEYS if getattr(a, k) != getattr(b, k))


def _folder(init_checkpoint: Optional[str]) -> Optional[str]:
  """The folder whose files an --init_checkpoint names: itself, or the
  folder of a checkpoint prefix (e.g. released/xlnet_model.ckpt)."""
  if not init_checkpoint:
    return None
  if paths.isdir(init_checkpoint):
    return init_checkpoint
  folder = paths.dirname(paths.absolute(init_checkpoint))
  return folder if paths.isdir(folder) else None


def folder_config(init_checkpoint: Optional[str]) -> Optional[str]:
  """The config file of the folder `init_checkpoint` names: its
  xlnet_config.json, else (an HF folder) its config.json; None if none."""
  folder = _folder(init_checkpoint)
  if folder is None:
    return None
  candidates = [paths.join(folder, ORIGINAL_CONFIG)]
  if is_hf_directory(init_checkpoint):
    candidates.append(paths.join(folder, HF_CONFIG))
  return next((p for p in candidates if paths.isfile(p)), None)


def folder_spiece(init_checkpoint: Optional[str]) -> Optional[str]:
  """The folder's spiece.model (see `folder_config`), or None."""
  folder = _folder(init_checkpoint)
  path = folder and paths.join(folder, SPIECE_MODEL)
  return path if path and paths.isfile(path) else None


def _digest(path: str) -> str:
  return hashlib.sha256(paths.read_bytes(path)).hexdigest()


@dataclasses.dataclass(frozen=True)
class ModelFiles:
  """What a script's model flags and folder resolve to.

  config: the model's config (None where none was needed and none found);
  model_config_path: the flag's value or the folder's config file;
  spiece_model_file: the flag's file or the folder's spiece.model.
  """
  config: Optional[XLNetConfig]
  model_config_path: Optional[str]
  spiece_model_file: Optional[str]


def resolve(init_checkpoint: Optional[str], model_config_path: Optional[str],
            spiece_model_file: Optional[str], need_config: bool = True,
            need_spiece: bool = True) -> ModelFiles:
  """The config and SentencePiece model of `--init_checkpoint`'s folder and
  the two flags; one-line `UsageError`s, before anything is loaded, for a
  flag that disagrees with the folder or a file that is needed and found
  nowhere."""
  label = f"--init_checkpoint={init_checkpoint}"
  config_file = folder_config(init_checkpoint)
  config = None
  try:
    if model_config_path:
      config = read_config(model_config_path)
      if config_file:
        differ = differences(config, read_config(config_file))
        if differ:
          raise UsageError(f"--model_config_path={model_config_path} "
                           f"disagrees with {config_file}: {differ}")
    elif config_file:
      config = read_config(config_file)
  except ConfigError as e:
    raise UsageError(str(e)) from None
  if config is None and need_config:
    raise UsageError(_missing(init_checkpoint, label, "the model config",
                              f"{ORIGINAL_CONFIG} or {HF_CONFIG}",
                              "--model_config_path (a file, or "
                              f"{' or '.join(NAMED_CONFIGS)})"))
  spiece_file = folder_spiece(init_checkpoint)
  if spiece_model_file and spiece_file:
    if not paths.isfile(spiece_model_file):
      raise UsageError(f"--spiece_model_file={spiece_model_file}: no such "
                       "file")
    if _digest(spiece_model_file) != _digest(spiece_file):
      raise UsageError(f"--spiece_model_file={spiece_model_file} is not the "
                       f"SentencePiece model of {label} ({spiece_file}); "
                       "leave the flag out to use the folder's")
  spiece = spiece_model_file or spiece_file
  if spiece is None and need_spiece:
    raise UsageError(_missing(init_checkpoint, label, "the SentencePiece "
                              "model", SPIECE_MODEL, "--spiece_model_file"))
  return ModelFiles(config, model_config_path or config_file, spiece)


def _missing(init_checkpoint: Optional[str], label: str, what: str,
             names: str, flag: str) -> str:
  if init_checkpoint and paths.isdir(init_checkpoint):
    return f"{label}: the folder holds no {names}; pass {flag}"
  return f"{flag.split(' ')[0]} is required ({what}), or an " \
         f"--init_checkpoint folder holding {names}"


def define_model_flags() -> None:
  """--init_checkpoint, --model_config_path and --spiece_model_file, which a
  model folder given to --init_checkpoint fills in (`model_folder`)."""
  flags.DEFINE_string(
      "init_checkpoint", None,
      "The weights to start from: a released XLNet folder, a HuggingFace "
      "folder, an xlnet-tf model_dir or a checkpoint prefix. A folder that "
      "holds xlnet_config.json (or HF's config.json) and spiece.model gives "
      "--model_config_path and --spiece_model_file too.")
  flags.DEFINE_string(
      "model_config_path", None,
      "The model's config: base, large, an xlnet_config.json or an HF "
      "config.json (default: the --init_checkpoint folder's).")
  flags.DEFINE_string("spiece_model_file", None,
                      "SentencePiece model (default: the --init_checkpoint "
                      "folder's spiece.model).")


def fill_flags(f, need_config: bool = True, need_spiece: bool = True
               ) -> ModelFiles:
  """`resolve` for a script's parsed flags `f` (`init_checkpoint`,
  `model_config_path`, `spiece_model_file`), setting the two file flags
  to what the folder gave where they were left out: the rest of the script
  reads them as if typed."""
  files = resolve(f.init_checkpoint, f.model_config_path,
                  f.spiece_model_file, need_config, need_spiece)
  f.model_config_path = files.model_config_path
  f.spiece_model_file = files.spiece_model_file
  return files

