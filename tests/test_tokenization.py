"""Tokenization with the released XLNet SentencePiece model on real text."""

import os

import pytest

from data_utils import tokenization as tk


@pytest.fixture(scope="module")
def sp_path(shared):
  return os.path.join(shared, "data", "spiece", "spiece.model")


@pytest.fixture(scope="module")
def tok(sp_path):
  return tk.SentencePieceTokenizer(sp_path)


@pytest.fixture(scope="module")
def corpus_lines(shared):
  path = os.path.join(shared, "data", "corpus", "gutenberg_state_union.txt")
  with open(path, encoding="utf-8") as f:
    return [line for _, line in zip(range(3000), f) if line.strip()]


def test_special_symbol_ids(tok):
  for symbol, expected in tk.SPECIAL_SYMBOLS.items():
    assert tok.sp.PieceToId(symbol) == expected
  assert tok.vocab_size == 32000


def test_preprocess_rules():
  assert tk.preprocess_text(" a \t\n b  ") == "a b"
  assert tk.preprocess_text("``quoted''") == '"quoted"'
  assert tk.preprocess_text("naïve café") == "naive cafe"
  assert tk.preprocess_text("naïve", keep_accents=True) == "naïve"
  assert tk.preprocess_text("ÉCOLE Été", lower=True) == "ecole ete"


def test_digit_comma_resplit(tok):
  # SentencePiece alone makes "▁2000," one piece; the original re-splits it
  # so the number gets the pieces it has without the comma.
  assert "\u25812000," in tok.sp.EncodeAsPieces("born in 2000, and")
  assert tok.encode_pieces("born in 2000, and") == [
      "\u2581born", "\u2581in", "\u25812000", ",", "\u2581and"]
  # Inside a word ("92000,"), the re-encoded number must not open a word.
  pieces = tok.encode_pieces("the 92000, dollars")
  joined = "".join(pieces).replace("\u2581", " ").strip()
  assert joined == "the 92000, dollars"
  assert pieces[pieces.index(",") - 1][0] != "\u2581"


def test_accents_and_quotes_and_eop(tok):
  assert tok.encode_pieces("this is falsé.") == [
      "\u2581this", "\u2581is", "\u2581false", "."]
  ids = tok.encode_ids("``Yes,'' he said. <eop>")
  assert ids[-1] == tk.EOP_ID
  pieces = [tok.id_to_piece(i) for i in ids]
  assert pieces.count('"') + sum(p.endswith('"') for p in pieces
                                 if p != '"') == 2


def test_uncased(sp_path):
  lower = tk.SentencePieceTokenizer(sp_path, lower=True)
  assert lower.encode_ids("The CAT") == lower.encode_ids("the cat")


def test_real_text_round_trip_and_no_digit_comma_pieces(tok, corpus_lines):
  lossless = 0
  for line in corpus_lines:
    ids = tok.encode_ids(line)
    pieces = [tok.id_to_piece(i) for i in ids]
    assert not any(len(p) > 1 and p[-1] == "," and p[-2].isdigit()
                   for p in pieces), line
    if tk.UNK_ID not in ids:
      assert tok.decode_ids(ids) == tk.preprocess_text(line), line
      lossless += 1
  assert lossless > 0.95 * len(corpus_lines)


def test_numbers_in_real_text(tok, corpus_lines):
  """Every "digits," in the corpus encodes as the number's own pieces + ','."""
  import re
  checked = 0
  for line in corpus_lines:
    for number in re.findall(r"(?<![\w,])(\d+),(?=\s)", line)[:2]:
      with_comma = tok.encode_pieces(f"see {number}, the")
      without = tok.encode_pieces(f"see {number} the")
      assert without[0] == "\u2581see" and without[-1] == "\u2581the"
      assert with_comma == without[:-1] + [","] + without[-1:], number
      checked += 1
  assert checked >= 5


def test_sampling_draws_other_segmentations(tok):
  text = "Unquestionably, the establishment was extraordinary."
  ids = tok.encode_ids(text)
  samples = {tuple(tok.encode_ids(text, sample=True)) for _ in range(20)}
  assert len(samples) > 1
  assert all(tok.decode_ids(s) == tok.decode_ids(ids) for s in samples)


def test_missing_and_bad_model_files(tmp_path):
  with pytest.raises(tk.TokenizerError, match="nope.model: SentencePiece "
                     "model not found"):
    tk.SentencePieceTokenizer(str(tmp_path / "nope.model"))
  bad = tmp_path / "bad.model"
  bad.write_bytes(b"not a model")
  with pytest.raises(tk.TokenizerError, match="bad.model: not a SentencePiece"):
    tk.SentencePieceTokenizer(str(bad))


@pytest.mark.parametrize("keep_accents", [False, True])
def test_encode_ids_equals_the_ids_of_the_pieces(sp_path, corpus_lines,
                                                 keep_accents):
  """encode_ids skips the pieces when no normalized "digit," exists; it
  must give the ids of encode_pieces everywhere, incl. characters that
  normalize into a digit or a comma."""
  tok = tk.SentencePieceTokenizer(sp_path, keep_accents=keep_accents)
  texts = list(corpus_lines[:3000]) + [
      "born in 2000, and", "½, a half", "1，x", "𝟐, bold", "①, circled",
      "²,", "٣,٤", "१२, x", "€50,000 and 1,2", "a  ,b", "", "   ", "Café,"]
  for text in texts:
    want = [tok.sp.PieceToId(p) for p in tok.encode_pieces(text)]
    assert tok.encode_ids(text) == want, text
