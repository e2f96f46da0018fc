"""One vector per sequence, then logits: the pieces classification and
multiple choice share (the original's `summarize_sequence`, scope
`sequnece_summary` — misspelled as in the original checkpoints — and its
dense logit layers)."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_dense, build_once, unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.initializers import fresh, get_initializer
from xlnet_tf.precision import dtype_policy
from xlnet_tf.layers import AbsoluteAttention, SeededDropout
from xlnet_tf.masks import memory_mask
from xlnet_tf.tasks.base import TaskModel
from xlnet_tf.tasks.segments import (check_segments, count_segments,
                                     read_memory, segment_at,
                                     segment_features, stack_segments)

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
  dropout. For 'last' / 'first', `output_positions` names the one position
  the summary reads, so the encoder's last layer computes only that one;
  `call` then gets `[B, 1, D]`.

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
    # Seeded by the training step (`seeds`): resumes exactly.
    self.dropout = SeededDropout(options.dropout, options.fast_kernels,
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

  def output_positions(self, input_ids) -> Optional[tf.Tensor]:
    """`[B, 1]` int32, the position 'last' / 'first' reads (of `input_ids
    [B, L]`); None (all L) for the others."""
    if self.summary_type not in ("last", "first"):
      return None
    ids = tf.convert_to_tensor(input_ids)
    position = tf.shape(ids)[1] - 1 if self.summary_type == "last" else 0
    return tf.fill([tf.shape(ids)[0], 1], position)

  @unconverted
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

  @unconverted
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
  """encoder -> `SequenceSummary` -> the `LogitHead` a subclass makes.

  With `segment_length=S` (and `RunOptions.mem_len = M > 0`), features of
  length `n * S` are read as n segments in order, Transformer-XL style: each
  segment attends to its own tokens and to the memory of the previous ones
  (`XLNetModel`'s `mems`, M positions per layer, memory counting as segment
  0), and the head reads the LAST segment's summary. The memory starts as
  `initial_memory` (zeros, all masked); padding, in the segment and once it
  is in memory, is masked (`mems_mask`), so leading fully padded segments
  change nothing. The memory is a stop-gradient (truncated
  back-propagation) except what the last `bptt_segments` segments produce:
  with k of n, the memory of segment i (0-based) stays differentiable iff
  `i >= n - k`. The first n - k segments are read in one graph loop
  (`segments.read_memory`), so a traced call does not grow with n; the last
  k are unrolled. `segment_length=None` is the one-window model.
  """

  def __init__(self, network: XLNetModel, summary_type: str = "last",
               use_summ_proj: bool = True,
               segment_length: Optional[int] = None, bptt_segments: int = 1,
               **kwargs):
    super().__init__(network, **kwargs)
    check_segments(self.options, segment_length, bptt_segments)
    self.segment_length = segment_length
    self.bptt_segments = bptt_segments
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

  def head_outputs(self, summary) -> dict:
    """The model's outputs from the `[B, D]` summary (what `call` returns);
    a subclass that serves segments implements it."""
    raise NotImplementedError(f"{type(self).__name__} has no head_outputs")

  def pool(self, features, training=False):
    """`[B, D]` summary of the encoded features (of the last segment with
    `segment_length`)."""
    if self.segment_length is None:
      output_positions = self.summary.output_positions(features["input_ids"])
      hidden = self.encode(features, training,
                           output_positions=output_positions)
      return self.summary(hidden, input_mask=features.get("input_mask"),
                          training=training)
    length = self.segment_length
    n = count_segments(features, length)
    if self.bptt_segments > n:
      raise ValueError(f"bptt_segments={self.bptt_segments} must be in [1, "
                       f"{n}] (the features hold {n} segments)")
    present = segment_features(features)
    batch = tf.shape(present["input_ids"])[0]
    mems, mems_mask = self.initial_memory(batch)
    # Before the last segment only the memory matters: the last layer
    # computes one position.
    last_position = tf.fill([batch, 1], length - 1)
    stopped = n - self.bptt_segments

    def memory_of(segment, mems, mems_mask):
      return self._read(segment, mems, mems_mask, training, False,
                        last_position)[1:]
    if stopped:
      # Segments 0..stopped-1, not back-propagated through: one graph loop
      # (the graph does not grow with n).
      mems, mems_mask = read_memory(
          memory_of, stack_segments(present, length, stopped), mems,
          mems_mask)
    for i in range(stopped, n - 1):  # bptt_segments - 1 of them, unrolled
      _, mems, mems_mask = self._read(segment_at(present, length, i), mems,
                                      mems_mask, training, True,
                                      last_position)
    last = segment_at(present, length, n - 1)
    return self._summarize(last, mems, mems_mask, training)[0]

  def initial_memory(self, batch_size):
    """The memory before the first segment: `(mems, mems_mask)`, n_layer
    zeros `[B, M, D]` in the compute dtype and `[B, M]` float32 ones (nothing
    there: never attended)."""
    mem_len, d_model = self.options.mem_len, self.config.d_model
    zeros = tf.zeros([batch_size, mem_len, d_model], self.encoder.compute_dtype)
    return ([zeros] * self.config.n_layer,
            tf.ones([batch_size, mem_len], tf.float32))

  def read_segment(self, features, mems, mems_mask, training=False,
                   memory_gradient=False):
    """One segment `[B, S]` (`input_ids`, `segment_ids`, `input_mask`) after
    memory `(mems, mems_mask)` (n_layer `[B, M, D]`, `[B, M]` 1 = hidden) ->
    `(outputs as call returns, new_mems, new_mems_mask)`: what a caller
    streaming a document of any length needs. `memory_gradient` leaves
    `new_mems` differentiable."""
    if not self.options.mem_len:
      raise ValueError("read_segment needs RunOptions mem_len > 0, got 0")
    summary, new_mems, new_mask = self._summarize(
        segment_features(features), mems, mems_mask, training,
        memory_gradient)
    return self.head_outputs(summary), new_mems, new_mask

  def _summarize(self, segment, mems, mems_mask, training,
                 memory_gradient=False):
    """`(summary [B, D], new_mems, new_mems_mask)` of one segment."""
    output_positions = self.summary.output_positions(segment["input_ids"])
    hidden, new_mems, new_mask = self._read(segment, mems, mems_mask,
                                            training, memory_gradient,
                                            output_positions)
    summary = self.summary(hidden, input_mask=segment["input_mask"],
                           training=training)
    return summary, new_mems, new_mask

  def _read(self, segment, mems, mems_mask, training, memory_gradient,
            output_positions):
    """The encoder on one segment after the memory: `(hidden [B, P, D] at
    output_positions [B, P] (all S if None), new_mems, new_mems_mask)`."""
    out = self.encoder(segment["input_ids"],
                       segment_ids=segment.get("segment_ids"),
                       input_mask=segment["input_mask"], mems=mems,
                       mems_mask=mems_mask,
                       output_positions=output_positions,
                       training=training, memory_gradient=memory_gradient)
    new_mask = memory_mask(mems_mask, segment["input_mask"],
                           self.options.mem_len)
    return out["sequence_output"], out["new_mems"], new_mask

  def head_config(self) -> dict:
    config = {"summary_type": self.summary_type,
              "use_summ_proj": self.use_summ_proj}
    if self.segment_length is not None:
      # Only then: a one-window model's config stays what it was.
      config.update(segment_length=self.segment_length,
                    bptt_segments=self.bptt_segments)
    return config
