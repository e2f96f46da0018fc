"""Language-model head (scope `model/lm_loss`): logits over the vocabulary."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.initializers import fresh


class LMHead(keras.layers.Layer):
  """`hidden [B, P, D] -> logits [B, P, n_token]` (float32).

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
