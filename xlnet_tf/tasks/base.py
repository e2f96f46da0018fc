"""What every task shares: the task model around an injected encoder, and
the `TrainTask` base that builds it and tells the loop about its layers."""

from __future__ import annotations

import re
from typing import Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_once
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.flops import training_flops
from xlnet_tf.initializers import get_initializer
from xlnet_tf.precision import dtype_policy
from xlnet_tf.training import TrainTask

# Variable paths inside the encoder (`.../transformer/layer_3/...`).
_LAYER = re.compile(r"(?:^|/)transformer/layer_(\d+)/")
_EMBEDDING = re.compile(r"(?:^|/)transformer/(?:word_embedding|mask_emb)/")


class TaskModel(keras.Model):
  """Base of the task models: the encoder `network` (an `XLNetModel`, kept
  as `self.encoder`) plus the heads a subclass adds.

  Subclasses implement `call(features, training)` on a feature dict, list
  their heads in `self.heads` (layers with `original_weights()`) and return
  their own arguments from `head_config()`.
  """

  uses_query_stream = False

  def __init__(self, network: XLNetModel, **kwargs):
    super().__init__(**kwargs)
    self.encoder = network
    self.config: XLNetConfig = network.config
    self.options: RunOptions = network.options
    self.initializer = get_initializer(self.options)
    self.policy = dtype_policy(self.options)
    self.heads = []

  def build(self, input_shape=None):
    """Creates every weight from the config alone (no sample input needed)."""
    build_once(self.encoder, *self.heads)
    self.built = True

  def encode(self, features, training=False, output_positions=None):
    """`[B, L, D]`, or `[B, P, D]` at `output_positions [B, P]` (int32)."""
    return self.encoder(features["input_ids"],
                        segment_ids=features.get("segment_ids"),
                        input_mask=features.get("input_mask"),
                        output_positions=output_positions,
                        training=training)["sequence_output"]

  def original_weights(self) -> dict:
    """Original names -> variables, heads included (builds if needed)."""
    build_once(self)
    weights = self.encoder.original_weights()
    if not self.uses_query_stream:
      # Fine-tuning never builds the query stream: the original's fine-tuned
      # checkpoints have no mask_emb, and it is not "missing" from them.
      weights.pop(f"{XLNetModel.ORIGINAL_SCOPE}/mask_emb/mask_emb")
    for head in self.heads:
      weights.update(head.original_weights())
    return weights

  def head_config(self) -> dict:
    """The subclass's own constructor arguments (besides `network`)."""
    return {}

  def get_config(self):
    return dict(self.head_config(), name=self.name,
                network=keras.layers.serialize(self.encoder))

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["network"] = keras.layers.deserialize(
        config["network"], custom_objects={"XLNetModel": XLNetModel})
    return cls(**config)


class XLNetTask(TrainTask):
  """A `TrainTask` whose model is `model_class(XLNetModel(config, options),
  **head)`; `tokens_per_example` is `seq_len` unless a subclass says more."""

  model_class = TaskModel
  # The export kind of the SavedModels a fine-tuning run writes
  # (`export/directory.py`'s marker).
  export_kind: Optional[str] = None

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions],
               seq_len: int = 0, **head):
    self.config = config
    self.options = options or RunOptions()
    self.seq_len = seq_len
    self.head = head

  def build_model(self) -> TaskModel:
    return self.model_class(XLNetModel(self.config, self.options), **self.head)

  def tokens_per_example(self) -> int:
    return self.seq_len

  def step_flops(self, per_replica_batch: int) -> float:
    # A long document read in segments attends within one segment + memory.
    segment = self.head.get("segment_length") or self.seq_len
    return training_flops(self.config,
                          self.tokens_per_example() * per_replica_batch,
                          segment + self.options.mem_len)

  def num_layers(self) -> int:
    return self.config.n_layer

  def layer_of(self, variable) -> Optional[int]:
    """`l` inside `transformer/layer_l/`, -1 for the word and mask
    embeddings below layer 0, None otherwise (attention biases, heads)."""
    match = _LAYER.search(variable.name)
    if match:
      return int(match.group(1))
    return -1 if _EMBEDDING.search(variable.name) else None

  def loss_scaling(self) -> bool:
    return bool(self.options.use_float16)


def feature_specs(shape) -> list:
  """The input specs of a features signature: `input_ids`, `segment_ids`
  int32 and `input_mask` float32 (1 = padding), all of `shape` (e.g.
  `[None, L]`)."""
  return [tf.TensorSpec(shape, tf.int32, "input_ids"),
          tf.TensorSpec(shape, tf.int32, "segment_ids"),
          tf.TensorSpec(shape, tf.float32, "input_mask")]


def signature(fn, *specs):
  """`fn` traced for `specs` (`tf.TensorSpec`s, named as the signature's
  inputs): one entry of a SavedModel's signatures. Without autograph: a
  signature branches on Python values only (`building.unconverted`)."""
  return tf.function(fn, autograph=False).get_concrete_function(*specs)


def string_spec(name: str) -> tf.TensorSpec:
  """A `[B]` tf.string input named `name` (a raw-text signature's)."""
  return tf.TensorSpec([None], tf.string, name)
