"""Fast paths of the layers, selected by `RunOptions.fast_kernels` (True, the
default). Each computes what the reference path in `xlnet_tf/layers` computes
(the paper's equations, written literally) and is tested equal to it, values
and gradients (tests/test_kernels_*.py). Measured gains: benchmarks/README.md.

  attention.py   relative attention: head-major batched matmuls, the two
                 streams batched through the shared q / o / LayerNorm, the
                 per-head bias add with a cheaper gradient
  rows.py        attention at chosen query rows only (targets, pooled row):
                 `shift_rows`, a gather with a gather for a gradient
  feedforward.py the FFN on 2-D rows, GELU fused with its dropout
  matmul.py      a matmul whose input gradient reads a transposed copy of
                 the weight (the FFN's first layer, where it pays)
  fused.py       tanh GELU (+ dropout) and dropout as one XLA kernel each
  dropout.py     dropout masks from 16 random bits per element
  layer_norm.py  LayerNorm's normalization with a closed-form gradient
  decoding.py    a generation step of both streams against a cache of
                 projected keys and values (equal to the encoder's pass)
"""

from xlnet_tf.kernels.attention import (AttentionParts, add_head_bias,
                                        relative_attention)
from xlnet_tf.kernels.dropout import keep_mask, seeded_dropout
from xlnet_tf.kernels.feedforward import FeedForwardParts, feedforward
from xlnet_tf.kernels.fused import dropout_fused, gelu_tanh_fused
from xlnet_tf.kernels.layer_norm import normalize
from xlnet_tf.kernels.matmul import matmul_copied_transpose
from xlnet_tf.kernels.rows import shift_rows

__all__ = ["AttentionParts", "FeedForwardParts", "add_head_bias",
           "dropout_fused", "feedforward", "gelu_tanh_fused", "keep_mask",
           "matmul_copied_transpose", "normalize", "relative_attention",
           "seeded_dropout", "shift_rows"]
