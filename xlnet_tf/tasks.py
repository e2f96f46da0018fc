"""Training tasks: model + loss + carried state for the shared loop."""

from __future__ import annotations

from typing import List, Tuple

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.models import XLNetPretrainer
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
