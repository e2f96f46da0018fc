"""Word-labelled data (named entities: CoNLL-2003 and your own):

  schemes.py    tag schemes IOB1 / IOB2 / BIOES, entities as spans,
                conversion between schemes (IOB2 inside)
  reader.py     the CoNLL layout and JSONL -> `Sentence`s, `Document`s
  alignment.py  words <-> SentencePiece pieces (label on the first piece)
  windows.py    windows over long sentences, the window predicting a piece
  features.py   sentences -> model windows (document context), and back
  records.py    the cached feature records, tf.data
  text.py       raw text <-> words with character offsets, entity spans
  predictions.py  CoNLL-layout and JSONL prediction files
"""
