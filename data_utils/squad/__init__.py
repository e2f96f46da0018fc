"""SQuAD v1.1 / v2.0 data, in the order a question goes through it:

  reader.py     the official JSON -> `SquadExample`s (one-line errors)
  alignment.py  pieces <-> raw paragraph characters (the original's banded
                LCS, once per paragraph; pieces split at class changes)
  features.py   windows `P <sep> Q <sep> <cls>` and their layout, the
                process pool (no TensorFlow in its workers)
  records.py    the cached feature files, their tf.data reader and the
                metadata postprocessing reads back
  evaluate.py   model outputs -> answers, and the official metrics
"""
