"""Permutation language modelling (the original's `two_stream_loss`).

Features (batch-major): `input_ids [B, L]` int32, `segment_ids [B, L]` int32,
`perm_mask [B, L, L]`, `target_mapping [B, P, L]`, `input_q [B, L]` float,
`target [B, P]` int32, `target_mask [B, P]` float; memory is passed apart.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.heads import LMHead
from xlnet_tf.models.base import TaskModel


class XLNetPretrainer(TaskModel):
  """Two-stream encoder + LM head (tied to the word embedding by default).

  `call(features, mems=None)` returns `{"logits": [B, P, V],
  "per_target_loss": [B, P], "loss": scalar, "new_mems": list | None}`, where
  loss = sum(per_target_loss * target_mask) / sum(target_mask).
  """

  uses_query_stream = True

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               tie_weight: bool = True, **kwargs):
    super().__init__(config, options, **kwargs)
    self.tie_weight = tie_weight
    self.lm_head = LMHead(config.n_token, config.d_model, tie_weight,
                          self.initializer, name="lm_loss", dtype=self.policy)
    self.heads = [self.lm_head]

  def call(self, features, mems=None, training=False):
    out = self.encoder(features["input_ids"], segment_ids=features.get("segment_ids"),
                       input_mask=features.get("input_mask"), mems=mems,
                       perm_mask=features["perm_mask"],
                       target_mapping=features.get("target_mapping"),
                       input_q=features["input_q"], training=training)
    logits = self.lm_head(out["sequence_output"],
                          embedding_table=self.encoder.embedding_table)
    per_target = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(features["target"], tf.int32), logits=logits)
    mask = tf.cast(features["target_mask"], tf.float32)
    loss = tf.reduce_sum(per_target * mask) / tf.reduce_sum(mask)
    return {"logits": logits, "per_target_loss": per_target, "loss": loss,
            "new_mems": out["new_mems"]}

  def get_config(self):
    return dict(self._base_config(), tie_weight=self.tie_weight)
