"""Permutation language modelling (the original's `two_stream_loss`): the
LM head, the pretrainer and its training task.

Features (batch-major): `input_ids [B, L]` int32, `segment_ids [B, L]` int32,
`perm_mask [B, L, L]`, `target_mapping [B, P, L]`, `input_q [B, L]` float,
`target [B, P]` int32, `target_mask [B, P]` float; memory is passed apart.
How a corpus becomes those features: `data_utils/pretraining/`.
"""

from __future__ import annotations

from typing import List, Tuple

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.initializers import fresh
from xlnet_tf.tasks.base import TaskModel, XLNetTask


@keras.utils.register_keras_serializable(package="xlnet_tf")
class LMHead(keras.layers.Layer):
  """`hidden [B, P, D] -> logits [B, P, n_token]` (float32), scope
  `model/lm_loss`.

  With `tie_weight` (the original's pretraining) the softmax weight is the word
  embedding table passed at call time; otherwise its own `lm_loss/weight`.
  The bias `lm_loss/bias` starts at zero.
  """

  ORIGINAL_SCOPE = "model/lm_loss"

  def __init__(self, n_token: int, d_model: int, tie_weight: bool = True,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_token = n_token
    self.d_model = d_model
    self.tie_weight = tie_weight
    self.kernel_initializer = keras.initializers.get(kernel_initializer)

  def build(self, input_shape=None):
    if not self.tie_weight:
      self.weight = self.add_weight("weight", [self.n_token, self.d_model],
                                    initializer=fresh(self.kernel_initializer))
    self.bias = self.add_weight("bias", [self.n_token], initializer="zeros")
    super().build(input_shape)

  @unconverted
  def call(self, hidden, embedding_table=None):
    softmax_w = embedding_table if self.tie_weight else self.weight
    if softmax_w is None:
      raise ValueError("LMHead(tie_weight=True) needs the embedding table")
    logits = tf.einsum("bpd,nd->bpn", hidden,
                       tf.cast(softmax_w, hidden.dtype))
    return tf.cast(logits, tf.float32) + tf.cast(self.bias, tf.float32)

  def original_weights(self) -> dict:
    weights = {f"{self.ORIGINAL_SCOPE}/bias": self.bias}
    if not self.tie_weight:
      weights[f"{self.ORIGINAL_SCOPE}/weight"] = self.weight
    return weights

  def get_config(self):
    config = super().get_config()
    config.update(n_token=self.n_token, d_model=self.d_model,
                  tie_weight=self.tie_weight,
                  kernel_initializer=keras.initializers.serialize(
                      self.kernel_initializer))
    return config


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetPretrainer(TaskModel):
  """Two-stream encoder + LM head (tied to the word embedding by default).

  `call(features, mems=None)` returns `{"logits": [B, P, V],
  "per_target_loss": [B, P], "loss": scalar, "new_mems": list | None}`, where
  loss = sum(per_target_loss * target_mask) / sum(target_mask).
  """

  uses_query_stream = True

  def __init__(self, network: XLNetModel, tie_weight: bool = True, **kwargs):
    super().__init__(network, **kwargs)
    self.tie_weight = tie_weight
    self.lm_head = LMHead(self.config.n_token, self.config.d_model,
                          tie_weight, self.initializer, name="lm_loss",
                          dtype=self.policy)
    self.heads = [self.lm_head]

  @unconverted
  def call(self, features, mems=None, training=False):
    out = self.encoder(features["input_ids"],
                       segment_ids=features.get("segment_ids"),
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

  def head_config(self) -> dict:
    return {"tie_weight": self.tie_weight}


class PretrainTask(XLNetTask):
  """Carries each layer's memory `[per_replica_batch, mem_len, d_model]`
  from step to step."""

  model_class = XLNetPretrainer
  step_kind = "pretraining"

  def state_shapes(self, per_replica_batch: int) -> List[Tuple[int, ...]]:
    if not self.options.mem_len:
      return []
    return [(per_replica_batch, self.options.mem_len, self.config.d_model)
            ] * self.config.n_layer

  def compute_loss(self, model, features, state, training):
    out = model(features, mems=state, training=training)
    return out["loss"], out["new_mems"]
