"""Token classification (named entities and any word-labelled data): the
model, its loss and the training task. The original has no such head; this
one is HuggingFace's `XLNetForTokenClassification` (a dense layer on every
position of the encoder's output, which already went through the run's
dropout, as in the original's `transformer_xl` and in HuggingFace) under an
original-style scope.

Features: `input_ids`, `segment_ids` `[B, L]` int32, `input_mask` `[B, L]`
float (1 = padding); for training `label_ids` `[B, L]` int32, where a
negative id (`data_utils.ner.alignment.IGNORE_LABEL`, -1) marks a position
the loss ignores (padding, special tokens, a word's non-first pieces). How
words and tags become those features: `data_utils/ner/`. The SavedModel
export (raw text in, tags and entities out): `serving.py`.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.tasks.base import TaskModel, XLNetTask
from xlnet_tf.tasks.pooling import LogitHead
from xlnet_tf.tasks.token_classification.formats import EXPORT_KIND


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetForTokenClassification(TaskModel):
  """encoder (its output dropout included) ->
  `model/token_classification_<task>/logit` on every position.

  Returns `{"logits": [B, L, n_class], "probabilities": [B, L, n_class]}`
  (float32; softmax over the classes of each position).
  """

  def __init__(self, network: XLNetModel, n_class: int,
               task_name: str = "task", **kwargs):
    super().__init__(network, **kwargs)
    self.n_class = n_class
    self.task_name = task_name
    self.logit = LogitHead(
        n_class, f"model/token_classification_{task_name.lower()}/logit",
        self.config.d_model, kernel_initializer=self.initializer,
        dtype=self.policy)
    self.heads = [self.logit]

  @unconverted
  def call(self, features, training=False):
    logits = self.logit(self.encode(features, training))
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def head_config(self) -> dict:
    return {"n_class": self.n_class, "task_name": self.task_name}


def token_classification_loss(logits, label_ids):
  """Mean cross-entropy over the labelled positions: `logits [B, L, C]`,
  `label_ids [B, L]` (negative = ignored) -> a float32 scalar, 0 when no
  position is labelled (the ignored ones get no gradient).

  Example:
    >>> logits = tf.math.log([[[0.5, 0.5], [0.2, 0.8]]])
    >>> round(float(token_classification_loss(logits, [[-1, 1]])), 6)
    0.223144
  """
  label_ids = tf.cast(label_ids, tf.int32)
  labelled = label_ids >= 0
  # Ignored positions get a valid class id so the op stays defined; their
  # loss is then zeroed, which also zeroes their gradient.
  per_position = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.where(labelled, label_ids, 0),
      logits=tf.cast(logits, tf.float32))
  weights = tf.cast(labelled, tf.float32)
  return tf.math.divide_no_nan(tf.reduce_sum(per_position * weights),
                               tf.reduce_sum(weights))


class TokenClassificationTask(XLNetTask):
  """`token_classification_loss` on `{input_ids, segment_ids, input_mask,
  label_ids}` batches."""

  model_class = XLNetForTokenClassification
  export_kind = EXPORT_KIND

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions],
               n_class: int, task_name: str = "task", seq_len: int = 0):
    super().__init__(config, options, seq_len, n_class=n_class,
                     task_name=task_name)

  def compute_loss(self, model, features, state, training):
    logits = model(features, training=training)["logits"]
    return token_classification_loss(logits, features["label_ids"]), None
