"""SentencePiece tokenization with the original's text preprocessing.

The released XLNet vocabulary puts the special symbols at fixed ids (below);
`<eop>` is a user-defined piece, so it survives inside raw text. Text goes
through `preprocess_text` (whitespace, quotes, accents, case), then
`encode_pieces` re-splits pieces that end in "digit," so that a number keeps
the same pieces whether or not a comma follows it (the original's fix of a
SentencePiece quirk: "▁2000," is one piece, "▁2000" another).
"""

from __future__ import annotations

import unicodedata
from typing import Iterable, List, Sequence

import sentencepiece as spm

from data_utils import paths
from data_utils.errors import UserError

SPIECE_UNDERLINE = "\u2581"

SPECIAL_SYMBOLS = {
    "<unk>": 0, "<s>": 1, "</s>": 2, "<cls>": 3, "<sep>": 4, "<pad>": 5,
    "<mask>": 6, "<eod>": 7, "<eop>": 8,
}
UNK_ID = SPECIAL_SYMBOLS["<unk>"]
CLS_ID = SPECIAL_SYMBOLS["<cls>"]
SEP_ID = SPECIAL_SYMBOLS["<sep>"]
PAD_ID = SPECIAL_SYMBOLS["<pad>"]
MASK_ID = SPECIAL_SYMBOLS["<mask>"]
EOD_ID = SPECIAL_SYMBOLS["<eod>"]
EOP_ID = SPECIAL_SYMBOLS["<eop>"]

# Segment ids, the original's values (the model only compares them: same
# segment or not). A is the first text (SQuAD: the paragraph; pretraining: the
# reused part and A), B the second (the question; pretraining: B); padding is
# 4 in classification and RACE, 3 in SQuAD, as the original writes them.
SEG_ID_A, SEG_ID_B, SEG_ID_CLS = 0, 1, 2
SEG_ID_PAD = 4
SEG_ID_PAD_SQUAD = 3


class TokenizerError(UserError):
  """The SentencePiece model cannot be used; the message names the file."""


def preprocess_text(text: str, lower: bool = False, remove_space: bool = True,
                    keep_accents: bool = False) -> str:
  """The original's normalisation.

  Collapses whitespace runs to one space (and strips the ends), turns ``
  and '' into ", decomposes (NFKD) and drops combining marks unless
  `keep_accents`, lower-cases when `lower`.

  Example:
    >>> preprocess_text("  ``Café''   au\\tlait ")
    '"Cafe" au lait'
    >>> preprocess_text("Café", lower=True, keep_accents=True)
    'café'
  """
  if remove_space:
    text = " ".join(text.strip().split())
  text = text.replace("``", '"').replace("''", '"')
  # ASCII is its own NFKD form and has no combining marks.
  if not keep_accents and not text.isascii():
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
  if lower:
    text = text.lower()
  return text


def _has_digit_comma(text: str) -> bool:
  """Does a digit come right before a comma somewhere in `text`?

  Example:
    >>> _has_digit_comma("in 2000, and"), _has_digit_comma("a, b 2")
    (True, False)
  """
  i = text.find(",")
  while i != -1:
    if i and text[i - 1].isdigit():
      return True
    i = text.find(",", i + 1)
  return False


def _is_digit_comma_piece(piece: str) -> bool:
  return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


class SentencePieceTokenizer:
  """The released XLNet SentencePiece model, with the original's encoding.

  Example (needs the model file):
    tok = SentencePieceTokenizer("spiece.model")
    tok.encode_pieces("born in 2000, and")
    # ['▁born', '▁in', '▁2000', ',', '▁and']
  """

  def __init__(self, model_path: str, lower: bool = False,
               keep_accents: bool = False):
    if not paths.isfile(model_path):
      raise TokenizerError(f"{model_path}: SentencePiece model not found")
    self.model_path = model_path
    self.lower = lower
    self.keep_accents = keep_accents
    self.sp = spm.SentencePieceProcessor()
    try:
      if paths.is_remote(model_path):  # SentencePiece opens local files only
        self.sp.LoadFromSerializedProto(paths.read_bytes(model_path))
      else:
        self.sp.Load(model_path)
    except (OSError, RuntimeError) as e:
      raise TokenizerError(
          f"{model_path}: not a SentencePiece model ({e})") from None
    for symbol, expected in SPECIAL_SYMBOLS.items():
      if self.sp.PieceToId(symbol) != expected:
        raise TokenizerError(
            f"{model_path}: {symbol} has id {self.sp.PieceToId(symbol)}, "
            f"XLNet needs {expected} (train it with XLNet's special symbols)")

  @property
  def vocab_size(self) -> int:
    return self.sp.GetPieceSize()

  def preprocess(self, text: str) -> str:
    return preprocess_text(text, lower=self.lower,
                           keep_accents=self.keep_accents)

  def encode_pieces(self, text: str, sample: bool = False,
                    preprocess: bool = True) -> List[str]:
    """Pieces of `text`; `sample` draws a segmentation (nbest 64, alpha 0.1)
    as the original's subword regularisation."""
    if preprocess:
      text = self.preprocess(text)
    if sample:
      pieces = self.sp.SampleEncodeAsPieces(text, 64, 0.1)
    else:
      pieces = self.sp.EncodeAsPieces(text)
    out: List[str] = []
    for piece in pieces:
      if not _is_digit_comma_piece(piece):
        out.append(piece)
        continue
      sub = self.sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
      if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
        # The piece continued a word: its re-encoding must not open one.
        sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:]] + sub[1:]
      out.extend(sub)
      out.append(piece[-1])
    return out

  def encode_ids(self, text: str, sample: bool = False,
                 preprocess: bool = True) -> List[int]:
    if preprocess:
      text = self.preprocess(text)
    if not sample and not _has_digit_comma(self.sp.Normalize(text)):
      # Pieces are pieces of the normalized text: none ends in "digit,",
      # so none is re-split and the model's own ids are the pieces' ids.
      return self.sp.EncodeAsIds(text)
    return [self.sp.PieceToId(p)
            for p in self.encode_pieces(text, sample, preprocess=False)]

  def id_to_piece(self, token_id: int) -> str:
    return self.sp.IdToPiece(int(token_id))

  def decode_ids(self, ids: Sequence[int], skip_special: bool = True) -> str:
    """Text from ids; special symbols (ids 0..8) are dropped unless asked."""
    ids = [int(i) for i in ids]
    if skip_special:
      ids = [i for i in ids if i >= len(SPECIAL_SYMBOLS)]
    return self.sp.DecodeIds(ids)

  def decode_pieces(self, pieces: Iterable[str]) -> str:
    return self.sp.DecodePieces(list(pieces))
