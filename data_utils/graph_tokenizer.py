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
    self._lower_keys = tf.constant(tables.lower_keys)
    self._lower_values = tf.constant(tables.lower_values)
    with tf.init_scope():
      try:
        self._sp = tf_text.SentencepieceTokenizer(proto, out_type=tf.string)
        specials = self._sp.string_to_id(
            tf.constant(list(SPECIAL_SYMBOLS))).numpy().tolist()
      except (tf.errors.InvalidArgumentError, tf.errors.InternalError) as e:
        raise TokenizerError(
            f"{where}: not a SentencePiece model ({e.message})") from None
    for (symbol, expected), got in zip(SPECIAL_SYMBOLS.items(), specials):
      if got != expected:
        raise TokenizerError(
            f"{where}: {symbol} has id {got}, XLNet needs {expected} (train "
            "it with XLNet's special symbols)")

  def preprocess(self, texts: tf.Tensor) -> tf.Tensor:
    """`preprocess_text` of each string: tf.string [B] -> tf.string [B]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    texts = tf.strings.regex_replace(texts, self._space_re, " ")
    texts = tf.strings.regex_replace(texts, r"\A | \z", "")
    texts = tf.strings.regex_replace(texts, "``", '"')
    texts = tf.strings.regex_replace(texts, "''", '"')
    if not self.keep_accents:
      texts = self._nfkd(texts)
      texts = tf.strings.regex_replace(texts, self._combining_re, "")
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
    # tf.strings.lower stops at U+0000: lower the text between them.
    parts = tf.strings.split(texts, sep="\x00")
    parts = parts.with_flat_values(
        tf.strings.lower(parts.flat_values, encoding="utf-8"))
    texts = tf.strings.reduce_join(parts, axis=-1, separator="\x00")
    # Then Python's one-to-one mappings, for capitals ICU does not know yet.
    cps = tf.strings.unicode_decode(texts, "UTF-8")
    flat = cps.flat_values
    pos = tf.searchsorted(self._lower_keys, flat)
    pos = tf.minimum(pos, tf.size(self._lower_keys) - 1)
    hit = tf.gather(self._lower_keys, pos) == flat
    flat = tf.where(hit, tf.gather(self._lower_values, pos), flat)
    return tf.strings.unicode_encode(cps.with_flat_values(flat), "UTF-8")

  def encode_pieces(self, texts: tf.Tensor,
                    preprocess: bool = True) -> tf.RaggedTensor:
    """Pieces as `SentencePieceTokenizer.encode_pieces`: tf.string [B] ->
    tf.string [B, (n)]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if preprocess:
      texts = self.preprocess(texts)
    pieces = self._sp.tokenize(texts)
    flat = pieces.flat_values
    n = tf.size(flat, out_type=tf.int64)
    split = tf.strings.regex_full_match(flat, self._digit_comma_re)
    picked = tf.boolean_mask(flat, split)
    m = tf.size(picked, out_type=tf.int64)
    opens_word = tf.strings.regex_full_match(picked, "(?s)\u2581.*")
    # The number without its comma and without any "▁", tokenized afresh.
    body = tf.strings.substr(picked, 0, tf.strings.length(picked) - 1)
    sub = self._sp.tokenize(
        tf.strings.regex_replace(body, SPIECE_UNDERLINE, ""))
    values, rows = sub.flat_values, sub.value_rowids()
    first = (tf.range(tf.size(values, out_type=tf.int64))
             == tf.gather(sub.row_starts(), rows))
    # A piece that continued a word must not open one in its re-encoding.
    strip = (first & ~tf.gather(opens_word, rows)
             & tf.strings.regex_full_match(values, "(?s)\u2581.*"))
    values = tf.where(
        strip, tf.strings.regex_replace(values, "\\A\u2581", ""), values)
    keep = ~(strip & tf.equal(values, ""))
    resplit = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(values, keep), tf.boolean_mask(rows, keep), nrows=m)
    commas = tf.RaggedTensor.from_row_lengths(
        tf.fill([m], ","), tf.ones([m], tf.int64))
    resplit = tf.concat([resplit, commas], axis=1)
    # Row i of `options` is piece i alone; row n + j the j-th re-split.
    options = tf.concat(
        [tf.RaggedTensor.from_row_lengths(flat, tf.ones([n], tf.int64)),
         resplit], axis=0)
    choice = tf.where(split, n + tf.cumsum(tf.cast(split, tf.int64)) - 1,
                      tf.range(n))
    spliced = pieces.with_flat_values(tf.gather(options, choice))
    return spliced.merge_dims(1, 2)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Ids as `SentencePieceTokenizer.encode_ids`: tf.string [B] ->
    tf.int32 [B, (n)]."""
    return self._sp.string_to_id(self.encode_pieces(texts))

  def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
    return self.tokenize(texts)
