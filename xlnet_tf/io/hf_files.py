"""A HuggingFace XLNet directory on disk: `config.json` + `model.safetensors`
(or shards listed in `model.safetensors.index.json`); found, checked, read
and written atomically."""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional

import numpy as np
from safetensors.numpy import save_file

from data_utils import paths
from data_utils.atomic import atomic_path, temp_dir, write_json
from xlnet_tf.checkpoint_files import DAMAGED, CheckpointError
from xlnet_tf.config import ConfigError
from xlnet_tf.io.hf_config import HF_CONFIG
from xlnet_tf.io.safetensors_file import read_safetensors, safetensors_problem

HF_WEIGHTS = "model.safetensors"
HF_INDEX = "model.safetensors.index.json"


def is_hf_directory(path: str) -> bool:
  """A directory with `config.json` and HF weights (safetensors, possibly
  sharded, or a torch `pytorch_model.bin`, which is refused when read)."""
  if not (isinstance(path, str) and paths.isdir(path)):
    return False
  weights = (HF_WEIGHTS, HF_INDEX, "pytorch_model.bin")
  return paths.isfile(paths.join(path, HF_CONFIG)) and any(
      paths.isfile(paths.join(path, w)) for w in weights)


def read_hf_config(directory: str) -> dict:
  """The parsed `config.json` of `directory`; one-line errors naming it."""
  path = paths.join(directory, HF_CONFIG)
  if not paths.isfile(path):
    raise CheckpointError(f"{directory}: no {HF_CONFIG}")
  try:
    return json.loads(paths.read_bytes(path).decode("utf-8"))
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})"
                      ) from None
  except UnicodeDecodeError as e:  # a damaged file, or not JSON at all
    raise ConfigError(f"{path}: not valid JSON (not UTF-8 text: byte "
                      f"{e.start})") from None



def _weight_files(directory: str, label: str) -> List[str]:
  """The safetensors files of an HF directory (one, or the shards its index
  lists); a missing shard or a damaged index raises `CheckpointError`."""
  single = paths.join(directory, HF_WEIGHTS)
  index = paths.join(directory, HF_INDEX)
  if paths.isfile(single):
    return [single]
  if paths.isfile(index):
    try:
      weight_map = json.loads(paths.read_bytes(index).decode("utf-8"))[
          "weight_map"]
      shards = sorted(set(weight_map.values()))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
      raise CheckpointError(f"{label}: {DAMAGED}: {HF_INDEX} is not valid "
                            f"JSON ({e})") from None
    except (KeyError, TypeError, AttributeError):
      raise CheckpointError(f"{label}: {DAMAGED}: {HF_INDEX} has no "
                            "weight_map of tensor -> file") from None
    for shard in shards:
      if not paths.isfile(paths.join(directory, str(shard))):
        raise CheckpointError(f"{label}: {DAMAGED}: {shard} is missing "
                              f"(listed in {HF_INDEX})")
    return [paths.join(directory, s) for s in shards]
  if paths.isfile(paths.join(directory, "pytorch_model.bin")):
    raise CheckpointError(
        f"{label}: holds pytorch_model.bin only; this project reads "
        f"safetensors (re-save with transformers: "
        "model.save_pretrained(dir, safe_serialization=True))")
  raise CheckpointError(f"{label}: no {HF_WEIGHTS}")


def check_hf_directory(directory: str, label: Optional[str] = None) -> None:
  """The cheap check of an HF directory about to be loaded: config.json
  parses, every weight file is there and its header and size agree. Errors
  are one line starting with `label` (default: the directory)."""
  read_hf_config(directory)
  label = label or directory
  for path in _weight_files(directory, label):
    problem = safetensors_problem(path)
    if problem:
      raise CheckpointError(f"{label}: {DAMAGED}: {problem}")


def read_hf_tensors(directory: str) -> Dict[str, np.ndarray]:
  """Every tensor of an HF directory by its HF name (shards merged; legacy
  LayerNorm names gamma/beta read as weight/bias). A missing or damaged
  file raises a one-line `CheckpointError` naming it."""
  tensors: Dict[str, np.ndarray] = {}
  for path in _weight_files(directory, directory):
    for name, value in read_safetensors(path, directory).items():
      name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
      tensors[name] = value
  return tensors


def write_hf_directory(directory: str, config: dict,
                     tensors: Dict[str, np.ndarray]) -> None:
  """config.json + model.safetensors, atomically: both are written in a temp
  directory beside the target, which is then renamed into place (a new
  directory appears whole; in an existing one each file is replaced). In a
  bucket each file is uploaded whole, weights first, config last."""
  if paths.is_remote(directory):
    _upload_hf_directory(paths.absolute(directory), config, tensors)
    return
  directory = os.path.abspath(directory)
  parent = os.path.dirname(directory)
  os.makedirs(parent, exist_ok=True)
  if os.path.exists(directory) and not os.path.isdir(directory):
    raise CheckpointError(f"{directory}: exists and is not a directory")
  with temp_dir(parent) as tmp:
    # HF's loader wants format=pt in the metadata (what save_pretrained writes).
    save_file(tensors, os.path.join(tmp, HF_WEIGHTS),
              metadata={"format": "pt"})
    with open(os.path.join(tmp, HF_CONFIG), "w") as f:
      json.dump(config, f, indent=2, sort_keys=True)
      f.write("\n")
    for name in os.listdir(tmp):
      os.chmod(os.path.join(tmp, name), 0o644)
    os.chmod(tmp, 0o755)
    try:
      os.rename(tmp, directory)
      return
    except OSError:
      pass  # the directory exists (and is not empty): replace file by file
    # Weights first, config last: a reader sees the new config only with the
    # new weights beside it.
    for name in (HF_WEIGHTS, HF_CONFIG):
      os.replace(os.path.join(tmp, name), os.path.join(directory, name))
    stale = os.path.join(directory, HF_INDEX)
    if os.path.isfile(stale):  # an older sharded save would shadow ours
      os.remove(stale)


def _upload_hf_directory(directory: str, config: dict,
                         tensors: Dict[str, np.ndarray]) -> None:
  # No rename in a bucket: each object appears whole when uploaded, and the
  # config last, so a reader never sees the new config with old weights.
  if paths.isfile(directory):
    raise CheckpointError(f"{directory}: exists and is not a directory")
  with atomic_path(paths.join(directory, HF_WEIGHTS)) as tmp:
    save_file(tensors, tmp, metadata={"format": "pt"})
  write_json(paths.join(directory, HF_CONFIG), config)
  stale = paths.join(directory, HF_INDEX)
  if paths.isfile(stale):  # an older sharded save would shadow ours
    paths.remove(stale)
