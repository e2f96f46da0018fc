"""Seeds of replayable dropout: a layer's dropout masks are a pure function
of an int32 `[2]` seed (stateless RNG), so a layer recomputed in the backward
pass (`RunOptions.recompute`) drops exactly what the forward pass dropped."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf


def sub_seed(seed: Optional[tf.Tensor], site: int) -> Optional[tf.Tensor]:
  """The seed of dropout site `site` under `seed` (None stays None): distinct
  sites get independent masks.

  Example:
    >>> a = sub_seed(tf.constant([1, 2]), 0)
    >>> b = sub_seed(tf.constant([1, 2]), 1)
    >>> a.shape, bool(tf.reduce_all(a == b))
    (TensorShape([2]), False)
    >>> sub_seed(None, 3) is None
    True
  """
  if seed is None:
    return None
  return tf.random.experimental.stateless_fold_in(seed, site)
