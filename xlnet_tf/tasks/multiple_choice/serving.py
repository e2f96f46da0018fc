"""The SavedModel of a multiple-choice model: `serving_default` on the
choices' features `[B, n_choice, L]` -> logits, probabilities, class_id."""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf.export.directory import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs, signature
from xlnet_tf.tasks.multiple_choice.formats import EXPORT_KIND


class MultipleChoiceServer(tf.Module):
  """The exported object: the model and its one signature."""

  def __init__(self, model, n_choice: int, max_seq_length: int):
    super().__init__()
    self.model = model
    self.n_choice = n_choice
    self.max_seq_length = max_seq_length

  def serve_features(self, input_ids, segment_ids, input_mask):
    out = self.model({"input_ids": input_ids, "segment_ids": segment_ids,
                      "input_mask": input_mask}, training=False)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "class_id": tf.argmax(out["logits"], -1, output_type=tf.int32)}

  def signatures(self) -> dict:
    shape = [None, self.n_choice, self.max_seq_length]
    return {"serving_default": signature(self.serve_features,
                                         *feature_specs(shape))}


def export_multiple_choice(model, export_dir: str, n_choice: int,
                           max_seq_length: int) -> str:
  """Exports an `XLNetForMultipleChoice`; returns the export directory."""
  check_export_dir(export_dir, EXPORT_KIND)
  server = MultipleChoiceServer(model, n_choice, max_seq_length)
  return save_atomically(server, server.signatures(), export_dir,
                         EXPORT_KIND)
