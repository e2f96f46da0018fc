"""Pretraining data: records with a precomputed factorization order.

  examples.py              what one record holds (the schema), built from a
                           token stream: A/B split, n-gram spans, permutation
  create_pretrain_data.py  the entry point that writes the record files and
                           their record-infos (`python -m
                           data_utils.pretraining.create_pretrain_data`)
  reader.py                the tf.data reader: a record -> `input_ids`,
                           `segment_ids`, `perm_mask`, `target_mapping`, ...
"""
