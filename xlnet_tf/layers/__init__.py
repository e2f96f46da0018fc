"""Keras layers: relative position encoding, relative (two-stream) attention,
absolute attention, FFN, LayerNorm."""

from xlnet_tf.layers.absolute_attention import AbsoluteAttention
from xlnet_tf.layers.feedforward import PositionwiseFFN
from xlnet_tf.layers.layer_norm import LayerNorm
from xlnet_tf.layers.position_encoding import RelativePositionEncoding
from xlnet_tf.layers.relative_attention import RelativeAttention

__all__ = ["AbsoluteAttention", "LayerNorm", "PositionwiseFFN",
           "RelativeAttention", "RelativePositionEncoding"]
