"""The fast path of the position-wise FFN (`RunOptions.fast_kernels=True`).

Why: on `[B * L, D]` the dense layers are plain matmuls whose bias add fuses
into them (a 3-D input goes through tensordot's reshapes); in training the
tanh GELU runs as one compiled kernel (`fused.py`), together with the dropout
after it when that dropout is seeded, and where it pays the first layer's
input gradient reads a transposed copy of its kernel (`matmul.py`).
Reference: `layers/feedforward.py` (tests/test_kernels_elementwise.py).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import tensorflow as tf

from xlnet_tf.kernels.dropout import keep_mask_for
from xlnet_tf.kernels.fused import gelu_tanh_fused
from xlnet_tf.kernels.matmul import (matmul_copied_transpose,
                                     transposed_copy_pays)
from xlnet_tf.seeds import sub_seed


class FeedForwardParts(NamedTuple):
  """What the kernel uses of a `PositionwiseFFN`: its dense layers, dropouts
  (`(x, training=, seed=)`) and LayerNorm as callables, the activation's
  name and function, the inner dropout rate and the model size."""
  layer_1: Callable
  layer_2: Callable
  drop_1: Callable
  drop_2: Callable
  layer_norm: Callable
  activation: str
  act: Callable
  rate: float
  d_model: int


def _layer_1(parts: FeedForwardParts, x, training):
  """`layer_1(x)` on `[R, D]` rows; in training where it pays, through
  `matmul_copied_transpose` (same values and gradients)."""
  if not (training and transposed_copy_pays()):
    return parts.layer_1(x)
  dense = parts.layer_1
  y = matmul_copied_transpose(x, tf.cast(dense.kernel, x.dtype))
  return tf.nn.bias_add(y, tf.cast(dense.bias, x.dtype))


def _activate_and_drop(parts: FeedForwardParts, y, training, seed):
  """`drop_1(act(y))`, the GELU fused when training."""
  if not (training and parts.activation == "gelu"):
    return parts.drop_1(parts.act(y), training=training, seed=seed)
  if seed is not None and parts.rate > 0:
    # GELU and its dropout: one kernel.
    return gelu_tanh_fused(y, *keep_mask_for(y, parts.rate, seed))
  return parts.drop_1(gelu_tanh_fused(y), training=training, seed=seed)


def feedforward(parts: FeedForwardParts, x, training=False, seed=None):
  """`x [..., D] -> LN(x + drop_2(W2 drop_1(act(W1 x))))`, `[..., D]`."""
  shape = tf.shape(x)
  x = tf.reshape(x, [-1, parts.d_model])
  y = _activate_and_drop(parts, _layer_1(parts, x, training), training,
                         sub_seed(seed, 0))
  y = parts.drop_2(parts.layer_2(y), training=training, seed=sub_seed(seed, 1))
  return tf.reshape(parts.layer_norm(y + x), shape)
