"""RACE reading comprehension (multiple choice):

  reader.py    the release layout and its one-line errors
  features.py  the feature layout: one `context <sep> qa <sep> <cls>` row
               per option, concatenated (`race_features`)
Records and tf.data: the classifier's (`data_utils/classification/records.py`).
"""
