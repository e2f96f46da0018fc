"""The loop's files in `model_dir`: checkpoint numbering, what interrupted
saves leave behind, the JSON side files of a run, and evaluation scalars
for TensorBoard."""

from __future__ import annotations

import os
import re
import shutil
from typing import Dict, List

import tensorflow as tf

from data_utils import paths
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


def training_checkpoints(model_dir: str) -> List[str]:
  """The checkpoint prefixes the training loop wrote in `model_dir` (its
  `checkpoint` state file's, whose index exists), oldest step first."""
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    return []
  return sorted((p for p in state.all_model_checkpoint_paths
                 if tf.io.gfile.exists(p + ".index")), key=checkpoint_number)


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
  if paths.is_remote(model_dir):
    return _remove_bucket_checkpoint_temps(model_dir)
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


def _remove_bucket_checkpoint_temps(model_dir: str) -> List[str]:
  """`remove_checkpoint_temps` in a bucket (TF's own gs://, as it wrote
  them): a temp "directory" is a prefix whose objects are all part files."""
  removed = []
  try:
    names = sorted(n.rstrip("/") for n in tf.io.gfile.listdir(model_dir))
  except tf.errors.NotFoundError:
    return removed
  for name in names:
    path = paths.join(model_dir, name)
    if not _CKPT_TEMP_DIR.match(name) or not tf.io.gfile.isdir(path):
      continue
    entries = tf.io.gfile.listdir(path)
    if all(_CKPT_TEMP_PART.match(e) for e in entries):
      tf.io.gfile.rmtree(path)
      removed.append(path)
  return removed


def write_run_files(model_dir: str, files: Dict[str, dict]) -> None:
  """Writes JSON side files (configs, options) into model_dir, atomically
  (the original's layout: indent 4, sorted keys)."""
  paths.makedirs(model_dir)
  for name, data in files.items():
    write_json(paths.join(model_dir, name), data, indent=4)


def scalar_metrics(result: dict, prefix: str = "") -> Dict[str, float]:
  """The float metrics of an evaluation result, nested dicts (per entity
  type, ...) flattened with '/'; counts and names are left out.

  Example:
    >>> scalar_metrics({"f1": 0.5, "step": 3, "per_type": {"PER": {"f1": 1.0}}})
    {'f1': 0.5, 'per_type/PER/f1': 1.0}
  """
  scalars = {}
  for key, value in result.items():
    if isinstance(value, dict):
      scalars.update(scalar_metrics(value, f"{prefix}{key}/"))
    elif isinstance(value, float):
      scalars[prefix + key] = value
  return scalars


def write_eval_scalars(model_dir: str, split: str, step: int,
                       result: dict) -> str:
  """Writes `scalar_metrics(result)` at `step` to TensorBoard event files in
  `model_dir/eval_<split>` (beside the training curves in `train/`);
  returns that directory."""
  directory = paths.join(model_dir, f"eval_{split}")
  writer = tf.summary.create_file_writer(directory)
  with writer.as_default(step=step):
    for key, value in scalar_metrics(result).items():
      tf.summary.scalar(key, value)
  writer.close()
  return directory
