"""Pretraining data: records with a precomputed factorization order.

  examples.py              what one record holds (the schema), the settings
                           and the token stream's layout
  reference_examples.py    the readable statement of how a record is drawn:
                           A/B split, n-gram spans, permutation
  fast_examples.py         the same records, byte for byte, as the builder
                           makes them
  create_pretrain_data.py  the entry point that writes the record files and
                           their record-infos (`python -m
                           data_utils.pretraining.create_pretrain_data`)
  reader.py                the tf.data reader: a record -> `input_ids`,
                           `segment_ids`, `perm_mask`, `target_mapping`, ...
"""
