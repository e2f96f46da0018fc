"""Words <-> pieces for word-labelled data, on every shared CoNLL-2003
sentence (eng.train + eng.testa) and on hand-worked cases."""

import os

import pytest

from data_utils.ner.alignment import (IGNORE_LABEL, WordPieces, align_words,
                                      whole_sentence_differences, word_values)
from data_utils.ner.reader import NerDataError, read_ner
from data_utils.tokenization import SPIECE_UNDERLINE


@pytest.fixture(scope="module")
def word_pieces(sp_tokenizer):
  # One cache for the module: the shared files have ~27k distinct words.
  return WordPieces(sp_tokenizer)


@pytest.fixture(scope="module")
def sentences(shared):
  folder = os.path.join(shared, "data", "conll2003")
  out = []
  for name in ("eng.train", "eng.testa"):
    out.extend(read_ner(os.path.join(folder, name)).sentences)
  assert len(out) == 14041 + 3250
  return out


LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG",
          "B-PER", "I-PER"]
LABEL_MAP = {tag: i for i, tag in enumerate(LABELS)}


def test_every_shared_word_maps_to_its_first_piece_and_back(
    word_pieces, sentences, sp_tokenizer):
  n_words = n_pieces = 0
  for s in sentences:
    a = align_words(word_pieces, s.words, s.tags, LABEL_MAP)
    n = len(s.words)
    n_words += n
    n_pieces += len(a.pieces)
    assert len(a.input_ids) == len(a.piece_words) == len(a.label_ids) == \
        len(a.pieces)
    # Words in order, each with at least one piece, pieces contiguous.
    assert a.word_starts[0] == 0 and a.piece_words[0] == 0
    assert [a.piece_words[i] for i in a.word_starts] == list(range(n))
    for w in range(n):
      end = a.word_starts[w + 1] if w + 1 < n else len(a.pieces)
      assert end > a.word_starts[w]
      assert a.piece_words[a.word_starts[w]:end] == [w] * (end -
                                                          a.word_starts[w])
      own = a.pieces[a.word_starts[w]:end]
      assert own[0].startswith(SPIECE_UNDERLINE)
      # No character lost or moved: the pieces spell the preprocessed word.
      assert "".join(own).replace(SPIECE_UNDERLINE, "") == \
          sp_tokenizer.preprocess(s.words[w])
    # Labels on first pieces only; back to one tag per word.
    word_ids = [LABEL_MAP[t] for t in s.tags]
    assert word_values(a.label_ids, a.word_starts) == word_ids
    assert sum(a.label_mask) == n
    firsts = set(a.word_starts)
    assert all(a.label_ids[i] == IGNORE_LABEL
               for i in range(len(a.pieces)) if i not in firsts)
    predicted = [LABELS[i] if i >= 0 else "O" for i in a.label_ids]
    assert word_values(predicted, a.word_starts) == s.tags
  assert n_words == 203621 + 51362
  assert n_pieces == 290257 + 72545


def test_whole_sentence_tokenization_agrees_on_shared_data(word_pieces,
                                                           sentences):
  # SentencePiece splits at spaces before it picks pieces, so on CoNLL-2003
  # no word gets other pieces inside its sentence than alone.
  assert sum(whole_sentence_differences(word_pieces, s.words)
             for s in sentences) == 0


def test_hand_worked(word_pieces):
  words = ["LEICESTERSHIRE", "beat", "``", "Café", ",", "1996"]
  tags = ["B-ORG", "O", "O", "B-LOC", "O", "B-MISC"]
  a = align_words(word_pieces, words, tags, LABEL_MAP)
  assert a.pieces == ["▁", "LE", "ICE", "S", "TER", "SH", "IRE", "▁beat",
                      "▁", '"', "▁Cafe", "▁", ",", "▁1996"]
  assert a.input_ids == [17, 5004, 9887, 83, 9645, 9919, 25258, 1469, 17, 12,
                         16868, 17, 19, 2025]
  assert a.word_starts == [0, 7, 8, 10, 11, 13]
  assert a.piece_words == [0] * 7 + [1, 2, 2, 3, 4, 4, 5]
  assert a.label_ids == [5, -1, -1, -1, -1, -1, -1, 0, 0, -1, 1, 0, -1, 3]
  assert a.label_mask == [1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1]
  every = align_words(word_pieces, words, tags, LABEL_MAP,
                      label_all_pieces=True)
  assert every.pieces == a.pieces
  # Later pieces of a B- word are I- (ORG 5 -> 6), others keep the label.
  assert every.label_ids == [5, 6, 6, 6, 6, 6, 6, 0, 0, 0, 1, 0, 0, 3]
  unlabelled = align_words(word_pieces, words)
  assert unlabelled.label_ids == [] and unlabelled.pieces == a.pieces
  assert word_values(list(range(14)), a.word_starts) == [0, 7, 8, 10, 11, 13]


def test_word_emptied_by_preprocessing(word_pieces):
  # U+00A8 (diaeresis) decomposes to a space and a combining mark, which
  # preprocessing drops: the word still gets a piece for its label.
  assert word_pieces.pieces("\u00a8") == ["▁"]
  a = align_words(word_pieces, ["a", "\u00a8", "b"], ["O", "B-PER", "O"],
                  LABEL_MAP)
  assert a.word_starts == [0, 1, 2]
  assert word_values(a.label_ids, a.word_starts) == [0, 7, 0]
  # Tokenized as one sentence the word has no piece of its own.
  assert whole_sentence_differences(word_pieces, ["a", "\u00a8", "b"]) == 1


def test_tag_not_in_label_list(word_pieces):
  with pytest.raises(NerDataError) as e:
    align_words(word_pieces, ["Paris"], ["B-GPE"], {"O": 0, "B-LOC": 1},
                where="dev.txt:12")
  assert str(e.value) == ("dev.txt:12: tag B-GPE (word 0, 'Paris') is not "
                          "in the label list (O, B-LOC)")
