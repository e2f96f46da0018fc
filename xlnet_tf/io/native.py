"""Native TF2 object checkpoints (what the training loop writes and resumes
from): the model is stored as the object `model`."""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.building import build_once
from xlnet_tf.checkpoint_files import (CheckpointError, find_damage,
                                       open_checkpoint)


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
