"""SavedModel export of a token classifier, with a raw-text signature that
tokenizes in the graph and answers in character offsets.

Signatures of an export (`export_token_classifier`):
  serving_default  input_ids, segment_ids int32 [B, L], input_mask float32
                   [B, L] (1 = padding) -> logits [B, L, C], probabilities
                   [B, L, C], tag_ids int32 [B, L] (argmax), tags string
                   [B, L] (the label of tag_ids)
  serve_features   the same at any length T <= L ([B, T] in, [B, T, C] and
                   [B, T] out): windows of `sentence_windows` with some or
                   all of their leading padding columns cut; a position
                   that is not padding gets serving_default's answer
  serve_text       text string [B] -> per text, padded to the batch's
                   largest count (W words, E entities):
                     num_words int32 [B]
                     words string [B, W]                  ("" on padding)
                     word_starts, word_ends int32 [B, W]  (-1 on padding)
                     tags string [B, W]                   ("" on padding)
                     tag_ids int32 [B, W]                 (-1 on padding)
                     num_entities int32 [B]
                     entity_types, entity_texts string [B, E]  ("")
                     entity_starts, entity_ends int32 [B, E]   (-1)
Offsets count characters (code points), end exclusive, as in
`data_utils.ner.text`: `text[start:end]` is the word or the entity.

`serve_text` is the Python path as TensorFlow ops:
  words     `text.words_with_offsets`: runs of code points that are not
            Python-`str.isspace` (the tokenizer's RE2 class, tested per code
            point: `regex_split` would stop at U+0000)
  pieces    `alignment.WordPieces`: each word tokenized alone by the
            `GraphTokenizer`; an empty result is the id of '▁'
  windows   `features.sentence_windows` without document context (L - 2
            pieces, `doc_stride` apart, LEFT padding); all windows of the
            batch go through the model in one call
  tags      each word's, at its first piece, from the window that
            `windows.best_windows` picks for that piece (`merge_words`)
  entities  `text.entity_spans` of the tags (conlleval's reading)
The window and entity rules are not written twice: the spans and the
window choice are `windows.py`'s own functions run on
`tf.experimental.numpy`, a window's row is a table `sentence_windows` wrote
(`window_rows`), and conlleval's rules a table of `schemes._boundary`
(`schemes.boundary_table`).
Every word gets exactly one tag; an empty text has no words. The TF Text
ops must be registered before loading: `import tensorflow_text` first.
Without `serve_text` (`text_signatures=False`: the features export) only
TensorFlow's own ops are used; given the SentencePiece model, both carry it
and the marker's `batch` entry (`export.directory.save_atomically`).
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.errors import UsageError
from data_utils.graph_tokenizer import GraphTokenizer, unicode_tables
from data_utils.ner import windows
from data_utils.ner.alignment import AlignedSentence, WordPieces
from data_utils.ner.features import NerFeatureSettings, sentence_windows
from data_utils.ner.schemes import (PREFIX_CODES, boundary_table, split_tag,
                                    tag_problem)
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.export.directory import check_export_dir, save_atomically
from xlnet_tf.tasks.base import feature_specs, signature, string_spec
from xlnet_tf.tasks.token_classification.formats import EXPORT_KIND

# numpy's names on TF ops: `windows.py`'s rules run in the graph on it.
tnp = tf.experimental.numpy
_O = PREFIX_CODES.index("O")


def label_tables(labels: Sequence[str]):
  """`(prefix code per label, type index per label (-1 for O), types)` of
  a label list; a tag no scheme has is a UsageError.

  Example:
    >>> label_tables(["O", "B-PER", "I-PER", "B-LOC"])
    ([0, 1, 2, 1], [-1, 1, 1, 0], ['LOC', 'PER'])
  """
  types = sorted({split_tag(t)[1] for t in labels if t != "O"})
  prefixes, type_ids = [], []
  for tag in labels:
    problem = tag_problem(tag)
    if problem:
      raise UsageError(f"label list: {problem}")
    prefix, entity_type = split_tag(tag)
    prefixes.append(PREFIX_CODES.index(prefix))
    type_ids.append(types.index(entity_type) if entity_type else -1)
  return prefixes, type_ids, types


def split_words(texts: tf.Tensor, space_class: str) -> dict:
  """`words_with_offsets` of each text, flat over the batch: tf.string [B]
  -> `words` [N] string, `rows` [N] (the text of each word), `starts`,
  `ends` [N] (character offsets in its text), `first_char`, `last_char`
  [N] (indices into `chars`), `chars` [total code points] string (the
  texts' code points, concatenated), `splits` [B + 1] (the words of text b
  are `splits[b]:splits[b + 1]`); all int64."""
  by_text = tf.strings.unicode_split(texts, "UTF-8")
  chars = by_text.flat_values
  index = tf.range(tf.size(chars, out_type=tf.int64))
  space = tf.strings.regex_full_match(chars, space_class)
  row_start = tf.gather(by_text.row_starts(), by_text.value_rowids())
  row_limit = tf.gather(by_text.row_limits(), by_text.value_rowids())
  # A text's ends count as space on either side of it.
  space_before = (tf.gather(tf.concat([[True], space], 0), index)
                  | tf.equal(index, row_start))
  space_after = (tf.gather(tf.concat([space, [True]], 0), index + 1)
                 | tf.equal(index + 1, row_limit))
  first = tf.boolean_mask(index, ~space & space_before)
  last = tf.boolean_mask(index, ~space & space_after)
  rows = tf.gather(by_text.value_rowids(), first)
  offset = tf.gather(row_start, first)
  splits = tf.RaggedTensor.from_value_rowids(
      first, rows, nrows=tf.shape(texts, out_type=tf.int64)[0]).row_splits
  return {"words": _join_chars(chars, first, last), "rows": rows,
          "starts": first - offset, "ends": last + 1 - offset,
          "first_char": first, "last_char": last, "chars": chars,
          "splits": splits}


def _join_chars(chars: tf.Tensor, first: tf.Tensor, last: tf.Tensor):
  """The strings `chars[first[i]:last[i] + 1]` joined: [N] string."""
  return tf.strings.reduce_join(
      tf.gather(chars, tf.ragged.range(first, last + 1)), axis=-1)


def window_count(n_pieces: tf.Tensor, size: int, doc_stride: int):
  """`windows.window_count` of each n (int64) in the graph."""
  return windows.window_count(n_pieces, size, doc_stride, tnp)


@functools.lru_cache(maxsize=None)
def window_rows(max_seq_length: int) -> dict:
  """The row `features.sentence_windows` lays out for a window of h pieces
  without context, for every h in [0, L - 2], so that the graph lays its
  windows out by that rule: `input_ids`, `segment_ids` int32 and
  `input_mask` float32 [L - 1, L] (a piece written as -1 - its index in
  the window), and `row_of` int32 [L - 1, L - 2], the row position of each
  piece (-1 past h). Read-only arrays."""
  length = max_seq_length
  one_window = NerFeatureSettings(length, length - 2)
  found = {k: [] for k in ("input_ids", "segment_ids", "input_mask")}
  for held in range(length - 1):
    # Each piece its own word; its id marks it: -1 - its index.
    aligned = AlignedSentence(
        pieces=[""] * held, input_ids=list(range(-1, -1 - held, -1)),
        piece_words=list(range(held)), word_starts=list(range(held)),
        label_ids=[])
    (window,) = sentence_windows(aligned, one_window)
    for key, rows in found.items():
      rows.append(getattr(window, key))
  out = {k: np.array(v, np.float32 if k == "input_mask" else np.int32)
         for k, v in found.items()}
  out["row_of"] = np.full([length - 1, length - 2], -1, np.int32)
  held, row = np.nonzero(out["input_ids"] < 0)
  out["row_of"][held, -1 - out["input_ids"][held, row]] = row
  for table in out.values():
    table.setflags(write=False)
  return out


def window_features(piece_ids: tf.Tensor, text_start: tf.Tensor,
                    n_pieces: tf.Tensor, max_seq_length: int,
                    doc_stride: int):
  """`features.sentence_windows` (no context) of every text: `piece_ids`
  [P] (all texts' pieces, concatenated), `text_start`, `n_pieces` [B] int64
  -> `(features {input_ids, segment_ids, input_mask} [T, L], n_windows [B]
  int64)`, the windows of text b in order after those of texts < b."""
  rows, size = window_rows(max_seq_length), max_seq_length - 2
  n_windows = window_count(n_pieces, size, doc_stride)
  ks = tf.ragged.range(n_windows)
  text = ks.value_rowids()
  start = windows.window_start(ks.flat_values, doc_stride)
  held = windows.window_end(start, tf.gather(n_pieces, text), size,
                            tnp) - start
  layout = tf.gather(rows["input_ids"], held)
  source = (tf.gather(text_start, text) + start)[:, None] + tf.cast(
      -1 - layout, tf.int64)
  # One id more so that an empty batch of pieces still has one to gather.
  ids = tf.concat([tf.cast(piece_ids, tf.int32), [0]], 0)
  pieces = tf.gather(ids, tf.clip_by_value(source, 0, tf.size(
      piece_ids, out_type=tf.int64)))
  features = {"input_ids": tf.where(layout < 0, pieces, layout),
              "segment_ids": tf.gather(rows["segment_ids"], held),
              "input_mask": tf.gather(rows["input_mask"], held)}
  return features, n_windows


def best_window_positions(piece: tf.Tensor, n_pieces: tf.Tensor,
                          max_seq_length: int, doc_stride: int):
  """For pieces at `piece` [N] in texts of `n_pieces` [N] pieces (int64):
  `(window index in its text, position in that window's row)` [N] int64 of
  the window `windows.best_windows` picks (most context, earlier on a
  tie)."""
  size = max_seq_length - 2
  best = windows.best_window(piece, n_pieces, size, doc_stride, tnp)
  start = windows.window_start(best, doc_stride)
  held = windows.window_end(start, n_pieces, size, tnp) - start
  position = tf.gather_nd(window_rows(max_seq_length)["row_of"],
                          tf.stack([held, piece - start], 1))
  return best, tf.cast(position, tf.int64)


def entity_words(tag_ids: tf.Tensor, first_of_text: tf.Tensor,
                 last_of_text: tf.Tensor, prefixes: tf.Tensor,
                 type_ids: tf.Tensor):
  """conlleval's entities (`schemes.entities`) of per-word `tag_ids` [N]
  (texts concatenated; `first_of_text`, `last_of_text` [N] bool mark their
  bounds) -> `(first word, last word)` [M] int64 of each entity, in order.

  `entities`' loop on all words at once, its two rules read from
  `schemes.boundary_table`: after word i an entity is open exactly when
  the last word j <= i where one starts or ends (or a text begins) starts
  one; it runs from j to the word before the next end (or the text's end).
  """
  ends_table, starts_table = boundary_table()
  prefix = tf.gather(prefixes, tag_ids)
  word_type = tf.gather(type_ids, tag_ids)
  index = tf.range(tf.size(tag_ids, out_type=tf.int64))
  # A text starts after an O (type -1), as `entities` does. (Gathers rather
  # than slices: they also hold for no words at all.)
  prev = tf.where(first_of_text, _O,
                  tf.gather(tf.concat([[_O], prefix], 0), index))
  prev_type = tf.where(first_of_text, -1,
                       tf.gather(tf.concat([[-1], word_type], 0), index))
  case = tf.stack([prev, prefix, tf.cast(tf.not_equal(word_type, prev_type),
                                         prefix.dtype)], 1)
  ends = tf.gather_nd(ends_table, case)
  starts = tf.gather_nd(starts_table, case)
  event = starts | ends | first_of_text
  last_event = tf.gather(tf.boolean_mask(index, event),
                         tf.cumsum(tf.cast(event, tf.int64)) - 1)
  closes = tf.gather(starts, last_event) & (
      tf.gather(tf.concat([ends, [True]], 0), index + 1) | last_of_text)
  return tf.boolean_mask(last_event, closes), tf.boolean_mask(index, closes)


def _per_text(rows: tf.Tensor, nrows: tf.Tensor, count_name: str,
              columns: dict) -> dict:
  """Items of texts `rows` [N] (in order) -> `{name: [nrows, max count]}`
  from `columns` `{name: (values [N], padding value)}` (int64 as int32),
  plus `count_name`: int32 [nrows] items per text."""
  out = {}
  for name, (values, default) in columns.items():
    if values.dtype == tf.int64:
      values = tf.cast(values, tf.int32)
    ragged = tf.RaggedTensor.from_value_rowids(values, rows, nrows=nrows)
    out[name] = ragged.to_tensor(default_value=default)
  out[count_name] = tf.cast(ragged.row_lengths(), tf.int32)
  return out


class TokenClassifierServer(tf.Module):
  """The exported object: the model, the tokenizer and the signatures."""

  def __init__(self, model, max_seq_length: int, doc_stride: int,
               labels: Sequence[str], tokenizer: Optional[GraphTokenizer] = None,
               empty_word_id: int = 0):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length
    self.doc_stride = doc_stride
    self.tokenizer = tokenizer
    self.empty_word_id = empty_word_id
    prefixes, type_ids, types = label_tables(labels)
    self.labels = tf.constant(list(labels))
    self.prefixes = tf.constant(prefixes, tf.int32)
    self.type_ids = tf.constant(type_ids, tf.int32)
    self.types = tf.constant(types + [""])
    self.space_class = unicode_tables().space

  def serve_features(self, input_ids, segment_ids, input_mask):
    out = self.model({"input_ids": input_ids, "segment_ids": segment_ids,
                      "input_mask": input_mask}, training=False)
    tag_ids = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "tag_ids": tag_ids, "tags": tf.gather(self.labels, tag_ids)}

  def serve_text(self, text):
    words = split_words(text, self.space_class)
    rows, splits = words["rows"], words["splits"]
    tag_ids = self._word_tag_ids(words)
    index = tf.range(tf.size(rows, out_type=tf.int64))
    first, last = entity_words(
        tag_ids, tf.equal(index, tf.gather(splits, rows)),
        tf.equal(index + 1, tf.gather(splits, rows + 1)), self.prefixes,
        self.type_ids)
    nrows = tf.size(splits, out_type=tf.int64) - 1
    out = _per_text(rows, nrows, "num_words", {
        "words": (words["words"], ""),
        "word_starts": (words["starts"], -1),
        "word_ends": (words["ends"], -1),
        "tags": (tf.gather(self.labels, tag_ids), ""),
        "tag_ids": (tag_ids, -1)})
    out.update(_per_text(tf.gather(rows, first), nrows, "num_entities", {
        "entity_types": (tf.gather(self.types, tf.gather(
            self.type_ids, tf.gather(tag_ids, last))), ""),
        "entity_texts": (_join_chars(
            words["chars"], tf.gather(words["first_char"], first),
            tf.gather(words["last_char"], last)), ""),
        "entity_starts": (tf.gather(words["starts"], first), -1),
        "entity_ends": (tf.gather(words["ends"], last), -1)}))
    return out

  def _word_tag_ids(self, words: dict) -> tf.Tensor:
    """The tag id of each word of `split_words`: int32 [N]."""
    rows, splits = words["rows"], words["splits"]
    ids = tf.cast(self.tokenizer.encode_ids(words["words"]), tf.int32)
    # A word preprocessing empties still gets a piece (`WordPieces`).
    empty = tf.equal(ids.row_lengths(), 0)
    ids = tf.concat([ids, tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.math.count_nonzero(empty)], self.empty_word_id),
        tf.cast(empty, tf.int64))], axis=1)
    bounds = tf.gather(ids.row_splits, splits)
    text_start, n_pieces = bounds[:-1], bounds[1:] - bounds[:-1]
    features, n_windows = window_features(
        ids.flat_values, text_start, n_pieces, self.max_seq_length,
        self.doc_stride)
    logits = self.model(features, training=False)["logits"]
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    # At each word's first piece, in the window best for that piece.
    window, position = best_window_positions(
        ids.row_starts() - tf.gather(text_start, rows),
        tf.gather(n_pieces, rows), self.max_seq_length, self.doc_stride)
    window += tf.gather(tf.cumsum(n_windows, exclusive=True), rows)
    return tf.gather_nd(predicted, tf.stack([window, position], 1))

  def signatures(self) -> dict:
    length = self.max_seq_length
    # Real positions never attend padding and see each other at the same
    # relative distances: cutting leading padding changes no answer.
    sigs = {"serving_default": signature(self.serve_features,
                                         *feature_specs([None, length])),
            "serve_features": signature(self.serve_features,
                                        *feature_specs([None, None]))}
    if self.tokenizer is not None:
      sigs["serve_text"] = signature(self.serve_text, string_spec("text"))
    return sigs


def export_token_classifier(model, export_dir: str, max_seq_length: int,
                            doc_stride: int, labels: Sequence[str],
                            sp_model_path: Optional[str] = None,
                            lower: bool = False,
                            text_signatures: bool = True,
                            document_context: bool = False) -> str:
  """Exports an `XLNetForTokenClassification` (`labels[i]` = class i, IOB2)
  through `directory.save_atomically`; with `sp_model_path` (and `lower`,
  as the run tokenized) a copy of it and the marker's `batch` entry, and
  unless `text_signatures` is False the raw-text signature `serve_text`.
  `document_context`: the model was trained reading sentences after their
  document's preceding words (`run_ner.py --document_context`); the
  `batch` entry records it, so that batch prediction reads CoNLL
  sentences the same way (`serve_text` reads one text alone, as a
  document's first sentence is read). Returns `export_dir`."""
  check_export_dir(export_dir, EXPORT_KIND)
  NerFeatureSettings(max_seq_length, doc_stride).validate()
  if len(labels) != model.n_class:
    raise UsageError(f"label list: {len(labels)} labels for a model of "
                     f"{model.n_class} classes")
  tokenizer, empty_word_id = None, 0
  if sp_model_path and text_signatures:
    tokenizer = GraphTokenizer(sp_model_path, lower=lower)
    word_pieces = WordPieces(SentencePieceTokenizer(sp_model_path,
                                                    lower=lower))
    empty_word_id = word_pieces.ids(word_pieces.empty_word)[0]
  server = TokenClassifierServer(model, max_seq_length, doc_stride, labels,
                                 tokenizer, empty_word_id)
  batch = dict(lower=bool(lower), max_seq_length=max_seq_length,
               signature="serve_features", doc_stride=doc_stride,
               document_context=bool(document_context),
               labels=[str(x) for x in labels])
  return save_atomically(server, server.signatures(), export_dir, EXPORT_KIND,
                         sp_model_path, batch)
