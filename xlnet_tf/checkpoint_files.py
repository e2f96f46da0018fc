"""TensorFlow checkpoint files (either layout, and the training loop's own):
a prefix or directory resolved, the index opened, tensors read one at a time,
and damage explained in one line that names the file and the tensor.

A V2 checkpoint is `<prefix>.index` (an SSTable whose blocks carry CRC32C
checksums; one entry per tensor with its shard, offset, size and the CRC32C
of its bytes) and `<prefix>.data-<shard>-of-<shards>`. TensorFlow verifies
both checksums when it reads (found by experiment: a flipped bit anywhere in
a tensor's bytes fails its read; the flips in the index it misses fall in
padding and leave every tensor the same), so every damage shows up as an
error; TF's wording names neither the file nor the tensor, the messages here
name both.
"""

from __future__ import annotations

import glob
import os
import re
from typing import List

import numpy as np
import tensorflow as tf

from data_utils import paths
from data_utils.errors import UserError

# The words every damage message starts with (after the file or flag).
DAMAGED = "damaged checkpoint"


class CheckpointError(UserError):
  """A checkpoint cannot be used as asked; the message says which and why."""


def _tf_reason(e: BaseException) -> str:
  """TF's first message line without op context."""
  text = str(getattr(e, "message", None) or e).strip()
  text = text.splitlines()[0] if text else type(e).__name__
  text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
  return text.split(" [Op:")[0].strip()


# A checkpoint in a bucket is TensorFlow's to read, so it is probed with
# TF's own filesystem (tf.io.gfile): what is found is what TF will read.
# Local paths go to the OS as before.

def _isdir(path: str) -> bool:
  return tf.io.gfile.isdir(path) if paths.is_remote(path) else \
      os.path.isdir(path)


def _isfile(path: str) -> bool:
  if paths.is_remote(path):
    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)
  return os.path.isfile(path)


def _size(path: str) -> int:
  return tf.io.gfile.stat(path).length if paths.is_remote(path) else \
      os.path.getsize(path)


def _glob(pattern: str) -> List[str]:
  """Files matching `pattern`, sorted (in a bucket, TF's glob: its names
  have no special characters to escape in what this module asks)."""
  if paths.is_remote(pattern):
    return sorted(tf.io.gfile.glob(pattern))
  return sorted(glob.glob(pattern))


def _data_files(prefix: str) -> List[str]:
  """The prefix's data shards on disk (or in a bucket), sorted."""
  shards = ".data-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"
  if paths.is_remote(prefix):
    return _glob(prefix + shards)
  return _glob(glob.escape(prefix) + shards)


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
  size = _size(prefix + ".index")
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
    if len(files) == 1 and _size(files[0]) == 0:
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



def resolve_checkpoint(path: str, label: str | None = None) -> str:
  """A checkpoint prefix from a prefix or a directory holding one.

  A directory is resolved through its `checkpoint` state file, else through
  its only `*.index` file. Errors start with `label` (default: `path`).
  """
  label = label or path
  if _isdir(path):
    prefix = tf.train.latest_checkpoint(path)
    if prefix:
      return prefix
    indexes = _glob(paths.join(path, "*.index"))
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
  if not _isfile(path + ".index"):
    data = _data_files(path)
    if data:  # the data is there, its index is not
      raise CheckpointError(
          f"{label}: {DAMAGED}: {os.path.basename(path)}.index is missing "
          f"({os.path.basename(data[0])} is there)")
    raise CheckpointError(f"{label}: no checkpoint there (expected "
                          f"{os.path.basename(path)}.index)")
  return path


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


def is_native_checkpoint(prefix: str) -> bool:
  """True for a checkpoint written by `tf.train.Checkpoint` (object graph)."""
  names = open_checkpoint(prefix)[1].get_variable_to_shape_map()
  return "_CHECKPOINTABLE_OBJECT_GRAPH" in names


