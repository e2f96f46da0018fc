"""Words <-> SentencePiece pieces for word-labelled data.

Each word is tokenized on its own, with the original's preprocessing
(`SentencePieceTokenizer.encode_pieces`), as SentencePiece sees a word
after a space: its first piece opens with '▁'. Tokenizing word by word
means no piece ever holds the end of one word and the start of the next,
so every piece belongs to exactly one word and every word's tag has a
first piece to sit on, even where tokenizing the whole sentence at once
would merge pieces across a boundary (`whole_sentence_differences`
counts the words where the two ways differ). A word that preprocessing
empties (a lone combining mark) gets the piece '▁' (`<unk>` if the model
has no '▁').

Labels: the word's label id sits on its first piece; the other pieces get
`IGNORE_LABEL` (-1), which the loss skips, unless `label_all_pieces`, where
they get the word's label with `B-` turned into `I-` (so pieces still read
as one entity in IOB2). Back: per-piece predictions -> one per word, taken
at the word's first piece (`word_values`).
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Dict, List, Optional, Sequence

from data_utils.ner.reader import NerDataError
from data_utils.ner.schemes import split_tag
from data_utils.tokenization import (SPIECE_UNDERLINE, UNK_ID,
                                     SentencePieceTokenizer)

IGNORE_LABEL = -1


class WordPieces:
  """A tokenizer's pieces per word, cached (words repeat a lot).

  Example (needs the model file):
    wp = WordPieces(SentencePieceTokenizer("spiece.model"))
    wp.pieces("Leicestershire")   # ['▁Le', 'ice', 'ster', 'shire']
  """

  def __init__(self, tokenizer: SentencePieceTokenizer):
    self.tokenizer = tokenizer
    self._cache: Dict[str, List[str]] = {}
    has_space = tokenizer.sp.PieceToId(SPIECE_UNDERLINE) != UNK_ID
    self.empty_word = [SPIECE_UNDERLINE if has_space else "<unk>"]

  def pieces(self, word: str) -> List[str]:
    """At least one piece: the word's, or `empty_word`."""
    out = self._cache.get(word)
    if out is None:
      out = self.tokenizer.encode_pieces(word) or list(self.empty_word)
      self._cache[word] = out
    return out

  def ids(self, pieces: Sequence[str]) -> List[int]:
    return [self.tokenizer.sp.PieceToId(p) for p in pieces]


@dataclasses.dataclass
class AlignedSentence:
  """A sentence's pieces, all of length n_pieces except `word_starts`
  (length n_words):
    pieces       the pieces, words in order
    input_ids    their ids
    piece_words  the index of the word each piece belongs to
    word_starts  the index of each word's first piece (increasing)
    label_ids    label id per piece, `IGNORE_LABEL` where not labelled;
                 empty when the sentence came without tags
  """
  pieces: List[str]
  input_ids: List[int]
  piece_words: List[int]
  word_starts: List[int]
  label_ids: List[int]

  @property
  def label_mask(self) -> List[int]:
    """1 on labelled pieces, 0 elsewhere (length n_pieces)."""
    return [int(i != IGNORE_LABEL) for i in self.label_ids]


def continuation_label(tag: str, label_map: Dict[str, int]) -> int:
  """The label id of a word's later pieces under `label_all_pieces`: `I-X`
  for `B-X` (when the label list has it), else the word's own.

  Example:
    >>> continuation_label("B-PER", {"O": 0, "B-PER": 1, "I-PER": 2})
    2
    >>> continuation_label("O", {"O": 0})
    0
  """
  prefix, entity_type = split_tag(tag)
  if prefix == "B" and "I-" + entity_type in label_map:
    return label_map["I-" + entity_type]
  return label_map[tag]


def align_words(word_pieces: WordPieces, words: Sequence[str],
                tags: Optional[Sequence[str]] = None,
                label_map: Optional[Dict[str, int]] = None,
                label_all_pieces: bool = False,
                where: str = "sentence") -> AlignedSentence:
  """The pieces of `words` and, with `tags` (IOB2) and `label_map`
  (tag -> id), their label ids. `where` names the sentence in errors
  (`file:line`); a tag missing from `label_map` is a `NerDataError`.
  """
  pieces: List[str] = []
  piece_words: List[int] = []
  word_starts: List[int] = []
  label_ids: List[int] = []
  for w, word in enumerate(words):
    own = word_pieces.pieces(word)
    word_starts.append(len(pieces))
    pieces.extend(own)
    piece_words.extend([w] * len(own))
    if tags is None or label_map is None:
      continue
    tag = tags[w]
    if tag not in label_map:
      raise NerDataError(f"{where}: tag {tag} (word {w}, {word!r}) is not in "
                         f"the label list ({', '.join(label_map)})")
    rest = continuation_label(tag, label_map) if label_all_pieces \
        else IGNORE_LABEL
    label_ids.append(label_map[tag])
    label_ids.extend([rest] * (len(own) - 1))
  return AlignedSentence(pieces, word_pieces.ids(pieces), piece_words,
                         word_starts, label_ids)


def word_values(piece_values: Sequence, word_starts: Sequence[int]) -> list:
  """One value per word from one per piece: the word's first piece's.

  Example:
    >>> word_values(["B-PER", "I-PER", "O", "B-LOC"], [0, 2, 3])
    ['B-PER', 'O', 'B-LOC']
  """
  return [piece_values[i] for i in word_starts]


def _piece_chars(piece: str) -> int:
  return len(piece.replace(SPIECE_UNDERLINE, ""))


def whole_sentence_differences(word_pieces: WordPieces,
                               words: Sequence[str]) -> int:
  """How many words get other pieces when the whole sentence (words joined
  by spaces) is tokenized at once than when tokenized alone.

  The whole sentence's pieces are given to words by character position
  (the '▁'s left out); a word differs when the pieces starting inside it
  are not its own (a piece across a boundary changes both words).
  """
  own = [word_pieces.pieces(w) for w in words]
  ends, total = [], 0
  for pieces in own:
    total += sum(_piece_chars(p) for p in pieces)
    ends.append(total)
  got: List[List[str]] = [[] for _ in words]
  position = 0
  whole = word_pieces.tokenizer.encode_pieces(" ".join(words))
  for piece in whole:
    w = min(bisect.bisect_right(ends, position), len(words) - 1)
    got[w].append(piece)
    position += _piece_chars(piece)
  return sum(a != b for a, b in zip(got, own))
