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


def resolve_checkpoint(path: str, label: str | None = None) -> str:
  """A checkpoint prefix from a prefix or a directory holding one.

  A directory is resolved through its `checkpoint` state file, else through
  its only `*.index` file. Errors start with `label` (default: `path`).
  """
  label = label or path
  if os.path.isdir(path):
    prefix = tf.train.latest_checkpoint(path)
    if prefix:
      return prefix
    indexes = sorted(glob.glob(os.path.join(path, "*.index")))
    if len(indexes) == 1:
      return indexes[0][:-len(".index")]
    if not indexes:
      raise CheckpointError(f"{label}: directory holds no checkpoint (no "
                            "'checkpoint' state file and no *.index file)")
    raise CheckpointError(
        f"{label}: directory holds {len(indexes)} checkpoints and no "
        "'checkpoint' state file; pass one prefix, e.g. "
        f"{indexes[-1][:-len('.index')]}")
  if path.endswith(".index"):
    path = path[:-len(".index")]
  if not os.path.isfile(path + ".index"):
    data = _data_files(path)
    if data:  # the data is there, its index is not
      raise CheckpointError(
          f"{label}: {DAMAGED}: {os.path.basename(path)}.index is missing "
          f"({os.path.basename(data[0])} is there)")
    raise CheckpointError(f"{label}: no checkpoint there (expected "
                          f"{os.path.basename(path)}.index)")
  return path


# --------------------------------------------------------------------------
# Damaged files. A V2 checkpoint is `<prefix>.index` (an SSTable whose blocks
# carry CRC32C checksums; one entry per tensor with its shard, offset, size
# and the CRC32C of its bytes) and `<prefix>.data-<shard>-of-<shards>`.
# TensorFlow verifies both checksums when it reads (found by experiment: a
# flipped bit anywhere in a tensor's bytes fails its read; the flips in the
# index it misses fall in padding and leave every tensor the same), so every
# damage shows up as an error; what follows turns TF's wording, which names
# neither the file nor the tensor, into one line that names both.

DAMAGED = "damaged checkpoint"


def _tf_reason(e: BaseException) -> str:
  """TF's first message line without op context."""
  text = str(getattr(e, "message", None) or e).strip()
  text = text.splitlines()[0] if text else type(e).__name__
  text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
  return text.split(" [Op:")[0].strip()


def _data_files(prefix: str) -> List[str]:
  """The prefix's data shards on disk, sorted."""
  pattern = glob.escape(prefix) + ".data-[0-9][0-9][0-9][0-9][0-9]-of-" \
      "[0-9][0-9][0-9][0-9][0-9]"
  return sorted(glob.glob(pattern))


def _shard_name(prefix: str, shard: int | None) -> str:
  """The basename of data shard `shard` (None: not known)."""
  files = [os.path.basename(f) for f in _data_files(prefix)]
  base = os.path.basename(prefix)
  if shard is None:
    if len(files) == 1:
      return files[0]
    total = files[0][-5:] if files else "?????"
    return f"one of the data files ({base}.data-*-of-{total})"
  named = [f for f in files if f.startswith(f"{base}.data-{shard:05d}-of-")]
  if len(named) == 1:
    return named[0]
  total = files[0][-5:] if files else "?????"
  return f"{base}.data-{shard:05d}-of-{total}"


def _index_problem(prefix: str, e: BaseException) -> str:
  """What is wrong with an index the reader could not open."""
  index = os.path.basename(prefix) + ".index"
  reason = _tf_reason(e)
  size = os.path.getsize(prefix + ".index")
  if size == 0:
    return f"{DAMAGED}: {index} is empty"
  if "bad magic number" in reason or "too short to be an sstable" in reason:
    # The magic number ends the file: a cut-off index loses it first.
    why = ("no SSTable magic number at its end" if "magic" in reason else
           "too short to be an SSTable")
    return (f"{DAMAGED}: {index} is truncated or not a checkpoint index "
            f"({size} bytes, {why})")
  if "checksum mismatch" in reason:
    return f"{DAMAGED}: {index} is corrupt (block checksum mismatch)"
  if isinstance(e, IndexError):
    return (f"{DAMAGED}: {index} is corrupt (it points past its own end: "
            f"{reason.lower()})")
  return f"{DAMAGED}: {index} cannot be read ({reason})"


