"""`RelativePositionEncoding`: the Keras face of `positions.py` (no weights)."""

from __future__ import annotations

import tf_keras as keras

from xlnet_tf.building import unconverted
from xlnet_tf.positions import relative_positional_encoding


@keras.utils.register_keras_serializable(package="xlnet_tf")
class RelativePositionEncoding(keras.layers.Layer):
  """`(qlen, klen, batch_size) -> [R, D]`, or `[B, R, D]` with `bi_data`.

  R = klen + qlen for 'bi', klen + 1 for 'uni'; distances clamped to
  `clamp_len` when positive; computed in float32.

  Example:
    >>> RelativePositionEncoding(4, "uni", clamp_len=2)(3, 5, 2).shape
    TensorShape([6, 4])
  """

  def __init__(self, d_model: int, attn_type: str = "bi", clamp_len: int = -1,
               bi_data: bool = False, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.attn_type = attn_type
    self.clamp_len = clamp_len
    self.bi_data = bi_data

  @unconverted
  def call(self, qlen, klen, batch_size=None):
    return relative_positional_encoding(qlen, klen, self.d_model,
                                        self.attn_type, self.clamp_len,
                                        self.bi_data, batch_size)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, attn_type=self.attn_type,
                  clamp_len=self.clamp_len, bi_data=self.bi_data)
    return config
