"""Multiple choice (RACE; the original's `get_race_loss`): model, training
task and SavedModel signature.

Features: `input_ids`, `segment_ids`, `input_mask` of shape `[B, C, L]` (C
choices; `[B, C * L]` is accepted too, as the original's records store it).
Each choice row is scored as a sequence; softmax runs over the C choices.
How a question and its choices become those rows: `data_utils/race/features.py`.

Signature of an export: serving_default on input_ids, segment_ids int32
`[B, C, L]`, input_mask float32 `[B, C, L]` -> logits, probabilities
`[B, C]`, class_id `[B]`.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.tasks.base import XLNetTask
from xlnet_tf.tasks.losses import classification_loss
from xlnet_tf.tasks.multiple_choice.formats import EXPORT_KIND
from xlnet_tf.tasks.pooling import PooledTaskModel

FEATURE_KEYS = ("input_ids", "segment_ids", "input_mask")


def choice_rows(x, n_choice: int):
  """`[B, C, L]` or `[B, C * L]` -> `[B * C, L]`, row = example * C + choice.

  Example:
    >>> choice_rows(tf.reshape(tf.range(8), [1, 8]), 4).numpy().tolist()
    [[0, 1], [2, 3], [4, 5], [6, 7]]
  """
  if len(x.shape) == 2:
    x = tf.reshape(x, [tf.shape(x)[0], n_choice, -1])
  return tf.reshape(x, [-1, tf.shape(x)[-1]])


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetForMultipleChoice(PooledTaskModel):
  """encoder -> SequenceSummary -> `logits/dense` (1 unit) per choice.

  Returns `{"logits": [B, C], "probabilities": [B, C]}`.
  """

  def __init__(self, network: XLNetModel, n_choice: int = 4, **kwargs):
    super().__init__(network, **kwargs)
    self.n_choice = n_choice
    self.logit = self.logit_head(1, "logits/dense", True)

  @unconverted
  def call(self, features, training=False):
    rows = {k: choice_rows(features[k], self.n_choice) for k in FEATURE_KEYS}
    logits = tf.reshape(self.logit(self.pool(rows, training)),
                        [-1, self.n_choice])
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def head_config(self) -> dict:
    return dict(super().head_config(), n_choice=self.n_choice)


class MultipleChoiceTask(XLNetTask):
  """Softmax cross-entropy over the choices' scores."""

  model_class = XLNetForMultipleChoice
  export_kind = EXPORT_KIND

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions],
               n_choice: int = 4, summary_type: str = "last",
               use_summ_proj: bool = True, seq_len: int = 0):
    super().__init__(config, options, seq_len, n_choice=n_choice,
                     summary_type=summary_type, use_summ_proj=use_summ_proj)

  def compute_loss(self, model, features, state, training):
    logits = model(features, training=training)["logits"]
    return tf.reduce_mean(classification_loss(logits, features["label"])), None

  def tokens_per_example(self) -> int:
    return self.seq_len * self.head["n_choice"]
