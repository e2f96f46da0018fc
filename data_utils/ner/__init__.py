"""Word-labelled data (named entities: CoNLL-2003 and your own):

  schemes.py    tag schemes IOB1 / IOB2 / BIOES, entities as spans,
                conversion between schemes (IOB2 inside)
  reader.py     the CoNLL layout and JSONL -> `Sentence`s, `Document`s
  alignment.py  words <-> SentencePiece pieces (label on the first piece)
"""
