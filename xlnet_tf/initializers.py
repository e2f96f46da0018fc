"""Weight initializers as the original defines them."""

from __future__ import annotations

import tf_keras as keras

from data_utils.deprecation import warn_renamed
import xlnet_tf.activations as activations
import xlnet_tf.precision as precision
from xlnet_tf.config import RunOptions

# Names this module held before activations and precision had modules of
# their own; the old path still works and warns once.
_MOVED = {"gelu_tanh": activations, "gelu_exact": activations,
          "get_activation": activations, "dtype_policy": precision,
          "cpu_has_native_bfloat16": precision}


def __getattr__(name: str):
  if name not in _MOVED:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  module = _MOVED[name].__name__
  warn_renamed(f"{__name__}.{name}", f"{module}.{name}")
  return getattr(_MOVED[name], name)


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
