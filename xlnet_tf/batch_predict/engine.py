"""How a worker loads an export and runs its signatures.

`load_export(path, precision)` returns an object whose `.signatures[name]`
are called with `[B, L]` tensors and return a dict of tensors, as the
loaded SavedModel's are.
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.batch_predict.integrity import unregistered_ops


def load_export(export_path: str, precision: str = "float32"):
  """The export at `export_path`, ready to call in `precision`."""
  del precision
  if unregistered_ops(export_path):
    # An export with raw-text signatures (a language model's) holds
    # tensorflow_text's ops; the features versions of fine-tuned models
    # hold none, and their workers never load it.
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel
  return tf.saved_model.load(export_path)
