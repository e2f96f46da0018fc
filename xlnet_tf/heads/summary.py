"""Sequence summary (the original's `summarize_sequence`, scope
`sequnece_summary` — misspelled as in the original checkpoints)."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.initializers import dtype_policy, fresh, get_initializer
from xlnet_tf.layers import AbsoluteAttention

SUMMARY_TYPES = ("last", "first", "mean", "attn")


class SequenceSummary(keras.layers.Layer):
  """`hidden [B, L, D] -> [B, D]`.

  summary_type:
    'last'  the last position (the `<cls>` token with LEFT padding);
    'first' the first position;
    'mean'  the mean over all L positions, padding included (as the original);
    'attn'  a learned query `summary_bias [D]` attends the sequence, padding
            (input_mask = 1) masked, through `abs_attn` without residual.
  Then, with `use_proj`, `tanh(dense(summary))` (`summary/kernel`), and dropout.

  Example:
    >>> cfg = XLNetConfig(n_layer=1, d_model=4, n_head=2, d_head=2,
    ...                   d_inner=8, n_token=10)
    >>> s = SequenceSummary(cfg, "first", use_proj=False)
    >>> s(tf.reshape(tf.range(8.0), [1, 2, 4])).numpy().tolist()
    [[0.0, 1.0, 2.0, 3.0]]
  """

  ORIGINAL_SCOPE = "model/sequnece_summary"

  def __init__(self, config: XLNetConfig, summary_type: str = "last",
               use_proj: bool = True, options: Optional[RunOptions] = None,
               **kwargs):
    if summary_type not in SUMMARY_TYPES:
      raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}, "
                       f"got {summary_type!r}")
    options = options or RunOptions()
    kwargs.setdefault("name", "sequnece_summary")
    kwargs.setdefault("dtype", dtype_policy(options))
    super().__init__(**kwargs)
    self.config = config
    self.options = options
    self.summary_type = summary_type
    self.use_proj = use_proj
    initializer = get_initializer(options)
    self.initializer = initializer
    self.attention = None
    if summary_type == "attn":
      self.attention = AbsoluteAttention(
          config.d_model, config.n_head, config.d_head, options.dropout,
          options.dropatt, residual=False, kernel_initializer=fresh(initializer),
          name="abs_attn", dtype=self.dtype_policy)
    self.projection = None
    if use_proj:
      self.projection = keras.layers.Dense(
          config.d_model, activation="tanh", kernel_initializer=fresh(initializer),
          name="summary", dtype=self.dtype_policy)
    self.dropout = keras.layers.Dropout(options.dropout,
                                        dtype=self.dtype_policy)

  def build(self, input_shape=None):
    if self.attention is not None:
      self.summary_bias = self.add_weight(
          "summary_bias", shape=[self.config.d_model],
          initializer=fresh(self.initializer))
      build_once(self.attention)
    if self.projection is not None:
      build_dense(self.projection, self.config.d_model)
    super().build(input_shape)

  def call(self, hidden, input_mask=None, training=False):
    hidden = tf.cast(hidden, self.compute_dtype)
    if self.summary_type == "last":
      summary = hidden[:, -1]
    elif self.summary_type == "first":
      summary = hidden[:, 0]
    elif self.summary_type == "mean":
      summary = tf.reduce_mean(hidden, axis=1)
    else:
      query = tf.tile(tf.cast(self.summary_bias, hidden.dtype)[None, None],
                      [tf.shape(hidden)[0], 1, 1])
      summary = self.attention(query, hidden, hidden, mask=input_mask,
                               training=training)[:, 0]
    if self.projection is not None:
      summary = self.projection(summary)
    return self.dropout(summary, training=training)

  def original_weights(self) -> dict:
    scope = self.ORIGINAL_SCOPE
    weights = {}
    if self.attention is not None:
      weights[f"{scope}/summary_bias"] = self.summary_bias
      for name, var in self.attention.original_weights().items():
        weights[f"{scope}/abs_attn/{name}"] = var
    if self.projection is not None:
      weights[f"{scope}/summary/kernel"] = self.projection.kernel
      weights[f"{scope}/summary/bias"] = self.projection.bias
    return weights

  def get_config(self):
    config = super().get_config()
    config.pop("dtype", None)
    config.update(config=self.config.to_dict(), options=self.options.to_dict(),
                  summary_type=self.summary_type, use_proj=self.use_proj)
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["config"] = XLNetConfig.from_dict(config["config"])
    config["options"] = RunOptions.from_dict(config["options"])
    config.pop("trainable", None)
    return cls(**config)
