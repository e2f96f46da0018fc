"""The loop's files in `model_dir`: checkpoint numbering, what interrupted
saves leave behind, and the JSON side files of a run."""

from __future__ import annotations

import os
import re
import shutil
from typing import Dict, List

from data_utils.atomic import write_json

# TensorFlow writes checkpoint `<prefix>` into `<prefix>_temp/` (before 2.x
# releases `<prefix>_temp_<uuid hex>/`; files
# `part-<shard>-of-<n>.index` / `.data-...`, each written through a
# `.tempstate<n>` file) and merges it into place; a save killed or failed
# midway leaves that directory behind.
_CKPT_TEMP_DIR = re.compile(r"^ckpt-\d+_temp(_[0-9a-f]{32})?$")
_CKPT_TEMP_PART = re.compile(
    r"^part-\d+-of-\d+\.(index|data-\d+-of-\d+)(\.tempstate\d+)?$")


def checkpoint_number(prefix: str) -> int:
  """The step of a `.../ckpt-<n>` prefix (0 if it has none).

  Example:
    >>> checkpoint_number("/m/ckpt-30"), checkpoint_number("/m/x")
    (30, 0)
  """
  match = re.search(r"-(\d+)$", prefix)
  return int(match.group(1)) if match else 0


def remove_checkpoint_temps(model_dir: str) -> List[str]:
  """Removes what interrupted saves of the training checkpoints left in
  `model_dir`: directories named `ckpt-<n>_temp` holding nothing but
  TensorFlow's checkpoint part files. Returns their paths; any other file or
  directory (one with anything else inside) is left alone.

  Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(d, "ckpt-20_temp"))
    >>> open(os.path.join(d, "ckpt-20_temp",
    ...                   "part-00000-of-00001.index"), "w").close()
    >>> os.makedirs(os.path.join(d, "ckpt-9_temp_mine"))
    >>> [os.path.basename(p) for p in remove_checkpoint_temps(d)]
    ['ckpt-20_temp']
    >>> os.listdir(d)
    ['ckpt-9_temp_mine']
  """
  removed = []
  try:
    names = sorted(os.listdir(model_dir))
  except (FileNotFoundError, NotADirectoryError):
    return removed
  for name in names:
    path = os.path.join(model_dir, name)
    if (not _CKPT_TEMP_DIR.match(name) or os.path.islink(path)
        or not os.path.isdir(path)):
      continue
    entries = os.listdir(path)
    if all(_CKPT_TEMP_PART.match(e) and os.path.isfile(os.path.join(path, e))
           and not os.path.islink(os.path.join(path, e)) for e in entries):
      shutil.rmtree(path)
      removed.append(path)
  return removed


def write_run_files(model_dir: str, files: Dict[str, dict]) -> None:
  """Writes JSON side files (configs, options) into model_dir, atomically
  (the original's layout: indent 4, sorted keys)."""
  os.makedirs(model_dir, exist_ok=True)
  for name, data in files.items():
    write_json(os.path.join(model_dir, name), data, indent=4)
