"""Checkpoint I/O: the original TF1 layout (by variable name) and native TF2.

Every model/layer of this project lists its weights under their original names
(`original_weights()`), e.g. `model/transformer/layer_0/rel_attn/q/kernel`.
Loading maps checkpoint names onto those variables; saving writes the same
names back, so a round trip gives identical tensors and the original code (or
any tool reading its format) can load what this project trained.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import tempfile
from typing import Dict, List

import numpy as np
import tensorflow as tf
from absl import logging

from data_utils.errors import UserError
from xlnet_tf.building import build_once


class CheckpointError(UserError):
  """A checkpoint cannot be used as asked; the message says which and why."""


# Optimizer slots and bookkeeping in the original's (and TF1's) checkpoints.
_IGNORED = re.compile(
    r"(^|/)(global_step|beta[12]_power|_CHECKPOINTABLE_OBJECT_GRAPH)$"
    r"|/(adam_[mv]|Adam(_1)?|Momentum|ExponentialMovingAverage)$")


@dataclasses.dataclass
class LoadReport:
  """What a load did: names in the original layout."""
  path: str
  loaded: List[str]
  unused: List[str]      # in the checkpoint, not used by the model
  missing: List[str]     # wanted by the model, not in the checkpoint
  ignored: List[str]     # optimizer slots and counters

  def summary(self) -> str:
    text = (f"{self.path}: loaded {len(self.loaded)} variables; "
            f"{len(self.missing)} missing in checkpoint; "
            f"{len(self.unused)} unused in checkpoint; "
            f"{len(self.ignored)} optimizer/bookkeeping skipped")
    if self.missing:
      text += " (missing: " + ", ".join(self.missing[:5]) + (
          ", ..." if len(self.missing) > 5 else "") + ")"
    return text


def resolve_checkpoint(path: str) -> str:
  """A checkpoint prefix from a prefix or a directory holding one.

  A directory is resolved through its `checkpoint` state file, else through
  its only `*.index` file.
  """
  if os.path.isdir(path):
    prefix = tf.train.latest_checkpoint(path)
    if prefix:
      return prefix
    indexes = sorted(glob.glob(os.path.join(path, "*.index")))
    if len(indexes) == 1:
      return indexes[0][:-len(".index")]
    if not indexes:
      raise CheckpointError(f"{path}: directory holds no checkpoint (no "
                            "'checkpoint' state file and no *.index file)")
    raise CheckpointError(
        f"{path}: directory holds {len(indexes)} checkpoints and no "
        "'checkpoint' state file; pass one prefix, e.g. "
        f"{indexes[-1][:-len('.index')]}")
  if path.endswith(".index"):
    path = path[:-len(".index")]
  if not os.path.isfile(path + ".index"):
    raise CheckpointError(f"{path}: no checkpoint there (expected "
                          f"{os.path.basename(path)}.index)")
  return path


def is_native_checkpoint(prefix: str) -> bool:
  """True for a checkpoint written by `tf.train.Checkpoint` (object graph)."""
  names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  return "_CHECKPOINTABLE_OBJECT_GRAPH" in names


def load_original_checkpoint(obj, path: str, strict: bool = False
                             ) -> LoadReport:
  """Loads a checkpoint in the original variable layout into `obj`.

  Args:
    obj: an `XLNetModel`, `SequenceSummary` or task model (built if needed).
    path: checkpoint prefix (`.../model.ckpt`) or a directory holding one.
    strict: raise when a variable of `obj` is missing from the checkpoint.

  Returns a `LoadReport`; logs its one-line summary. Raises `CheckpointError`
  on a shape mismatch (naming the variable and both shapes), on a missing
  variable with `strict`, or when `path` holds no checkpoint.
  """
  prefix = resolve_checkpoint(path)
  build_once(obj)
  targets: Dict[str, tf.Variable] = obj.original_weights()
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(f"{prefix}: not a readable checkpoint ({e})") from None
  shapes = reader.get_variable_to_shape_map()

  ignored = sorted(n for n in shapes if _IGNORED.search(n))
  mismatched = [
      f"{name}: checkpoint {list(shapes[name])} vs model {var.shape.as_list()}"
      for name, var in sorted(targets.items())
      if name in shapes and list(shapes[name]) != var.shape.as_list()
  ]
  if mismatched:
    raise CheckpointError(f"{prefix}: shape mismatch for " +
                          "; ".join(mismatched))
  missing = sorted(n for n in targets if n not in shapes)
  if strict and missing:
    raise CheckpointError(f"{prefix}: strict load, {len(missing)} model "
                          f"variable(s) missing in checkpoint: " +
                          ", ".join(missing))
  loaded = []
  for name, var in sorted(targets.items()):
    if name in shapes:
      var.assign(tf.cast(reader.get_tensor(name), var.dtype))
      loaded.append(name)
  unused = sorted(n for n in shapes if n not in targets and n not in ignored)
  report = LoadReport(prefix, loaded, unused, missing, ignored)
  logging.info(report.summary())
  return report


def _write_state_file(directory: str, basename: str) -> None:
  """The TF1 `checkpoint` file that lets `latest_checkpoint` find the prefix."""
  text = (f'model_checkpoint_path: "{basename}"\n'
          f'all_model_checkpoint_paths: "{basename}"\n')
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-checkpoint-")
  with os.fdopen(fd, "w") as f:
    f.write(text)
  os.replace(tmp, os.path.join(directory, "checkpoint"))


def save_original_checkpoint(obj, path: str,
                             extra: Dict[str, np.ndarray] | None = None) -> str:
  """Writes `obj`'s weights under their original names to prefix `path`.

  The files appear atomically (written in a temp directory, then renamed), and
  the directory's `checkpoint` state file points at the new prefix. `extra`
  adds further named tensors (e.g. `global_step`). Returns the prefix.
  """
  build_once(obj)
  tensors = {name: tf.convert_to_tensor(var)
             for name, var in obj.original_weights().items()}
  for name, value in (extra or {}).items():
    tensors[name] = tf.convert_to_tensor(value)
  names = sorted(tensors)
  directory = os.path.dirname(os.path.abspath(path))
  basename = os.path.basename(path)
  os.makedirs(directory, exist_ok=True)
  tmp_dir = tempfile.mkdtemp(dir=directory, prefix=".tmp-ckpt-")
  try:
    tf.raw_ops.SaveV2(prefix=os.path.join(tmp_dir, basename),
                      tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tensors[n] for n in names])
    for fname in sorted(os.listdir(tmp_dir)):
      os.replace(os.path.join(tmp_dir, fname), os.path.join(directory, fname))
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
  _write_state_file(directory, basename)
  return os.path.join(directory, basename)


def save_native_checkpoint(obj, path: str) -> str:
  """A TF2 object-based checkpoint of `obj` (what training resumes from)."""
  build_once(obj)
  return tf.train.Checkpoint(model=obj).write(path)


def load_native_checkpoint(obj, path: str) -> None:
  """Restores a checkpoint written by `save_native_checkpoint` (or by this
  project's training loop, which also stores the model as `model`)."""
  prefix = resolve_checkpoint(path)
  build_once(obj)
  status = tf.train.Checkpoint(model=obj).read(prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise CheckpointError(f"{prefix}: does not match this model ({e})") from None
  status.expect_partial()


def load_checkpoint(obj, path: str, strict: bool = False):
  """Loads either layout: native TF2 or the original's names (detected), or
  a HuggingFace directory (config.json + model.safetensors; see hf.py)."""
  from xlnet_tf import hf  # here: hf imports this module
  if hf.is_hf_directory(path):
    return hf.load_hf_weights(obj, path, strict=strict)
  prefix = resolve_checkpoint(path)
  if is_native_checkpoint(prefix):
    load_native_checkpoint(obj, prefix)
    return None
  return load_original_checkpoint(obj, prefix, strict=strict)
