"""Weight initializers as the original defines them."""

from __future__ import annotations

import tf_keras as keras

from xlnet_tf.config import RunOptions


def get_initializer(options: RunOptions) -> keras.initializers.Initializer:
  """`init='normal'`: N(0, init_std^2); `init='uniform'`: U(-init_range, init_range).

  Example:
    >>> get_initializer(RunOptions(init="uniform")).get_config()["maxval"]
    0.1
  """
  if options.init == "uniform":
    return keras.initializers.RandomUniform(-options.init_range,
                                            options.init_range)
  return keras.initializers.RandomNormal(stddev=options.init_std)


def fresh(initializer) -> keras.initializers.Initializer:
  """A new instance with the same config: an unseeded Keras initializer
  instance returns the same values on every call, so each weight needs its own.
  """
  return keras.initializers.get(keras.initializers.serialize(
      keras.initializers.get(initializer)))
