"""Multiple choice (the original's `get_race_loss`).

Features: `input_ids`, `segment_ids`, `input_mask` of shape `[B, C, L]` (C
choices; `[B, C * L]` is accepted too, as the original's records store it).
Each choice row is scored as a sequence; softmax runs over the C choices.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.models.base import PooledTaskModel


def choice_rows(x, n_choice: int):
  """`[B, C, L]` or `[B, C * L]` -> `[B * C, L]`, row = example * C + choice.

  Example:
    >>> choice_rows(tf.reshape(tf.range(8), [1, 8]), 4).numpy().tolist()
    [[0, 1], [2, 3], [4, 5], [6, 7]]
  """
  if len(x.shape) == 2:
    x = tf.reshape(x, [tf.shape(x)[0], n_choice, -1])
  return tf.reshape(x, [-1, tf.shape(x)[-1]])


class XLNetForMultipleChoice(PooledTaskModel):
  """encoder -> SequenceSummary -> `logits/dense` (1 unit) per choice.

  Returns `{"logits": [B, C], "probabilities": [B, C]}`.
  """

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               n_choice: int = 4, **kwargs):
    super().__init__(config, options, **kwargs)
    self.n_choice = n_choice
    self.logit = self.logit_head(1, "logits/dense", True)

  def call(self, features, training=False):
    rows = {k: choice_rows(features[k], self.n_choice)
            for k in ("input_ids", "segment_ids", "input_mask")}
    logits = tf.reshape(self.logit(self.pool(rows, training)),
                        [-1, self.n_choice])
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def get_config(self):
    return dict(self._base_config(), n_choice=self.n_choice)
