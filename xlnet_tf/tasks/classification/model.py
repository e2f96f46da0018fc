"""Sequence classification and regression: models, losses (the original's
`get_classification_loss` / `get_regression_loss`), training task and
SavedModel signatures.

Features: `input_ids`, `segment_ids` `[B, L]` int32, `input_mask` `[B, L]`
float (1 = padding); labels `[B]` (int class or float score). With
`segment_length=S` the models read `L = n * S` as n segments with memory
(`PooledTaskModel`).

Serving (SavedModel signatures): `tasks/classification/serving.py`.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.tasks.base import XLNetTask
from xlnet_tf.tasks.classification.formats import (CLASSIFIER_EXPORT_KIND,
                                                   REGRESSOR_EXPORT_KIND)
from xlnet_tf.tasks.losses import classification_loss  # noqa: F401 (API)
from xlnet_tf.tasks.pooling import PooledTaskModel


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetClassifier(PooledTaskModel):
  """encoder -> SequenceSummary -> `model/classification_<task>/logit`.

  Returns `{"logits": [B, n_class], "probabilities": [B, n_class]}`.
  `segment_length`, `bptt_segments` (keywords): see `PooledTaskModel`.
  """

  def __init__(self, network: XLNetModel, n_class: int = 2,
               task_name: str = "task", **kwargs):
    super().__init__(network, **kwargs)
    self.n_class = n_class
    self.task_name = task_name
    self.logit = self.logit_head(
        n_class, f"model/classification_{task_name.lower()}/logit", False)

  @unconverted
  def call(self, features, training=False):
    return self.head_outputs(self.pool(features, training))

  def head_outputs(self, summary) -> dict:
    logits = self.logit(summary)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def head_config(self) -> dict:
    return dict(super().head_config(), n_class=self.n_class,
                task_name=self.task_name)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetRegressor(PooledTaskModel):
  """encoder -> SequenceSummary -> `model/regression_<task>/logit` (1 unit).

  Returns `{"score": [B]}`. `segment_length`, `bptt_segments` (keywords):
  see `PooledTaskModel`.
  """

  def __init__(self, network: XLNetModel, task_name: str = "task", **kwargs):
    super().__init__(network, **kwargs)
    self.task_name = task_name
    self.logit = self.logit_head(
        1, f"model/regression_{task_name.lower()}/logit", True)

  @unconverted
  def call(self, features, training=False):
    return self.head_outputs(self.pool(features, training))

  def head_outputs(self, summary) -> dict:
    return {"score": self.logit(summary)}

  def head_config(self) -> dict:
    return dict(super().head_config(), task_name=self.task_name)


def regression_loss(score, labels):
  """Per-example squared error: `[B], [B] -> [B]`."""
  return tf.square(tf.cast(score, tf.float32) - tf.cast(labels, tf.float32))


class ClassifierTask(XLNetTask):
  """Classification (softmax cross-entropy) or, with `regression`,
  regression (squared error) on `{input_ids, segment_ids, input_mask,
  label}` batches. `seq_len` is the record length (n * S with
  `segment_length` S)."""

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions],
               n_class: int, task_name: str, regression: bool = False,
               summary_type: str = "last", use_summ_proj: bool = True,
               seq_len: int = 0, segment_length: Optional[int] = None,
               bptt_segments: int = 1):
    head = dict(task_name=task_name, summary_type=summary_type,
                use_summ_proj=use_summ_proj, segment_length=segment_length,
                bptt_segments=bptt_segments)
    if not regression:
      head["n_class"] = n_class
    super().__init__(config, options, seq_len, **head)
    self.regression = regression
    self.model_class = XLNetRegressor if regression else XLNetClassifier

  @property
  def export_kind(self) -> str:
    return (REGRESSOR_EXPORT_KIND if self.regression
            else CLASSIFIER_EXPORT_KIND)

  def compute_loss(self, model, features, state, training):
    out = model(features, training=training)
    if self.regression:
      loss = regression_loss(out["score"], features["label"])
    else:
      loss = classification_loss(out["logits"], features["label"])
    return tf.reduce_mean(loss), None
