"""Weights are created from the config alone, so any layer can be built
before it sees data (checkpoint loading relies on it)."""

import tensorflow as tf


def build_once(*layers) -> None:
  """Builds each layer that is not built yet, inside its name scope.

  Building twice would create a second set of variables. The scope gives
  variables their path (`.../transformer/layer_3/rel_attn/LayerNorm/gamma`),
  which per-layer learning rates and the weight-decay exclusions match on;
  a direct `build()` call would not enter it.
  """
  for layer in layers:
    if not layer.built:
      with tf.name_scope(layer.name):
        layer.build(None)


def build_dense(dense, input_dim: int) -> None:
  """Builds a Dense layer for `[..., input_dim]` inputs, in its name scope."""
  if not dense.built:
    with tf.name_scope(dense.name):
      dense.build([None, input_dim])


def unconverted(call):
  """`call` (a layer's `call`) run as plain Python inside a `tf.function`,
  not rewritten by autograph: every layer here branches on Python values
  over static shapes only, and converting its source (and all it calls)
  would only slow each trace: a run's first step, each export. Keras still
  sees `call`'s own arguments (`training`, `mask`).

  Example:
    >>> import tf_keras as keras
    >>> class Twice(keras.layers.Layer):
    ...   @unconverted
    ...   def call(self, x, training=False):
    ...     return x * 2 if training else x
    >>> float(tf.function(lambda x: Twice()(x, training=True))(1.0))
    2.0
  """
  return tf.__internal__.decorator.make_decorator(
      call, tf.autograph.experimental.do_not_convert(call))
