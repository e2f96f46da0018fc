"""Keras layers: relative position encoding, relative (two-stream) attention,
absolute attention, FFN, LayerNorm, seeded dropout. Each layer's reference
path is the math as written; `fast_kernels=True` (the default) runs the same
math through `xlnet_tf/kernels`."""

from xlnet_tf.layers.absolute_attention import AbsoluteAttention
from xlnet_tf.layers.dropout import SeededDropout
from xlnet_tf.layers.feedforward import PositionwiseFFN
from xlnet_tf.layers.layer_norm import LayerNorm
from xlnet_tf.layers.position_encoding import RelativePositionEncoding
from xlnet_tf.layers.relative_attention import RelativeAttention

__all__ = ["AbsoluteAttention", "LayerNorm", "PositionwiseFFN",
           "RelativeAttention", "RelativePositionEncoding", "SeededDropout"]
