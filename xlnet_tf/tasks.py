"""Training tasks: model + loss + carried state for the shared loop."""

from __future__ import annotations

from typing import List, Tuple

import tensorflow as tf

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.models import (XLNetClassifier, XLNetForMultipleChoice,
                             XLNetPretrainer, XLNetRegressor,
                             classification_loss, regression_loss)
from xlnet_tf.training import TrainTask


class PretrainTask(TrainTask):
  """Permutation LM with two streams; carries each layer's memory
  `[per_replica_batch, mem_len, d_model]` from step to step."""

  def __init__(self, config: XLNetConfig, options: RunOptions, seq_len: int):
    self.config = config
    self.options = options
    self.seq_len = seq_len

  def build_model(self):
    return XLNetPretrainer(self.config, self.options)

  def state_shapes(self, per_replica_batch: int) -> List[Tuple[int, ...]]:
    if not self.options.mem_len:
      return []
    return [(per_replica_batch, self.options.mem_len, self.config.d_model)
            ] * self.config.n_layer

  def compute_loss(self, model, features, state, training):
    out = model(features, mems=state, training=training)
    return out["loss"], out["new_mems"]

  def tokens_per_example(self) -> int:
    return self.seq_len


class ClassifierTask(TrainTask):
  """Sequence classification (softmax cross-entropy) or regression (squared
  error) on `{input_ids, segment_ids, input_mask, label}` batches."""

  def __init__(self, config: XLNetConfig, options: RunOptions, n_class: int,
               task_name: str, regression: bool = False,
               summary_type: str = "last", use_proj: bool = True,
               seq_len: int = 0):
    self.config = config
    self.options = options
    self.n_class = n_class
    self.task_name = task_name
    self.regression = regression
    self.summary_type = summary_type
    self.use_proj = use_proj
    self.seq_len = seq_len

  def build_model(self):
    if self.regression:
      return XLNetRegressor(self.config, self.options,
                            task_name=self.task_name,
                            summary_type=self.summary_type,
                            use_proj=self.use_proj)
    return XLNetClassifier(self.config, self.options, n_class=self.n_class,
                           task_name=self.task_name,
                           summary_type=self.summary_type,
                           use_proj=self.use_proj)

  def compute_loss(self, model, features, state, training):
    out = model(features, training=training)
    if self.regression:
      loss = regression_loss(out["score"], features["label"])
    else:
      loss = classification_loss(out["logits"], features["label"])
    return tf.reduce_mean(loss), None

  def tokens_per_example(self) -> int:
    return self.seq_len


class MultipleChoiceTask(TrainTask):
  """RACE-style multiple choice: softmax over the choices' scores."""

  def __init__(self, config: XLNetConfig, options: RunOptions,
               n_choice: int = 4, summary_type: str = "last",
               use_proj: bool = True, seq_len: int = 0):
    self.config = config
    self.options = options
    self.n_choice = n_choice
    self.summary_type = summary_type
    self.use_proj = use_proj
    self.seq_len = seq_len

  def build_model(self):
    return XLNetForMultipleChoice(self.config, self.options,
                                  n_choice=self.n_choice,
                                  summary_type=self.summary_type,
                                  use_proj=self.use_proj)

  def compute_loss(self, model, features, state, training):
    logits = model(features, training=training)["logits"]
    return tf.reduce_mean(classification_loss(logits, features["label"])), None

  def tokens_per_example(self) -> int:
    return self.seq_len * self.n_choice


from xlnet_tf.models import XLNetForQuestionAnswering, squad_loss  # noqa: E402


class SquadTask(TrainTask):
  """SQuAD span extraction with the original loss (`squad_loss`: start and
  end NLL plus half the answerability cross-entropy) on
  `{input_ids, segment_ids, input_mask, p_mask, cls_index, start_positions,
  end_positions, is_impossible}` batches. The built model answers with a
  beam of `start_n_top` x `end_n_top` when no `start_positions` is given."""

  def __init__(self, config: XLNetConfig, options: RunOptions,
               start_n_top: int = 5, end_n_top: int = 5, seq_len: int = 0):
    self.config = config
    self.options = options
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.seq_len = seq_len

  def build_model(self):
    return XLNetForQuestionAnswering(self.config, self.options,
                                     start_n_top=self.start_n_top,
                                     end_n_top=self.end_n_top)

  def compute_loss(self, model, features, state, training):
    out = model(features, training=training)
    return squad_loss(out, features["start_positions"],
                      features["end_positions"],
                      features["is_impossible"]), None

  def tokens_per_example(self) -> int:
    return self.seq_len
