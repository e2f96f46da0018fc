"""In-graph XLNet tokenization for SavedModel export.

`GraphTokenizer` owns the TensorFlow-op version of
`tokenization.SentencePieceTokenizer.encode_ids`: `preprocess_text`, the
SentencePiece model (a `tensorflow_text.SentencepieceTokenizer` resource that
is tracked, so it is saved with the module) and the "digit," re-split. It
takes a batch of strings, `tf.string [B]`, and returns `tf.int32 [B, (n)]`
ragged ids; no Python runs at call time.

Exactness. The Unicode tests of `preprocess_text` and of the re-split
(`str.isspace`, `unicodedata.combining`, `str.isdigit`, `str.lower`) are
compiled at construction into RE2 character classes and a code-point table
drawn from this Python's own Unicode database (14.0 for Python 3.11), so
they agree code point for code point. RE2's categories would not: `\\p{Mn}`
matches 1098 code points with combining class 0 (e.g. U+0F71, U+1BE6) and
misses 25 with a nonzero class (spacing marks of category Mc such as
U+1D165; U+1734); `\\s` is ASCII only where `str.split()` also splits at
U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000 and
U+001C-U+001F. The ICU-backed ops need three repairs, each exact:
  * `tensorflow_text.normalize_utf8` (ICU with Unicode 16) decomposes 118
    code points that Python 3.11 has as unassigned (e.g. U+1CCD6, an
    "outlined A" that would become "A"). Runs of code points unassigned in
    Python are split off first and kept unnormalized; since Python treats
    them as starters without decomposition, NFKD of the rest is the same.
  * `tf.strings.lower(..., encoding="utf-8")` (ICU with Unicode 13) leaves
    the 40 capitals added in Unicode 14 (U+2C2F, U+A7C0, U+A7D0, U+A7D6,
    U+A7D8, U+10570-U+10595) unchanged; a table of Python's one-to-one
    lower-case mappings is applied after it. ICU still does the contextual
    final sigma and U+0130 -> "i\\u0307", as `str.lower` does.
    (`tensorflow_text.case_fold_utf8` is not a lower-casing: it applies NFKC
    and full case folding, "ß" -> "ss"; 9407 code points differ.)
  * `tf.strings.lower` truncates a string at U+0000; the text is lowered
    between U+0000s, which are also boundaries of the final-sigma rule.
What remains: ICU's Unicode 13 case properties decide the final-sigma
context, so a capital sigma next to a letter or mark new in Unicode 14 can
lower differently (theoretical; never seen in the data below). Measured
against `SentencePieceTokenizer.encode_ids` (tests/test_graph_tokenizer.py),
ids differ on 0 of 2000 corpus paragraphs, 0 of 872 SST-2 dev sentences and
0 of 400 IMDB reviews, cased and uncased; `preprocess` equals
`preprocess_text` on every code point, alone and in context.

Not covered: subword sampling (`encode_ids(sample=True)`) and
`remove_space=False`.

Example (needs the model file):
  tok = GraphTokenizer("spiece.model")
  tok.tokenize(tf.constant(["born in 2000, and"]))
  # <tf.RaggedTensor [[2081, 25, 2038, 19, 21]]> -- pieces
  # ['▁born', '▁in', '▁2000', ',', '▁and'], as the Python path gives
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import List, NamedTuple, Tuple, Union

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_utils.tokenization import (SPECIAL_SYMBOLS, SPIECE_UNDERLINE,
                                     TokenizerError)

class _UnicodeTables(NamedTuple):
  space: str        # RE2 class: str.isspace
  combining: str    # RE2 class: unicodedata.combining(c) != 0
  digit: str        # RE2 class: str.isdigit
  unassigned: str   # RE2 class: category Cn (Python leaves these alone)
  lower_keys: np.ndarray    # int32, sorted code points ...
  lower_values: np.ndarray  # ... and their one-code-point str.lower


def _re2_class(ranges: List[Tuple[int, int]]) -> str:
  parts = []
  for lo, hi in ranges:
    parts.append(f"\\x{{{lo:X}}}" if lo == hi
                 else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
  return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def unicode_tables() -> _UnicodeTables:
  """This Python's Unicode data as RE2 classes and a lowercase table (one
  pass over all code points, about a second; cached)."""
  names = ("space", "combining", "digit", "unassigned")
  ranges = {name: [] for name in names}
  keys, values = [], []

  def add(name, cp):
    r = ranges[name]
    if r and r[-1][1] == cp - 1:
      r[-1] = (r[-1][0], cp)
    else:
      r.append((cp, cp))

  for cp in range(sys.maxunicode + 1):
    if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in UTF-8
      continue
    c = chr(cp)
    if c.isspace():
      add("space", cp)
    if unicodedata.combining(c):
      add("combining", cp)
    if c.isdigit():
      add("digit", cp)
    if unicodedata.category(c) == "Cn":
      add("unassigned", cp)
    low = c.lower()
    # Sigma is contextual and U+0130 maps to two code points: ICU does both.
    if low != c and len(low) == 1 and c != "\u03a3":
      keys.append(cp)
      values.append(ord(low))
  return _UnicodeTables(
      *(_re2_class(ranges[name]) for name in names),
      lower_keys=np.asarray(keys, np.int32),
      lower_values=np.asarray(values, np.int32))


def _read_model(model: Union[str, bytes]) -> bytes:
  if isinstance(model, bytes):
    return model
  if not tf.io.gfile.exists(model):
    raise TokenizerError(f"{model}: SentencePiece model not found")
  with tf.io.gfile.GFile(model, "rb") as f:
    return f.read()


def _join_with_nul(parts: tf.RaggedTensor) -> tf.Tensor:
  """Inverse of `tf.strings.split(texts, sep="\\x00")` (reduce_join's
  `separator` attribute cannot hold U+0000)."""
  flat = parts.flat_values
  last = (tf.range(tf.size(flat, out_type=parts.row_splits.dtype))
          == tf.gather(parts.row_limits() - 1, parts.value_rowids()))
  flat = tf.strings.join([flat, tf.where(last, "", "\x00")])
  return tf.strings.reduce_join(parts.with_flat_values(flat), axis=-1)


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
    proto = _read_model(model)
    where = model if isinstance(model, str) else "model bytes"
    self.lower = bool(lower)
    self.keep_accents = bool(keep_accents)
    tables = unicode_tables()
    self._space_re = tables.space + "+"
    self._combining_re = tables.combining
    self._unassigned_re = tables.unassigned + "+"
    self._digit_comma_re = "(?s).*" + tables.digit + ","
    with tf.init_scope():
      self._lower_keys = tf.constant(tables.lower_keys)
      self._lower_values = tf.constant(tables.lower_values)
      try:
        # SentencePiece's normalizer, its unknown characters and the
        # vocabulary both ways; a tracked resource.
        self._vocab = tf_text.SentencepieceTokenizer(proto,
                                                     out_type=tf.string)
        # Segments as sentencepiece 0.2 does (see the module docstring).
        self._segmenter = tf_text.FastSentencepieceTokenizer(proto)
        specials = self._vocab.string_to_id(
            tf.constant(list(SPECIAL_SYMBOLS))).numpy().tolist()
        self._comma_id = int(self._vocab.string_to_id(",").numpy())
      except (tf.errors.OpError, RuntimeError, ValueError) as e:
        raise TokenizerError(
            f"{where}: not a SentencePiece model ({e})") from None
    for (symbol, expected), got in zip(SPECIAL_SYMBOLS.items(), specials):
      if got != expected:
        raise TokenizerError(
            f"{where}: {symbol} has id {got}, XLNet needs {expected} (train "
            "it with XLNet's special symbols)")

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
    if self.keep_accents and not self.lower:
      return texts
    # regex_split and tf.strings.lower stop at U+0000: work between them.
    # U+0000 is a starter and neither cased nor case-ignorable, so NFKD and
    # the final-sigma rule give the same result part by part.
    parts = tf.strings.split(texts, sep="\x00")
    flat = parts.flat_values
    if not self.keep_accents:
      flat = self._nfkd(flat)
      flat = tf.strings.regex_replace(flat, self._combining_re, "")
    if self.lower:
      flat = self._lower(flat)
    return _join_with_nul(parts.with_flat_values(flat))

  def _nfkd(self, texts: tf.Tensor) -> tf.Tensor:
    # ICU knows characters Python 3.11 does not: keep those runs as they are.
    parts = tf_text.regex_split(texts, self._unassigned_re,
                                self._unassigned_re)
    flat = parts.flat_values
    kept = tf.strings.regex_full_match(flat, self._unassigned_re)
    flat = tf.where(kept, flat, tf_text.normalize_utf8(flat, "NFKD"))
    return tf.strings.reduce_join(parts.with_flat_values(flat), axis=-1)

  def _lower(self, texts: tf.Tensor) -> tf.Tensor:
    texts = tf.strings.lower(texts, encoding="utf-8")
    # Then Python's one-to-one mappings, for capitals ICU does not know yet.
    cps = tf.strings.unicode_decode(texts, "UTF-8")
    flat = cps.flat_values
    pos = tf.searchsorted(self._lower_keys, flat)
    pos = tf.minimum(pos, tf.size(self._lower_keys) - 1)
    hit = tf.gather(self._lower_keys, pos) == flat
    flat = tf.where(hit, tf.gather(self._lower_values, pos), flat)
    return tf.strings.unicode_encode(cps.with_flat_values(flat), "UTF-8")

  def _segment(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """SentencePiece ids of texts: tf.string [B] -> tf.int32 [B, (n)]."""
    # The older sentencepiece inside SentencepieceTokenizer breaks ties
    # between equal-score segmentations otherwise than sentencepiece 0.2, so
    # it only normalizes and finds unknown characters here.
    pieces = self._vocab.tokenize(texts)
    flat = pieces.flat_values
    # The fast encoder charges an unknown character once per UTF-8 byte,
    # sentencepiece once per character: make each one byte long (U+0000 is
    # unknown too and normalizes to itself) so that path scores, and their
    # float rounding, agree.
    flat = tf.where(tf.equal(self._vocab.string_to_id(flat), 0),
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
    pieces = self._vocab.id_to_string(flat)
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
    sub_pieces = self._vocab.id_to_string(values)
    # A piece that continued a word must not open one in its re-encoding.
    strip = (first & ~tf.gather(opens_word, rows)
             & tf.strings.regex_full_match(sub_pieces, "(?s)\u2581.*"))
    stripped = tf.strings.regex_replace(sub_pieces, "\\A\u2581", "")
    values = tf.where(strip, self._vocab.string_to_id(stripped), values)
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
    return self._vocab.id_to_string(self.encode_ids(texts, preprocess))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)],
               autograph=False)
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """`encode_ids` as a saved function: tf.string [B] -> tf.int32 [B, (n)].

    Example (needs the model file):
      GraphTokenizer("spiece.model").tokenize(tf.constant(["In 1,234, x"]))
      # pieces ['▁In', '▁1,234', ',', '▁', 'x'] -> their ids
    """
    return self.encode_ids(texts)

  def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
    return self.tokenize(texts)
