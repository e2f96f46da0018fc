"""The data side: text -> features -> TFRecords -> tf.data, below the model.

Shared: tokenization (special ids, segment ids, SentencePiece),
graph_tokenizer (the same as TF ops), records (feature files: names, atomic
writes, checks, cache reuse, tf.data), atomic, errors, fingerprint, progress.
One package per task: classification/, race/, squad/, pretraining/ (reader,
features, records). Nothing here imports `xlnet_tf`.
"""
