"""The data side: text -> features -> TFRecords -> tf.data, below the model.

Shared: tokenization (special ids, segment ids, SentencePiece),
graph_tokenizer (the same as TF ops), records (feature files: names, atomic
writes, checks, cache reuse, tf.data), atomic, errors, fingerprint, progress.
One package per task: classification/, race/, squad/, pretraining/ (reader,
features, records). Nothing here imports `xlnet_tf`.
"""

import os

# `tf.keras` is tf_keras here, never Keras 3; and TensorFlow, imported
# after this, then skips loading Keras 3 (2 s of every process's start).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