def _tensor_problem(prefix: str, name: str, e: BaseException) -> str | None:
  """What is wrong with a tensor the reader could not read; None when the
  error is not damage (a bug, or something else entirely)."""
  reason = _tf_reason(e)
  if isinstance(e, IndexError) or "Read less bytes than requested" in reason:
    files = _data_files(prefix)
    if len(files) == 1 and os.path.getsize(files[0]) == 0:
      return (f"{DAMAGED}: {os.path.basename(files[0])} is empty (needed "
              f"for {name})")
    return (f"{DAMAGED}: {_shard_name(prefix, None)} is truncated (read "
            f"less bytes than requested for {name})")
  match = re.search(r"shard (\d+) \(\d+ bytes\): Checksum does not match",
                    reason)
  if match:
    return (f"{DAMAGED}: {_shard_name(prefix, int(match.group(1)))} is "
            f"corrupt (checksum mismatch for {name})")
  match = re.match(r"(.+?); (.+)$", reason)
  if match and match.group(1).startswith(prefix):
    # `<file>; <OS reason>`, e.g. a missing or unreadable data shard.
    what = os.path.basename(match.group(1))
    if "No such file" in match.group(2):
      return f"{DAMAGED}: {what} is missing (needed for {name})"
    return f"{DAMAGED}: {what} cannot be read ({match.group(2)})"
  if isinstance(e, tf.errors.DataLossError):
    return f"{DAMAGED}: {name} cannot be read ({reason})"
  return None


def open_checkpoint(path: str, label: str | None = None):
  """`(prefix, reader)` of a checkpoint prefix or directory; parses the
  index only (cheap). A missing or damaged index, or a missing data shard,
  raises one-line `CheckpointError`s starting with `label` (default: the
  prefix)."""
  prefix = resolve_checkpoint(path, label)
  label = label or prefix
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, IndexError, ValueError) as e:
    raise CheckpointError(f"{label}: {_index_problem(prefix, e)}") from None
  # The index does not say (to Python) how many shards it has; the names
  # do: some `-of-<n>` must have all n shards (stale ones may sit beside).
  base = os.path.basename(prefix)
  present = {os.path.basename(f) for f in _data_files(prefix)}
  if not present:
    raise CheckpointError(f"{label}: {DAMAGED}: {base}.data-00000-of-00001 "
                          "is missing (no data file beside the index)")
  lacking = []
  for total in sorted({int(f[-5:]) for f in present}):
    wanted = [f"{base}.data-{i:05d}-of-{total:05d}" for i in range(total)]
    lacking.append([w for w in wanted if w not in present])
  if all(lacking):
    raise CheckpointError(f"{label}: {DAMAGED}: {lacking[0][0]} is missing")
  return prefix, reader


def read_tensor(reader, prefix: str, name: str, label: str | None = None
                ) -> np.ndarray:
  """`reader.get_tensor(name)`; damage raises a one-line `CheckpointError`
  naming the file and the tensor."""
  try:
    return reader.get_tensor(name)
  except (tf.errors.OpError, IndexError) as e:
    problem = _tensor_problem(prefix, name, e)
    if problem is None:
      raise
    raise CheckpointError(f"{label or prefix}: {problem}") from None


def find_damage(prefix: str, label: str | None = None) -> None:
  """Reads every tensor of the checkpoint at `prefix` (a full read, one
  tensor at a time) and raises the `CheckpointError` of the first damaged
  one; returns when all read cleanly. For explaining a failed restore."""
  prefix, reader = open_checkpoint(prefix, label)
  for name in sorted(reader.get_variable_to_shape_map()):
    read_tensor(reader, prefix, name, label)


def check_checkpoint(path: str, flag: str | None = None) -> None:
  """The cheap check of a checkpoint about to be loaded (a TF prefix or
  directory, either layout, or a HuggingFace directory): it exists, its
  index (or header) parses and its data files are there. Tensor data is
  verified when it is read (TF checks each tensor's CRC32C). Errors are one
  line starting with `--flag=path` (default: the path)."""
  from xlnet_tf import hf  # here: hf imports this module
  label = f"--{flag}={path}" if flag else None
  if hf.is_hf_directory(path):
    hf.check_hf_directory(path, label)
  else:
    open_checkpoint(path, label)


def check_init_checkpoint(train_opts, will_train: bool = True) -> None:
  """`check_checkpoint` of `train_opts.init_checkpoint` when training will
  load it: not without training, nor when `model_dir` already holds a
  checkpoint (the trainer resumes from that one instead)."""
  path = train_opts.init_checkpoint
  if not (will_train and path):
    return
  if tf.train.latest_checkpoint(train_opts.model_dir):
    return
  check_checkpoint(path, "init_checkpoint")


def is_native_checkpoint(prefix: str) -> bool:
  """True for a checkpoint written by `tf.train.Checkpoint` (object graph)."""
  names = open_checkpoint(prefix)[1].get_variable_to_shape_map()
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
  project's training loop, which also stores the model as `model`).

  A damaged file raises a one-line `CheckpointError` naming it and the
  tensor (found by reading the tensors one by one after a failed restore).
  """
  prefix, _ = open_checkpoint(path)
  build_once(obj)
  try:
    status = tf.train.Checkpoint(model=obj).read(prefix)
  except (tf.errors.OpError, IndexError):
    # TF's restore error names neither the tensor nor, for a truncated
    # file, the file: find them (raises), else it was not damage.
    find_damage(prefix)
    raise
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise CheckpointError(f"{prefix}: does not match this model ({e})"
                          ) from None
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
