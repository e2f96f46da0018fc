"""Text classification and regression data (GLUE, IMDB, Yelp, ..., your own):

  reader.py    the tasks (file layouts, labels) and their readers
  features.py  the feature layout: `A <sep> B <sep> <cls>`, left padding
  records.py   the cached feature files (RACE uses them too) and tf.data
"""
