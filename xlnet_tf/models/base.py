"""What every task model shares: an encoder, heads, original-name mapping."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_once
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.heads import LogitHead, SequenceSummary
from xlnet_tf.initializers import dtype_policy, get_initializer


class TaskModel(keras.Model):
  """Base of the task models: `self.encoder` plus the heads a subclass adds.

  Subclasses implement `call(features, training)` on a feature dict and list
  their heads in `self.heads` (layers with `original_weights()`).
  """

  uses_query_stream = False

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.options = options or RunOptions()
    self.initializer = get_initializer(self.options)
    self.policy = dtype_policy(self.options)
    self.encoder = XLNetModel(config, self.options)
    self.heads = []

  def build(self, input_shape=None):
    """Creates every weight from the config alone (no sample input needed)."""
    build_once(self.encoder, *self.heads)
    self.built = True

  def encode(self, features, training=False, output_rows=None):
    """`[B, L, D]`, or `[B, P, D]` at `output_rows [B, P]`."""
    return self.encoder(features["input_ids"],
                        segment_ids=features.get("segment_ids"),
                        input_mask=features.get("input_mask"),
                        output_rows=output_rows,
                        training=training)["sequence_output"]

  def original_weights(self) -> dict:
    """Original names -> variables, heads included (builds if needed)."""
    build_once(self)
    weights = self.encoder.original_weights()
    if not self.uses_query_stream:
      # Fine-tuning never builds the query stream: the original's fine-tuned
      # checkpoints have no mask_emb, and it is not "missing" from them.
      weights.pop(f"{XLNetModel.ORIGINAL_SCOPE}/mask_emb/mask_emb")
    for head in self.heads:
      weights.update(head.original_weights())
    return weights

  def _base_config(self) -> dict:
    return {"config": self.config.to_dict(), "options": self.options.to_dict(),
            "name": self.name}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["config"] = XLNetConfig.from_dict(config["config"])
    config["options"] = RunOptions.from_dict(config["options"])
    return cls(**config)



class PooledTaskModel(TaskModel):
  """encoder -> `SequenceSummary` -> a `LogitHead` the subclass makes."""

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               summary_type: str = "last", use_proj: bool = True, **kwargs):
    super().__init__(config, options, **kwargs)
    self.summary_type = summary_type
    self.use_proj = use_proj
    self.summary = SequenceSummary(config, summary_type, use_proj,
                                   self.options)

  def logit_head(self, units: int, scope: str, squeeze: bool) -> LogitHead:
    head = LogitHead(units, scope, self.config.d_model, squeeze=squeeze,
                     kernel_initializer=self.initializer, dtype=self.policy)
    self.heads = [self.summary, head]
    return head

  def pool(self, features, training=False):
    """`[B, D]` summary of the encoded features."""
    rows = None
    if self.summary_type in ("last", "first"):
      # The summary reads one position: the last layer computes only that
      # row (exact; ~1/n_layer of the work saved).
      ids = tf.convert_to_tensor(features["input_ids"])
      position = (tf.shape(ids)[1] - 1 if self.summary_type == "last" else 0)
      rows = tf.fill([tf.shape(ids)[0], 1], position)
    hidden = self.encode(features, training, output_rows=rows)
    return self.summary(hidden, input_mask=features.get("input_mask"),
                        training=training)

  def _base_config(self) -> dict:
    return dict(super()._base_config(), summary_type=self.summary_type,
                use_proj=self.use_proj)
