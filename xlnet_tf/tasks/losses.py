"""The loss the pooled tasks share (the original's
`get_classification_loss`): softmax cross-entropy over a classifier's
classes or over multiple choice's choices."""

from __future__ import annotations

import tensorflow as tf


def classification_loss(logits, labels):
  """Per-example `-log softmax(logits)[label]`: `[B, C], [B] -> [B]`."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=tf.cast(logits, tf.float32))
