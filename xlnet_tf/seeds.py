"""Seeds of replayable dropout: a layer's dropout masks are a pure function
of an int32 `[2]` seed (stateless RNG), so a layer recomputed in the backward
pass (`RunOptions.recompute`) drops exactly what the forward pass dropped.

In training the seeds come from the training step: the Trainer opens
`dropout_seeds` around each micro-batch with `step_seed(...)`, and every
dropout inside draws its seed with `next_seed` (the n-th draw of the
micro-batch gets `sub_seed(step seed, n)`). The masks are then a pure
function of (run seed, global step, replica, micro-batch, draw), nothing
carried in a random generator's hidden state: a run resumed from the
checkpoint of step k drops at step k + 1 exactly what the uninterrupted run
dropped. Outside a scope `next_seed` is None and dropout is Keras's
ordinary stateful one.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional, Union

import tensorflow as tf

# The innermost `dropout_seeds` scope of each thread (a MirroredStrategy
# traces each replica in a thread of its own): `(seed, draws)` or None.
_SCOPE = threading.local()


def sub_seed(seed: Optional[tf.Tensor], site: Union[int, tf.Tensor]
             ) -> Optional[tf.Tensor]:
  """The int32 `[2]` seed of dropout site `site` (an int, or an integer
  scalar tensor) under `seed` (None stays None): distinct sites get
  independent masks.

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
  if not isinstance(site, int):
    site = tf.cast(site, tf.int32)  # e.g. a variable's update
  return tf.random.experimental.stateless_fold_in(seed, site)


def step_seed(seed: int, step: tf.Tensor, replica: Union[int, tf.Tensor]
              ) -> tf.Tensor:
  """The int32 `[2]` dropout seed of training step `step` (the optimizer's
  iterations before the update, an integer scalar) on replica `replica`
  of a run seeded with `seed` (an int in [0, 2**32)).

  Example:
    >>> a = step_seed(7, tf.constant(3, tf.int64), 0)
    >>> bool(tf.reduce_all(a == step_seed(7, tf.constant(3, tf.int64), 0)))
    True
    >>> [bool(tf.reduce_all(a == b)) for b in (
    ...     step_seed(8, tf.constant(3, tf.int64), 0),
    ...     step_seed(7, tf.constant(4, tf.int64), 0),
    ...     step_seed(7, tf.constant(3, tf.int64), 1))]
    [False, False, False]
  """
  run = tf.constant([seed, 0], tf.int64)
  at_step = tf.random.experimental.stateless_fold_in(
      run, tf.cast(step, tf.int64))
  return sub_seed(at_step, replica)


@contextlib.contextmanager
def dropout_seeds(seed: tf.Tensor, draws: tf.Variable) -> Iterator[None]:
  """Within (this thread): `next_seed()` gives `sub_seed(seed, n)` at its
  n-th call (n = 1, 2, ...). `draws` is a scalar int32 variable counting the
  calls, zeroed on entry: a variable, not a Python count, so a dropout
  inside a graph loop (`tf.while_loop`, traced once) draws a new seed on
  every iteration. The order of the draws is their program order (the
  graph orders the updates of one variable as written).

  Example:
    >>> draws = tf.Variable(0)
    >>> with dropout_seeds(tf.constant([1, 2]), draws):
    ...   a, b = next_seed(), next_seed()
    >>> bool(tf.reduce_all(a == sub_seed(tf.constant([1, 2]), 1)))
    True
    >>> bool(tf.reduce_all(a == b)), next_seed() is None
    (False, True)
  """
  draws.assign(0)
  outer = getattr(_SCOPE, "current", None)
  _SCOPE.current = (seed, draws)
  try:
    yield
  finally:
    _SCOPE.current = outer


def next_seed() -> Optional[tf.Tensor]:
  """The next int32 `[2]` seed of the innermost `dropout_seeds` scope of
  this thread; None outside one."""
  scope = getattr(_SCOPE, "current", None)
  if scope is None:
    return None
  seed, draws = scope
  return sub_seed(seed, draws.assign_add(1))
