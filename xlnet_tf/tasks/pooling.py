"""One vector per sequence, then logits: the pieces classification and
multiple choice share (the original's `summarize_sequence`, scope
`sequnece_summary` — misspelled as in the original checkpoints — and its
dense logit layers)."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.initializers import dtype_policy, fresh, get_initializer
from xlnet_tf.layers import AbsoluteAttention
from xlnet_tf.tasks.base import TaskModel

SUMMARY_TYPES = ("last", "first", "mean", "attn")


@keras.utils.register_keras_serializable(package="xlnet_tf")
class SequenceSummary(keras.layers.Layer):
  """`hidden [B, L, D] -> [B, D]`.

  summary_type:
    'last'  the last position (the `<cls>` token with LEFT padding);
    'first' the first position;
    'mean'  the mean over all L positions, padding included (as the original);
    'attn'  a learned query `summary_bias [D]` attends the sequence, padding
            (input_mask = 1) masked, through `abs_attn` without residual.
  Then, with `use_summ_proj`, `tanh(dense(summary))` (`summary/kernel`), and
  dropout. For 'last' / 'first', `output_rows` names the one row the
  summary reads, so the encoder's last layer computes only that row; `call`
  then gets `[B, 1, D]`.

  Example:
    >>> cfg = XLNetConfig(n_layer=1, d_model=4, n_head=2, d_head=2,
    ...                   d_inner=8, n_token=10)
    >>> s = SequenceSummary(cfg, "first", use_summ_proj=False)
    >>> s(tf.reshape(tf.range(8.0), [1, 2, 4])).numpy().tolist()
    [[0.0, 1.0, 2.0, 3.0]]
  """

  ORIGINAL_SCOPE = "model/sequnece_summary"

  def __init__(self, config: XLNetConfig, summary_type: str = "last",
               use_summ_proj: bool = True,
               options: Optional[RunOptions] = None, **kwargs):
    if summary_type not in SUMMARY_TYPES:
      raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}, "
                       f"got {summary_type!r}")
    options = options or RunOptions()
    super().__init__(**{"name": "sequnece_summary",
                        "dtype": dtype_policy(options), **kwargs})
    self.config, self.options = config, options
    self.summary_type = summary_type
    self.use_summ_proj = use_summ_proj
    initializer = get_initializer(options)
    self.initializer = initializer
    self.attention = None
    if summary_type == "attn":
      self.attention = AbsoluteAttention(
          config.d_model, config.n_head, config.d_head, options.dropout,
          options.dropatt, residual=False, kernel_initializer=fresh(initializer),
          name="abs_attn", dtype=self.dtype_policy)
    self.projection = None
    if use_summ_proj:
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

  def output_rows(self, input_ids) -> Optional[tf.Tensor]:
    """`[B, 1]` the position 'last' / 'first' reads; None (all rows) for
    the others."""
    if self.summary_type not in ("last", "first"):
      return None
    ids = tf.convert_to_tensor(input_ids)
    position = tf.shape(ids)[1] - 1 if self.summary_type == "last" else 0
    return tf.fill([tf.shape(ids)[0], 1], position)

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
                  summary_type=self.summary_type,
                  use_summ_proj=self.use_summ_proj)
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["config"] = XLNetConfig.from_dict(config["config"])
    config["options"] = RunOptions.from_dict(config["options"])
    config.pop("trainable", None)
    return cls(**config)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class LogitHead(keras.layers.Layer):
  """A dense logit layer under an original scope (`<scope>/<name>/{kernel,
  bias}`): `[B, D] -> [B, units]` (or `[B]` with `squeeze`). Serves
  classification (`model/classification_<task>/logit`, n_class units),
  regression (`model/regression_<task>/logit`, 1 unit, squeezed) and RACE
  (`logits/dense`, 1 unit per choice)."""

  def __init__(self, units: int, original_scope: str, d_model: int,
               squeeze: bool = False, kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.original_scope = original_scope
    self.d_model = d_model
    self.squeeze = squeeze
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.dense = keras.layers.Dense(
        units, kernel_initializer=fresh(self.kernel_initializer),
        name=original_scope.rsplit("/", 1)[-1], dtype=self.dtype_policy)

  def build(self, input_shape=None):
    build_dense(self.dense, self.d_model)
    super().build(input_shape)

  def call(self, hidden):
    logits = tf.cast(self.dense(hidden), tf.float32)
    return tf.squeeze(logits, -1) if self.squeeze else logits

  def original_weights(self) -> dict:
    return {f"{self.original_scope}/kernel": self.dense.kernel,
            f"{self.original_scope}/bias": self.dense.bias}

  def get_config(self):
    initializer = keras.initializers.serialize(self.kernel_initializer)
    return dict(super().get_config(), units=self.units, d_model=self.d_model,
                original_scope=self.original_scope, squeeze=self.squeeze,
                kernel_initializer=initializer)


class PooledTaskModel(TaskModel):
  """encoder -> `SequenceSummary` -> the `LogitHead` a subclass makes."""

  def __init__(self, network: XLNetModel, summary_type: str = "last",
               use_summ_proj: bool = True, **kwargs):
    super().__init__(network, **kwargs)
    self.summary = SequenceSummary(self.config, summary_type, use_summ_proj,
                                   self.options)

  @property
  def summary_type(self) -> str:
    return self.summary.summary_type

  @property
  def use_summ_proj(self) -> bool:
    return self.summary.use_summ_proj

  def logit_head(self, units: int, scope: str, squeeze: bool) -> LogitHead:
    head = LogitHead(units, scope, self.config.d_model, squeeze=squeeze,
                     kernel_initializer=self.initializer, dtype=self.policy)
    self.heads = [self.summary, head]
    return head

  def pool(self, features, training=False):
    """`[B, D]` summary of the encoded features."""
    rows = self.summary.output_rows(features["input_ids"])
    hidden = self.encode(features, training, output_rows=rows)
    return self.summary(hidden, input_mask=features.get("input_mask"),
                        training=training)

  def head_config(self) -> dict:
    return {"summary_type": self.summary_type,
            "use_summ_proj": self.use_summ_proj}
