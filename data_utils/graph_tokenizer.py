"""In-graph XLNet tokenization for SavedModel export.

`GraphTokenizer` owns the TensorFlow-op version of
`tokenization.SentencePieceTokenizer.encode_ids`: `preprocess_text`, the
SentencePiece model and the "digit," re-split. It maps a batch of strings,
`tf.string [B]`, to ragged ids, `tf.int32 [B, (n)]`; no Python runs at call
time. A module holding a `GraphTokenizer` saves it with its functions
(what of the SentencePiece model that embeds: "Embedded" below).

Exactness. Measured against the Python path: identical ids, cased and
uncased, on all 43,319 corpus paragraphs, the 5,000 IMDB reviews, SQuAD dev
(2,067 contexts, 10,570 questions), SST-2 dev, every code point alone and
24 at a time, and 70,000 synthetic strings (numbers with commas, runs of a
repeated character after unknown ones, accents, U+0000); `preprocess`
equals `preprocess_text` on all of these in all four modes, and on 30,000
strings made for the final-sigma rule. What it takes:
  * Unicode tests come from this Python's own database (14.0 for Python
    3.11), compiled at construction into RE2 classes and code-point tables:
    `str.isspace` (RE2's `\\s` is ASCII only, while `str.split()` also
    splits at U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F,
    U+205F, U+3000 and U+001C-U+001F), `unicodedata.combining` (RE2's
    `\\p{Mn}` would remove 1,098 code points whose combining class is 0,
    e.g. U+0F71, and keep 25 whose class is not, e.g. U+1D165; `\\p{M}`
    would remove 1,538 too many) and `str.isdigit` (`\\d` is ASCII only).
  * Lower-casing is done on code points with Python's own mappings and its
    final-sigma rule (cased and case-ignorable characters probed from
    `str.lower`). ICU's `tf.strings.lower(..., encoding="utf-8")` was no
    match: its Unicode 13 data leaves the 40 capitals new in 14.0 (U+2C2F,
    U+A7C0, U+A7D0, U+A7D6, U+A7D8, U+10570-U+10595), decides final sigma
    otherwise than Python next to 304 characters (834 of 1.13 million
    contexts tried), and truncates a string at U+0000.
    `tensorflow_text.case_fold_utf8` is no lower-casing at all (NFKC and
    full case folding, "ß" -> "ss": 9,407 code points differ).
  * NFKD is `tensorflow_text.normalize_utf8` (ICU with Unicode 16), which
    also decomposes 118 code points that Python 3.11 has as unassigned
    (e.g. U+1CCD6 OUTLINED LATIN CAPITAL LETTER A -> "A"). Runs of code
    points unassigned for Python are split off and kept as they are; Python
    treats them as starters without decomposition, so NFKD of the rest is
    the same. The split (`regex_split`) stops at U+0000, so the text is
    normalized between U+0000s, also a starter.
  * Segmentation is `FastSentencepieceTokenizer`: the sentencepiece inside
    `SentencepieceTokenizer` is older and breaks ties between segmentations
    of equal score (the same pieces in another order, e.g. "!!!" "!!!!" vs
    "!!!!" "!!!") otherwise than the sentencepiece 0.2 of the Python path:
    59 of the 5,000 IMDB reviews and 13% of sentences with a run of one
    repeated character differ. The fast encoder agrees, except that it
    charges an unknown character's penalty per UTF-8 byte instead of per
    character, which shifts later path scores and so their float rounding
    (10% of such runs after an unknown character differed). So the text
    goes through `SentencepieceTokenizer` first, for normalization and the
    unknown characters, which become one U+0000 each (itself unknown), and
    the fast encoder segments that.
Residual differences: none found. Invalid UTF-8 (impossible from a Python
`str`) is not covered, nor subword sampling (`encode_ids(sample=True)`),
nor `remove_space=False`.

Embedded: not the model file (which a SavedModel used to hold twice, plus
its conversion for the fast encoder); `spiece_proto.split_model` says what
each op gets instead. For XLNet's (798 KB), a SavedModel of a
`GraphTokenizer` alone is 1.88 MB (it was 2.87 MB). id -> piece is one
string constant of the pieces (336 KB); the re-split looks up the ids of
the 2,941 pieces "▁x" where "x" is a piece too.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import List, NamedTuple, Tuple, Union

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_utils.spiece_proto import read_model, split_model
from data_utils.tokenization import (SPECIAL_SYMBOLS, SPIECE_UNDERLINE,
                                     TokenizerError)

_CAPITAL_SIGMA, _SMALL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
# Classes of code points for the final-sigma rule.
_NEITHER, _CASE_IGNORABLE, _CASED = 0, 1, 2


class _UnicodeTables(NamedTuple):
  space: str        # RE2 class: str.isspace
  combining: str    # RE2 class: unicodedata.combining(c) != 0
  digit: str        # RE2 class: str.isdigit
  unassigned: str   # RE2 class: category Cn (Python leaves these alone)
  lower_keys: np.ndarray    # int32 [K], sorted code points ...
  lower_values: np.ndarray  # ... int32 [K], their one-code-point str.lower
  lower_multi: Tuple[Tuple[str, str], ...]  # str.lower of several (U+0130)
  case_starts: np.ndarray   # int32 [R], starts of runs of code points ...
  case_classes: np.ndarray  # ... int32 [R], their final-sigma class


def _re2_class(ranges: List[Tuple[int, int]]) -> str:
  parts = []
  for lo, hi in ranges:
    parts.append(f"\\x{{{lo:X}}}" if lo == hi
                 else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
  return "[" + "".join(parts) + "]"


def _sigma_class(c: str) -> int:
  """How `str.lower` treats `c` next to a capital sigma."""
  # Ignorable: skipped both ways. Cased (and not ignorable): makes a sigma
  # after it final, one before it not. Neither: stops the search.
  after_cased = ("A" + c + "\u03a3").lower()[-1] == "\u03c2"
  before_nothing = ("A\u03a3" + c).lower()[1] == "\u03c2"
  if after_cased and before_nothing:
    return _CASE_IGNORABLE
  return _CASED if after_cased else _NEITHER


@functools.lru_cache(maxsize=None)
def unicode_tables() -> _UnicodeTables:
  """This Python's Unicode data as RE2 classes and code-point tables (one
  pass over all code points, under a second; cached)."""
  names = ("space", "combining", "digit", "unassigned")
  ranges = {name: [] for name in names}
  keys, values, multi = [], [], []
  starts, classes = [], []

  def add(name, cp):
    r = ranges[name]
    if r and r[-1][1] == cp - 1:
      r[-1] = (r[-1][0], cp)
    else:
      r.append((cp, cp))

  for cp in range(sys.maxunicode + 1):
    surrogate = 0xD800 <= cp <= 0xDFFF  # never in UTF-8
    c = chr(cp)
    cls = _NEITHER if surrogate else _sigma_class(c)
    if not classes or classes[-1] != cls:
      starts.append(cp)
      classes.append(cls)
    if surrogate:
      continue
    if c.isspace():
      add("space", cp)
    if unicodedata.combining(c):
      add("combining", cp)
    if c.isdigit():
      add("digit", cp)
    if unicodedata.category(c) == "Cn":
      add("unassigned", cp)
    low = c.lower()
    if low == c or cp == _CAPITAL_SIGMA:
      continue
    if len(low) == 1:
      keys.append(cp)
      values.append(ord(low))
    else:
      multi.append((c, low))
  return _UnicodeTables(
      *(_re2_class(ranges[name]) for name in names),
      lower_keys=np.asarray(keys, np.int32),
      lower_values=np.asarray(values, np.int32),
      lower_multi=tuple(multi),
      case_starts=np.asarray(starts, np.int32),
      case_classes=np.asarray(classes, np.int32))


def _join_with_nul(parts: tf.RaggedTensor) -> tf.Tensor:
  """Inverse of `tf.strings.split(texts, sep="\\x00")` (reduce_join's
  `separator` attribute cannot hold U+0000)."""
  flat = parts.flat_values
  last = (tf.range(tf.size(flat, out_type=parts.row_splits.dtype))
          == tf.gather(parts.row_limits() - 1, parts.value_rowids()))
  flat = tf.strings.join([flat, tf.where(last, "", "\x00")])
  return tf.strings.reduce_join(parts.with_flat_values(flat), axis=-1)


def _sparse_lookup(keys: tf.Tensor, values: tf.Tensor, x: tf.Tensor,
                   default: tf.Tensor) -> tf.Tensor:
  """values[i] where keys[i] == x, else default; keys [K] sorted, K > 0."""
  pos = tf.minimum(tf.searchsorted(keys, x), tf.size(keys) - 1)
  return tf.where(tf.gather(keys, pos) == x, tf.gather(values, pos), default)


def _ragged_int64(ids: tf.RaggedTensor) -> tf.RaggedTensor:
  return ids.with_row_splits_dtype(tf.int64)


class GraphTokenizer(tf.Module):
  """XLNet SentencePiece tokenization as TensorFlow ops.

  `model` is the path of the SentencePiece model or its bytes; `lower` and
  `keep_accents` are those of `SentencePieceTokenizer`. Usable inside
  `tf.function` and saved with any module that holds it.

  Example (needs the model file):
    tok = GraphTokenizer("spiece.model", lower=True)
    tok.preprocess(tf.constant(["  ``Café''  au\\tlait "]))
    # [b'"cafe" au lait']
  """

  def __init__(self, model: Union[str, bytes], lower: bool = False,
               keep_accents: bool = False, name: str = None):
    super().__init__(name=name)
    proto = read_model(model)
    where = model if isinstance(model, str) else "model bytes"
    self.lower = bool(lower)
    self.keep_accents = bool(keep_accents)
    tables = unicode_tables()
    self._space_re = tables.space + "+"
    self._combining_re = tables.combining
    self._unassigned_re = tables.unassigned + "+"
    self._digit_comma_re = "(?s).*" + tables.digit + ","
    self._lower_multi = tables.lower_multi
    with tf.init_scope():
      self._lower_keys = tf.constant(tables.lower_keys)
      self._lower_values = tf.constant(tables.lower_values)
      self._case_starts = tf.constant(tables.case_starts)
      self._case_classes = tf.constant(tables.case_classes)
      try:
        split = split_model(proto)
        # Normalizes and finds unknown characters; a tracked resource.
        self._normalizer = tf_text.SentencepieceTokenizer(
            split.normalizer, out_type=tf.string)
        # Segments as sentencepiece 0.2 does (see the module docstring).
        self._segmenter = tf_text.FastSentencepieceTokenizer(split.segmenter)
        nul_pieces = self._normalizer.tokenize(tf.constant(["a\x00b"]))
        # sentencepiece's PieceToId: unknown strings get the unknown id.
        index = {piece: i for i, piece in enumerate(split.pieces)}
        unk = split.unk_id
        if len(index) < len(split.pieces):
          raise ValueError("a piece occurs twice")
      except (tf.errors.OpError, RuntimeError, ValueError) as e:
        raise TokenizerError(
            f"{where}: not a SentencePiece model ({e})") from None
      # id -> piece; the re-split's PieceToId(piece without its leading "▁")
      # where that is a piece (-1: a sentinel key).
      self._pieces = tf.constant(split.pieces)
      strip = {i: index[p[1:]] for i, p in enumerate(split.pieces)
               if p[:1] == SPIECE_UNDERLINE and p[1:] in index}
      self._strip_keys = tf.constant([-1, *strip], tf.int32)
      self._strip_values = tf.constant([unk, *strip.values()], tf.int32)
    self._unk_id, self._comma_id = unk, index.get(",", unk)
    for symbol, expected in SPECIAL_SYMBOLS.items():
      if index.get(symbol, unk) != expected:
        raise TokenizerError(
            f"{where}: {symbol} has id {index.get(symbol, unk)}, XLNet needs "
            f"{expected} (train it with XLNet's special symbols)")
    if (b"\x00" not in nul_pieces.flat_values.numpy().tolist()
        or index.get("\x00", unk) != 0):
      # `_segment` stands U+0000 in for unknown characters.
      raise TokenizerError(
          f"{where}: U+0000 must stay an unknown character of the model")

  @property
  def vocab_size(self) -> int:
    return self._segmenter.vocab_size()

  def preprocess(self, texts: tf.Tensor) -> tf.Tensor:
    """`preprocess_text` of each string: tf.string [B] -> tf.string [B]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    texts = tf.strings.regex_replace(texts, self._space_re, " ")
    texts = tf.strings.regex_replace(texts, r"\A | \z", "")
    texts = tf.strings.regex_replace(texts, "``", '"')
    texts = tf.strings.regex_replace(texts, "''", '"')
    if not self.keep_accents:
      # regex_split stops at U+0000: normalize between them.
      parts = tf.strings.split(texts, sep="\x00")
      flat = self._nfkd(parts.flat_values)
      flat = tf.strings.regex_replace(flat, self._combining_re, "")
      texts = _join_with_nul(parts.with_flat_values(flat))
    if self.lower:
      texts = self._lower(texts)
    return texts

  def _nfkd(self, texts: tf.Tensor) -> tf.Tensor:
    # ICU knows characters Python 3.11 does not: keep those runs as they are.
    parts = tf_text.regex_split(texts, self._unassigned_re,
                                self._unassigned_re)
    flat = parts.flat_values
    kept = tf.strings.regex_full_match(flat, self._unassigned_re)
    flat = tf.where(kept, flat, tf_text.normalize_utf8(flat, "NFKD"))
    return tf.strings.reduce_join(parts.with_flat_values(flat), axis=-1)

  def _lower(self, texts: tf.Tensor) -> tf.Tensor:
    """`str.lower` of each string, on code points."""
    cps = tf.strings.unicode_decode(texts, "UTF-8")
    flat = cps.flat_values
    n = tf.size(flat, out_type=tf.int64)
    lowered = _sparse_lookup(self._lower_keys, self._lower_values, flat, flat)
    # A capital sigma is final when the nearest code point before it that is
    # not case-ignorable is cased, and the nearest one after it is not.
    run = tf.searchsorted(self._case_starts, flat, side="right") - 1
    cls = tf.concat([tf.gather(self._case_classes, run), [_NEITHER]], 0)
    stop = tf.not_equal(cls[:-1], _CASE_IGNORABLE)
    stops = tf.concat([tf.boolean_mask(tf.range(n), stop), [n]], 0)
    before = tf.cumsum(tf.cast(stop, tf.int64), exclusive=True)
    prev = tf.gather(stops, tf.maximum(before - 1, 0))
    nxt = tf.gather(stops, before + tf.cast(stop, tf.int64))
    rows = cps.value_rowids()
    cased_before = ((before > 0) & (prev >= tf.gather(cps.row_starts(), rows))
                    & tf.equal(tf.gather(cls, prev), _CASED))
    cased_after = ((nxt < tf.gather(cps.row_limits(), rows))
                   & tf.equal(tf.gather(cls, nxt), _CASED))
    sigma = tf.where(cased_before & ~cased_after, _FINAL_SIGMA, _SMALL_SIGMA)
    lowered = tf.where(tf.equal(flat, _CAPITAL_SIGMA), sigma, lowered)
    texts = tf.strings.unicode_encode(cps.with_flat_values(lowered), "UTF-8")
    for upper, lower in self._lower_multi:
      texts = tf.strings.regex_replace(
          texts, f"\\x{{{ord(upper):X}}}", lower.replace("\\", "\\\\"))
    return texts

  def _segment(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """SentencePiece ids of texts: tf.string [B] -> tf.int32 [B, (n)]."""
    # The older sentencepiece inside SentencepieceTokenizer breaks ties
    # between equal-score segmentations otherwise than sentencepiece 0.2, so
    # it only normalizes and finds unknown characters here.
    pieces = self._normalizer.tokenize(texts)
    flat = pieces.flat_values
    # The fast encoder charges an unknown character once per UTF-8 byte,
    # sentencepiece once per character: make each one byte long (U+0000 is
    # unknown too and normalizes to itself) so that path scores, and their
    # float rounding, agree.
    flat = tf.where(tf.equal(self._normalizer.string_to_id(flat), 0),
                    tf.strings.regex_replace(flat, "(?s).", "\x00"), flat)
    normalized = tf.strings.reduce_join(pieces.with_flat_values(flat),
                                        axis=-1)
    normalized = tf.strings.regex_replace(normalized, SPIECE_UNDERLINE, " ")
    return _ragged_int64(self._segmenter.tokenize(normalized))

  def encode_ids(self, texts: tf.Tensor,
                 preprocess: bool = True) -> tf.RaggedTensor:
    """Ids as `SentencePieceTokenizer.encode_ids`: tf.string [B] ->
    tf.int32 [B, (n)]. Any rank-1 string tensor; see also `tokenize`."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if preprocess:
      texts = self.preprocess(texts)
    ids = self._segment(texts)
    flat = ids.flat_values
    n = tf.size(flat, out_type=tf.int64)
    # Unknown pieces come back as "<unk>"; they hold no digit nor comma.
    pieces = tf.gather(self._pieces, flat)
    split = tf.strings.regex_full_match(pieces, self._digit_comma_re)
    picked = tf.boolean_mask(pieces, split)
    m = tf.size(picked, out_type=tf.int64)
    opens_word = tf.strings.regex_full_match(picked, "(?s)\u2581.*")
    # The number without its comma and without any "▁", tokenized afresh.
    sub = self._segment(
        tf.strings.regex_replace(picked, SPIECE_UNDERLINE + "|,\\z", ""))
    values, rows = sub.flat_values, sub.value_rowids()
    first = (tf.range(tf.size(values, out_type=tf.int64))
             == tf.gather(sub.row_starts(), rows))
    sub_pieces = tf.gather(self._pieces, values)
    # A piece that continued a word must not open one in its re-encoding.
    strip = (first & ~tf.gather(opens_word, rows)
             & tf.strings.regex_full_match(sub_pieces, "(?s)\u2581.*"))
    stripped = tf.strings.regex_replace(sub_pieces, "\\A\u2581", "")
    values = tf.where(strip, _sparse_lookup(self._strip_keys,
                                            self._strip_values, values,
                                            self._unk_id), values)
    keep = ~(strip & tf.equal(stripped, ""))
    resplit = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(values, keep), tf.boolean_mask(rows, keep), nrows=m)
    commas = tf.RaggedTensor.from_row_lengths(
        tf.fill([m], tf.constant(self._comma_id, tf.int32)),
        tf.ones([m], tf.int64))
    resplit = tf.concat([resplit, commas], axis=1)
    # Row i of `options` is piece i alone; row n + j the j-th re-split.
    options = tf.concat(
        [tf.RaggedTensor.from_row_lengths(flat, tf.ones([n], tf.int64)),
         resplit], axis=0)
    choice = tf.where(split, n + tf.cumsum(tf.cast(split, tf.int64)) - 1,
                      tf.range(n))
    return ids.with_flat_values(tf.gather(options, choice)).merge_dims(1, 2)

  def encode_pieces(self, texts: tf.Tensor,
                    preprocess: bool = True) -> tf.RaggedTensor:
    """Pieces of `encode_ids`: tf.string [B] -> tf.string [B, (n)]. Unlike
    `SentencePieceTokenizer.encode_pieces`, an unknown piece reads "<unk>"."""
    return tf.gather(self._pieces, self.encode_ids(texts, preprocess))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)],
               autograph=False)
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """`encode_ids` as a saved function: tf.string [B] -> tf.int32 [B, (n)].

    Example (needs the model file):
      GraphTokenizer("spiece.model").tokenize(tf.constant(["In 1,234, x"]))
      # <tf.RaggedTensor [[67, 17, 13810, 3489, 19, 3512]]>: the pieces
      # "▁In" "▁" "1,2" "34" "," "▁x" ("▁1,234," re-split)
    """
    return self.encode_ids(texts)

  def decode(self, ids) -> tf.Tensor:
    """Text of ids as sentencepiece's `DecodeIds`: int [B, (n)] -> tf.string
    [B]. The fast encoder's decoder: a second SentencePiece op in the same
    SavedModel would share the first one's model when loaded."""
    return self._segmenter.detokenize(ids)

  def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
    return self.tokenize(texts)
