"""SQuAD alignment of pieces to characters against a transcription of the
original's LCS on real paragraphs, and the split of pieces at character-class
changes."""

import numpy as np

from data_utils.squad.alignment import (align_paragraph, class_runs,
                                        split_piece_classes)
from data_utils.squad.features import FeatureSettings, Featurizer
from data_utils.tokenization import SPIECE_UNDERLINE, preprocess_text
from squad_cases import sample_paragraphs


def _original_alignment(text, pieces):
  """The original run_squad.py alignment, transcribed: dense LCS table,
  `g` moves in a dict, `preprocess_text` per cell, `_convert_index`."""
  starts, ends, chartok_to_tok = [], [], []
  count = 0
  for t, piece in enumerate(pieces):
    chartok_to_tok += [t] * len(piece)
    starts.append(count)
    count += len(piece)
    ends.append(count - 1)
  cat = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
  n, m = len(text), len(cat)
  f = np.zeros((max(n, 1024), max(m, 1024)), np.float32)
  g = {}

  def lcs(max_dist):
    f.fill(0)
    g.clear()
    for i in range(n):
      for j in range(i - max_dist, i + max_dist):
        if j >= m or j < 0:
          continue
        if i > 0:
          g[(i, j)] = 0
          f[i, j] = f[i - 1, j]
        if j > 0 and f[i, j - 1] > f[i, j]:
          g[(i, j)] = 1
          f[i, j] = f[i, j - 1]
        f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
        if (preprocess_text(text[i], remove_space=False) == cat[j]
            and f_prev + 1 > f[i, j]):
          g[(i, j)] = 2
          f[i, j] = f_prev + 1
  max_dist = abs(n - m) + 5
  for _ in range(2):
    lcs(max_dist)
    if f[n - 1, m - 1] > 0.8 * n:
      break
    max_dist *= 2
  o2c, c2o = [None] * n, [None] * m
  i, j = n - 1, m - 1
  while i >= 0 and j >= 0 and (i, j) in g:
    if g[(i, j)] == 2:
      o2c[i], c2o[j] = j, i
      i, j = i - 1, j - 1
    elif g[(i, j)] == 1:
      j -= 1
    else:
      i -= 1
  if all(v is None for v in o2c) or f[n - 1, m - 1] < 0.8 * n:
    return None

  def convert(index, pos, limit=None, is_start=True):
    if index[pos] is not None:
      return index[pos]
    rear = front = pos
    while rear < len(index) - 1 and index[rear] is None:
      rear += 1
    while front > 0 and index[front] is None:
      front -= 1
    if index[front] is None:
      if index[rear] >= 1:
        return 0 if is_start else index[rear] - 1
      return index[rear]
    if index[rear] is None:
      if limit is not None and index[front] < limit - 1:
        return index[front] + 1 if is_start else limit - 1
      return index[front]
    if is_start:
      return index[front] + 1 if index[rear] > index[front] + 1 else \
          index[rear]
    return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]

  return {"start": [convert(c2o, s, n, True) for s in starts],
          "end": [convert(c2o, e, n, False) for e in ends],
          "answer": lambda s, text_: (
              chartok_to_tok[convert(o2c, s, is_start=True)],
              chartok_to_tok[convert(o2c, s + len(text_) - 1,
                                     is_start=False)])}


def test_alignment_equals_the_original(squad_dev, sp_tokenizer):
  """Same piece -> character spans and answer pieces as the original's LCS
  on real paragraphs (the whole dev set was checked the same way)."""
  checked = 0
  for examples in sample_paragraphs(squad_dev).values():
    text = examples[0].paragraph_text
    pieces = sp_tokenizer.encode_pieces(text)
    want = _original_alignment(text, pieces)
    got = align_paragraph(text, pieces, [0] * len(pieces))
    assert (want is None) == (got is None)
    if want is None:
      continue
    assert got.tok_start_to_orig == want["start"]
    assert got.tok_end_to_orig == want["end"]
    for e in examples:
      assert got.answer_pieces(e.start_position, e.orig_answer_text) == \
          want["answer"](e.start_position, e.orig_answer_text)
    checked += 1
  assert checked >= 30


def test_unicode_characters_map_back(squad_dev, sp_tokenizer):
  """Accents are stripped for the pieces but answers come back verbatim."""
  settings = FeatureSettings(max_seq_length=512)
  featurizer = Featurizer(sp_tokenizer, settings)
  found = 0
  for examples in sample_paragraphs(squad_dev, 0).values():
    text = examples[0].paragraph_text
    align = featurizer.align(text)
    for e in examples:
      answer = e.orig_answer_text
      if all(ord(c) < 128 for c in answer):
        continue
      s, t = align.answer_pieces(e.start_position, answer)
      span = text[align.tok_start_to_orig[s]:align.tok_end_to_orig[t] + 1]
      assert answer.strip() in span, (span, answer)
      found += span.strip() == answer.strip()
  assert found >= 3


# Pieces ---------------------------------------------------------------------
def test_piece_split_on_class_changes(sp_tokenizer):
  enc = sp_tokenizer.sp.EncodeAsPieces
  pieces = sp_tokenizer.encode_pieces("in the 1990s, about $5.2bn (1,000km)")
  split = split_piece_classes(pieces, enc, sp_tokenizer.sp.PieceToId)
  assert "".join(split) == "".join(pieces)
  assert "▁1990" in split and "s" in split
  for piece in split:
    body = piece.lstrip(SPIECE_UNDERLINE)
    assert len(class_runs(body)) <= 1, piece
  digits = split_piece_classes(pieces, enc, sp_tokenizer.sp.PieceToId,
                               split_digits=True)
  assert "".join(digits) == "".join(pieces)
  assert "▁1" in digits and "9" in digits


def test_split_answer_inside_a_piece_becomes_exact(sp_tokenizer):
  """Gold "5" inside "▁$5" and "8" inside "▁2018": the original snaps them
  to the whole piece; the default split makes them exact."""
  text = "The fee rose to $5 in 2018."
  five, eight = text.index("$5") + 1, text.index("2018") + 3
  for snapping, digits, want in ((False, True, ("5", "8")),
                                 (False, False, ("5", "2018")),
                                 (True, True, ("$5", "2018"))):
    f = Featurizer(sp_tokenizer, FeatureSettings(
        max_seq_length=64, max_query_length=16,
        original_piece_snapping=snapping, split_digits=digits))
    align = f.align(text)
    got = []
    for start, answer in ((five, "5"), (eight, "8")):
      s, t = align.answer_pieces(start, answer)
      got.append(text[align.tok_start_to_orig[s]:
                      align.tok_end_to_orig[t] + 1].strip())
    assert tuple(got) == want, (snapping, digits)
