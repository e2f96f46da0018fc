"""Data utilities: tokenization, TFRecord builders and tf.data readers."""
