"""Sequence classification and regression (the original's
`get_classification_loss` / `get_regression_loss`).

Features: `input_ids`, `segment_ids` `[B, L]` int32, `input_mask` `[B, L]`
float (1 = padding); labels `[B]` (int class or float score).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.models.base import PooledTaskModel


class XLNetClassifier(PooledTaskModel):
  """encoder -> SequenceSummary -> `model/classification_<task>/logit`.

  Returns `{"logits": [B, n_class], "probabilities": [B, n_class]}`.
  """

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               n_class: int = 2, task_name: str = "task", **kwargs):
    super().__init__(config, options, **kwargs)
    self.n_class = n_class
    self.task_name = task_name
    self.logit = self.logit_head(
        n_class, f"model/classification_{task_name.lower()}/logit", False)

  def call(self, features, training=False):
    logits = self.logit(self.pool(features, training))
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def get_config(self):
    return dict(self._base_config(), n_class=self.n_class,
                task_name=self.task_name)


class XLNetRegressor(PooledTaskModel):
  """encoder -> SequenceSummary -> `model/regression_<task>/logit` (1 unit).

  Returns `{"score": [B]}`.
  """

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               task_name: str = "task", **kwargs):
    super().__init__(config, options, **kwargs)
    self.task_name = task_name
    self.logit = self.logit_head(
        1, f"model/regression_{task_name.lower()}/logit", True)

  def call(self, features, training=False):
    return {"score": self.logit(self.pool(features, training))}

  def get_config(self):
    return dict(self._base_config(), task_name=self.task_name)


def classification_loss(logits, labels):
  """Per-example `-log softmax(logits)[label]`: `[B, C], [B] -> [B]`."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=tf.cast(logits, tf.float32))


def regression_loss(score, labels):
  """Per-example squared error: `[B], [B] -> [B]`."""
  return tf.square(tf.cast(score, tf.float32) - tf.cast(labels, tf.float32))
