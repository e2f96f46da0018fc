"""The original TF1 layout: weights by their original variable names.

Every model/layer of this project lists its weights under their original names
(`original_weights()`), e.g. `model/transformer/layer_0/rel_attn/q/kernel`.
Loading maps checkpoint names onto those variables; saving writes the same
names back, so a round trip gives identical tensors and the original code (or
any tool reading its format) can load what this project trained. `obj` below
is anything with `original_weights()` (an `XLNetModel`, a head, a task model).
"""

from __future__ import annotations

import os
import re
from typing import Dict

import numpy as np
import tensorflow as tf
from absl import logging

from data_utils import paths
from data_utils.atomic import temp_dir, write_text
from xlnet_tf.building import build_once
from xlnet_tf.checkpoint_files import (CheckpointError, open_checkpoint,
                                       read_tensor)
from xlnet_tf.io.report import LoadReport

# Optimizer slots and bookkeeping in the original's (and TF1's) checkpoints.
_IGNORED = re.compile(
    r"(^|/)(global_step|beta[12]_power|_CHECKPOINTABLE_OBJECT_GRAPH)$"
    r"|/(adam_[mv]|Adam(_1)?|Momentum|ExponentialMovingAverage)$")


def load_original_checkpoint(obj, path: str, strict: bool = False
                             ) -> LoadReport:
  """Loads a checkpoint in the original variable layout into `obj`.

  Args:
    obj: an `XLNetModel`, `SequenceSummary` or task model (built if needed).
    path: checkpoint prefix (`.../model.ckpt`) or a directory holding one.
    strict: raise when a variable of `obj` is missing from the checkpoint.

  Returns a `LoadReport`; logs its one-line summary. Raises `CheckpointError`
  on a shape mismatch (naming the variable and both shapes), on a missing
  variable with `strict`, when `path` holds no checkpoint, and on a damaged
  file (naming it and the tensor; the variables read before it are loaded).
  """
  prefix, reader = open_checkpoint(path)
  build_once(obj)
  targets: Dict[str, tf.Variable] = obj.original_weights()
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
      var.assign(tf.cast(read_tensor(reader, prefix, name), var.dtype))
      loaded.append(name)
  unused = sorted(n for n in shapes if n not in targets and n not in ignored)
  report = LoadReport(prefix, loaded, unused, missing, ignored)
  logging.info(report.summary())
  return report


def _write_state_file(directory: str, basename: str) -> None:
  """The TF1 `checkpoint` file that lets `latest_checkpoint` find the prefix."""
  write_text(paths.join(directory, "checkpoint"),
             f'model_checkpoint_path: "{basename}"\n'
             f'all_model_checkpoint_paths: "{basename}"\n')


def save_original_checkpoint(obj, path: str,
                             extra: Dict[str, np.ndarray] | None = None) -> str:
  """Writes `obj`'s weights under their original names to prefix `path`.

  The files appear atomically (written in a temp directory, then renamed;
  in a bucket, written in local scratch and uploaded, the data before the
  index that makes them a checkpoint), and the directory's `checkpoint`
  state file points at the new prefix (written last). `extra` adds further
  named tensors (e.g. `global_step`). Returns the prefix.
  """
  build_once(obj)
  tensors = {name: tf.convert_to_tensor(var)
             for name, var in obj.original_weights().items()}
  for name, value in (extra or {}).items():
    tensors[name] = tf.convert_to_tensor(value)
  names = sorted(tensors)
  if paths.is_remote(path):
    return _save_to_bucket(path, names, tensors)
  directory = os.path.dirname(os.path.abspath(path))
  basename = os.path.basename(path)
  os.makedirs(directory, exist_ok=True)
  with temp_dir(directory) as tmp_dir:
    tf.raw_ops.SaveV2(prefix=os.path.join(tmp_dir, basename),
                      tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tensors[n] for n in names])
    for fname in sorted(os.listdir(tmp_dir)):
      os.replace(os.path.join(tmp_dir, fname), os.path.join(directory, fname))
  _write_state_file(directory, basename)
  return os.path.join(directory, basename)


def _save_to_bucket(path: str, names, tensors) -> str:
  """`save_original_checkpoint` to a URL: saved in local scratch, then each
  file uploaded (an object appears whole), the `.index` last of the
  checkpoint's files and the state file after it."""
  directory, basename = paths.dirname(path), paths.basename(path)
  with paths.scratch_dir() as tmp_dir:
    tf.raw_ops.SaveV2(prefix=os.path.join(tmp_dir, basename),
                      tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tensors[n] for n in names])
    for fname in sorted(os.listdir(tmp_dir),
                        key=lambda n: (n.endswith(".index"), n)):
      paths.upload(os.path.join(tmp_dir, fname), paths.join(directory, fname))
  _write_state_file(directory, basename)
  return paths.join(directory, basename)
