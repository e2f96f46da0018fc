"""The SavedModel of a SQuAD model: the features signature (`SquadServer`)
and `export_squad`. Answers are decoded from its beam outside the graph
(`data_utils/squad/evaluate.py`)."""

from __future__ import annotations

import tensorflow as tf

from data_utils.errors import UsageError
from xlnet_tf.export.directory import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs, signature
from xlnet_tf.tasks.squad.formats import EXPORT_KIND

SQUAD_OUTPUTS = ("start_top_log_probs", "start_top_index",
                 "end_top_log_probs", "end_top_index", "cls_logits")


class SquadServer(tf.Module):
  """serving_default: input_ids, segment_ids int32 `[B, L]`, input_mask,
  p_mask float32 `[B, L]`, cls_index int32 `[B]` -> start_top_log_probs,
  start_top_index `[B, S]`, end_top_log_probs, end_top_index `[B, S * E]`
  (entry `s * E + e` = the e-th end of the s-th start) and cls_logits `[B]`
  (answer-class logit, higher = more likely no answer)."""

  def __init__(self, model, max_seq_length: int):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length

  def serve_features(self, input_ids, segment_ids, input_mask, p_mask,
                     cls_index):
    out = self.model({"input_ids": input_ids, "segment_ids": segment_ids,
                      "input_mask": input_mask, "p_mask": p_mask,
                      "cls_index": cls_index}, training=False)
    return {k: out[k] for k in SQUAD_OUTPUTS}

  def signatures(self) -> dict:
    shape = [None, self.max_seq_length]
    return {"serving_default": signature(
        self.serve_features, *feature_specs(shape),
        tf.TensorSpec(shape, tf.float32, "p_mask"),
        tf.TensorSpec([None], tf.int32, "cls_index"))}


def export_squad(model, export_dir: str, max_seq_length: int,
                 start_n_top: int = 5, end_n_top: int = 5) -> str:
  """Exports an `XLNetForQuestionAnswering`; its beam must be the asked
  `start_n_top` x `end_n_top` (it fixes the output shapes). Returns the
  export directory."""
  beam = (getattr(model, "start_n_top", None), getattr(model, "end_n_top",
                                                         None))
  if beam != (start_n_top, end_n_top):
    raise UsageError(f"the model's beam is {beam[0]} x {beam[1]}, the export "
                     f"asks {start_n_top} x {end_n_top}")
  check_export_dir(export_dir, EXPORT_KIND)
  server = SquadServer(model, max_seq_length)
  return save_atomically(server, server.signatures(), export_dir, EXPORT_KIND)
