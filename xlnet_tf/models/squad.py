"""Span extraction (SQuAD): encoder + `SquadHead`, and the original's loss.

Features: `input_ids`, `segment_ids` `[B, L]` int32, `input_mask`, `p_mask`
`[B, L]` float (1 = padding / not an answer boundary), `cls_index [B]`;
for training also `start_positions`, `end_positions [B]` int32 and
`is_impossible [B]` float.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.heads import SquadHead
from xlnet_tf.models.base import TaskModel


class XLNetForQuestionAnswering(TaskModel):
  """Returns the `SquadHead` dict; the training path (end conditioned on the
  gold start) is taken when `start_positions` is among the features."""

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               start_n_top: int = 5, end_n_top: int = 5, **kwargs):
    super().__init__(config, options, **kwargs)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.qa_head = SquadHead(config.d_model, start_n_top, end_n_top,
                             self.options.dropout, self.initializer,
                             name="qa_head", dtype=self.policy)
    self.heads = [self.qa_head]

  def call(self, features, training=False):
    hidden = self.encode(features, training)
    return self.qa_head(hidden, features["p_mask"], features["cls_index"],
                        start_positions=features.get("start_positions"),
                        training=training)

  def get_config(self):
    return dict(self._base_config(), start_n_top=self.start_n_top,
                end_n_top=self.end_n_top)


def squad_loss(outputs, start_positions, end_positions, is_impossible=None):
  """The original: mean of start and end NLL, plus half the answerability
  sigmoid cross-entropy when `is_impossible` is given. Returns a scalar."""

  def nll(log_probs, positions):
    picked = tf.gather(log_probs, tf.cast(positions, tf.int32), batch_dims=1)
    return -tf.reduce_mean(picked)

  loss = 0.5 * (nll(outputs["start_log_probs"], start_positions) +
                nll(outputs["end_log_probs"], end_positions))
  if is_impossible is not None:
    loss += 0.5 * tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(is_impossible, tf.float32),
        logits=outputs["cls_logits"]))
  return loss
