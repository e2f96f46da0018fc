"""The data side of embeddings: a text's pieces with their character offsets,
the model's window layout, and the files the vectors are written to.

Pieces. `text_pieces` gives the pieces and ids of `tokenizer.encode_ids(text)`
and, for each, `start`/`end`: code-point offsets into the ORIGINAL text (end
exclusive), so `text[start:end]` is what the piece stands for (without its
"▁"; a lone "▁" has an empty span).

Layout. A text of n pieces is `pieces <sep> <cls>` (segment ids A A C, padding
segment 4 and id 0, as the classifier's features), LEFT padded to the batch's
length T: at most one window S = max_seq_length (a multiple of 8), or N * S
for N segments read with memory when the longest text needs more than one
window. `input_mask` is float32, 1 = padding.

Files (K chosen layers, D d_model, Q poolings):
  `.jsonl` output  the index: line i is text i,
                   {"index", "text", "pieces", "ids", "starts", "ends",
                    "rows": [first, end) or null, "layers"}; beside it
                   `<stem>.pieces.npy` float32 [total pieces, K, D] (text i
                   has rows `rows`) and `<stem>.<pooling>.npy` float32
                   [texts, K, D] per pooling.
  `.tfrecord`      one tf.train.Example per text: index, text, pieces, ids,
                   starts, ends, layers, d_model (int64/bytes lists),
                   piece_vectors (float [n * K * D]), `pooled/<pooling>`.
Every file appears whole or not at all (`data_utils.atomic.atomic_path`).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import unicodedata
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from data_utils import paths
from data_utils.atomic import atomic_path
from data_utils.errors import UserError
from data_utils.records import example_bytes, float_feature, int_feature
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_CLS, SEG_ID_PAD,
                                     SEP_ID, SPIECE_UNDERLINE)

ROUND_TO = 8  # one-window batches are padded to a multiple of this


class TextPieces(NamedTuple):
  text: str
  pieces: List[str]
  ids: List[int]
  starts: List[int]  # code points into `text`; -1 if unknown
  ends: List[int]


def normalized_with_sources(text: str, lower: bool = False,
                            keep_accents: bool = False
                            ) -> Tuple[str, List[Tuple[int, int]]]:
  """`preprocess_text(text)` built character by character: the normalized
  string and, per normalized character, the span `[start, end)` of `text`
  it comes from.

  Example:
    >>> text, sources = normalized_with_sources("  ``Café''  x")
    >>> text, sources[:2], sources[-3:]
    ('"Cafe" x', [(2, 4), (4, 5)], [(8, 10), (10, 12), (12, 13)])
  """
  chars: List[Tuple[str, int, int]] = []
  space = None
  for i, c in enumerate(text):  # whitespace runs -> one space, ends dropped
    if c.isspace():
      space = (space[0], i + 1) if space else (i, i + 1)
      continue
    if space and chars:
      chars.append((" ", *space))
    space = None
    chars.append((c, i, i + 1))
  quoted, k = [], 0
  while k < len(chars):  # `` and '' -> "
    pair = "".join(c for c, _, _ in chars[k:k + 2])
    if pair in ("``", "''"):
      quoted.append(('"', chars[k][1], chars[k + 1][2]))
      k += 2
    else:
      quoted.append(chars[k])
      k += 1
  out: List[Tuple[str, int, int]] = []
  for c, s, e in quoted:
    if not keep_accents:
      c = "".join(x for x in unicodedata.normalize("NFKD", c)
                  if not unicodedata.combining(x))
    if lower:
      c = c.lower()  # final sigma aside, as long as in context
    out.extend((x, s, e) for x in c)
  return "".join(c for c, _, _ in out), [(s, e) for _, s, e in out]


def _span(sources, normalized: str, s: int, e: int, n_text: int):
  """Normalized span `[s, e)` (leading spaces dropped) -> original span."""
  while s < e and normalized[s] == " ":
    s += 1
  if s == e:
    at = sources[s][0] if s < len(sources) else n_text
    return at, at
  return sources[s][0], sources[e - 1][1]


def text_pieces(tokenizer, text: str) -> TextPieces:
  """Pieces, ids and original-text offsets of `text` (see the module doc).
  `tokenizer`: a `data_utils.tokenization.SentencePieceTokenizer`."""
  normalized, sources = normalized_with_sources(
      text, tokenizer.lower, tokenizer.keep_accents)
  pieces = tokenizer.encode_pieces(text)
  ids = [tokenizer.sp.PieceToId(p) for p in pieces]
  starts, ends = [-1] * len(pieces), [-1] * len(pieces)
  if normalized != tokenizer.preprocess(text):
    if len(normalized) != len(tokenizer.preprocess(text)):
      return TextPieces(text, pieces, ids, starts, ends)
    normalized = tokenizer.preprocess(text)  # only a final sigma differs
  raw = tokenizer.sp.EncodeAsOffsetMapping(normalized)
  j = 0
  for piece, (s, e) in zip(raw["pieces"], raw["offsets"]):
    if j < len(pieces) and pieces[j] == piece:
      starts[j], ends[j] = _span(sources, normalized, s, e, len(text))
      j += 1
      continue
    # A "digit," piece re-split (`encode_pieces`): its parts share its
    # characters, in order.
    body = len(piece.replace(SPIECE_UNDERLINE, ""))
    s0, e0 = _span(sources, normalized, s, e, len(text))
    whole = len(normalized[s:e].lstrip(" ")) == body
    at, used = s, 0
    while j < len(pieces) and (used < body or used == 0):
      width = len(pieces[j].replace(SPIECE_UNDERLINE, ""))
      if whole:
        begin = at + len(normalized[at:e]) - len(normalized[at:e].lstrip(" "))
        starts[j], ends[j] = _span(sources, normalized, begin,
                                   begin + width, len(text))
        at = begin + width
      else:
        starts[j], ends[j] = s0, e0
      used += width
      j += 1
  if j != len(pieces):
    return TextPieces(text, pieces, ids, [-1] * len(pieces),
                      [-1] * len(pieces))
  return TextPieces(text, pieces, ids, starts, ends)


def layout_length(counts: Sequence[int], segment_length: int,
                  full_windows: bool = False) -> int:
  """The padded length T of a batch whose texts have `counts` pieces.

  Example:
    >>> layout_length([3, 10], 16), layout_length([3], 16, True)
    (16, 16)
    >>> layout_length([3], 16), layout_length([30], 16)
    (8, 32)
  """
  longest = max(counts) + 2
  if longest > segment_length:
    return math.ceil(longest / segment_length) * segment_length
  if full_windows:
    return segment_length
  return min(segment_length, math.ceil(longest / ROUND_TO) * ROUND_TO)


def window_features(id_lists: Sequence[Sequence[int]], length: int
                    ) -> Dict[str, np.ndarray]:
  """`pieces <sep> <cls>` of each text LEFT padded to `length`: input_ids,
  segment_ids int32 and input_mask float32 (1 = padding), each `[B, T]`.

  Example:
    >>> f = window_features([[11, 12]], 6)
    >>> f["input_ids"].tolist(), f["segment_ids"].tolist()
    ([[0, 0, 11, 12, 4, 3]], [[4, 4, 0, 0, 0, 2]])
    >>> f["input_mask"].tolist()
    [[1.0, 1.0, 0.0, 0.0, 0.0, 0.0]]
  """
  batch = len(id_lists)
  ids = np.zeros([batch, length], np.int32)
  segs = np.full([batch, length], SEG_ID_PAD, np.int32)
  mask = np.ones([batch, length], np.float32)
  for b, text_ids in enumerate(id_lists):
    tokens = list(text_ids) + [SEP_ID, CLS_ID]
    if len(tokens) > length:
      raise ValueError(f"text {b}: {len(tokens)} tokens, more than {length}")
    start = length - len(tokens)
    ids[b, start:] = tokens
    segs[b, start:] = SEG_ID_A
    segs[b, -1] = SEG_ID_CLS
    mask[b, start:] = 0.0
  return {"input_ids": ids, "segment_ids": segs, "input_mask": mask}


def output_files(path: str, poolings: Sequence[str],
                 piece_vectors: bool = True) -> List[str]:
  """The files an output path stands for: itself, and for `.jsonl` the
  arrays beside it (`.pieces.npy` only with `piece_vectors`).

  Example:
    >>> output_files("out/emb.jsonl", ["last"])
    ['out/emb.jsonl', 'out/emb.pieces.npy', 'out/emb.last.npy']
    >>> output_files("emb.tfrecord", ["last"])
    ['emb.tfrecord']
  """
  if path.endswith(".tfrecord"):
    return [path]
  if not path.endswith(".jsonl"):
    raise UserError(f"--output_file={path}: name it .jsonl (index + .npy "
                    "arrays) or .tfrecord")
  stem = path[:-len(".jsonl")]
  arrays = [f"{stem}.pieces.npy"] if piece_vectors else []
  return [path] + arrays + [f"{stem}.{p}.npy" for p in poolings]


def embedding_example(meta: dict, d_model: int, vectors, pooled: dict,
                      poolings: Sequence[str], file: Optional[str] = None
                      ) -> bytes:
  """A text's tf.train.Example of the `.tfrecord` layout (module doc);
  `vectors` `[n, K, D]` or None, `pooled` {pooling: `[K, D]`}; `file` adds
  its input file (batch jobs: `index` is then its line)."""
  record = {"index": int_feature([meta["index"]]),
            "text": _bytes_feature([meta["text"]]),
            "pieces": _bytes_feature(meta["pieces"]),
            "ids": int_feature(meta["ids"]),
            "starts": int_feature(meta["starts"]),
            "ends": int_feature(meta["ends"]),
            "layers": int_feature(meta["layers"]),
            "d_model": int_feature([int(d_model)])}
  record.update({"file": _bytes_feature([file])} if file is not None else {})
  if vectors is not None:
    record["piece_vectors"] = float_feature(
        np.asarray(vectors, np.float32).ravel())
  for name in poolings:
    record[f"pooled/{name}"] = float_feature(
        np.asarray(pooled[name], np.float32).ravel())
  return example_bytes(record)


class EmbeddingWriter:
  """Writes texts' vectors, given in any order, to `path` (`.jsonl` or
  `.tfrecord`, see the module doc); the files appear at `close()`.

  `counts`: every text's number of pieces (fixes the array rows);
  `layers`: the K layer indices; `piece_vectors`: False writes no
  per-piece array (the index keeps the pieces; `rows` is null).
  Use as a context manager: an exception leaves no file.
  """

  def __init__(self, path: str, counts: Sequence[int], layers: Sequence[int],
               d_model: int, poolings: Sequence[str],
               piece_vectors: bool = True):
    self.path, self.layers = path, [int(x) for x in layers]
    self.d_model = int(d_model)
    self.poolings, self.piece_vectors = list(poolings), piece_vectors
    self.files = output_files(path, self.poolings, piece_vectors)
    self.tfrecord = path.endswith(".tfrecord")
    self._stack = contextlib.ExitStack()
    self._tmp = [self._stack.enter_context(atomic_path(f))
                 for f in self.files]
    shape = [len(self.layers), d_model]
    rows = np.cumsum([0] + [int(c) if piece_vectors else 0 for c in counts])
    self._rows = rows
    self._index: Dict[int, dict] = {}
    self._next = 0
    self._pending: Dict[int, bytes] = {}
    if self.tfrecord:
      self._writer = tf.io.TFRecordWriter(self._tmp[0])
      return
    arrays = [np.lib.format.open_memmap(t, "w+", np.float32, (n, *shape))
              if n else _EmptyArray(t, (n, *shape)) for t, n in zip(
                  self._tmp[1:], ([int(rows[-1])] if piece_vectors else [])
                  + [len(counts)] * len(self.poolings))]
    self._pieces = arrays[0] if piece_vectors else None
    self._pooled = arrays[1:] if piece_vectors else arrays

  def add(self, index: int, pieces: TextPieces, vectors, pooled: dict):
    """Text `index`: its pieces, `vectors` `[n, K, D]` (None without piece
    vectors) and `pooled` {pooling: `[K, D]`}."""
    meta = {"index": int(index), "text": pieces.text,
            "pieces": list(pieces.pieces), "ids": [int(i) for i in pieces.ids],
            "starts": list(pieces.starts), "ends": list(pieces.ends),
            "layers": self.layers}
    if self.tfrecord:
      self._pending[index] = embedding_example(
          meta, self.d_model, vectors if self.piece_vectors else None,
          pooled, self.poolings)
      while self._next in self._pending:
        self._writer.write(self._pending.pop(self._next))
        self._next += 1
      return
    first, end = int(self._rows[index]), int(self._rows[index + 1])
    if self.piece_vectors:
      self._pieces[first:end] = vectors
    for array, name in zip(self._pooled, self.poolings):
      array[index] = pooled[name]
    self._index[index] = dict(
        meta, rows=[first, end] if self.piece_vectors else None)

  def close(self):
    if self.tfrecord:
      self._writer.close()
      self._writer = None
      missing = len(self._rows) - 1 - self._next - len(self._pending)
      if missing:
        raise ValueError(f"{self.path}: {missing} texts were never added")
    else:
      if len(self._index) != len(self._rows) - 1:
        missing = len(self._rows) - 1 - len(self._index)
        raise ValueError(f"{self.path}: {missing} texts were never added")
      for array in [self._pieces] + self._pooled:
        if array is not None:
          array.flush()
      del self._pieces, self._pooled
      with open(self._tmp[0], "w", encoding="utf-8") as f:
        for i in range(len(self._index)):
          f.write(json.dumps(self._index[i], ensure_ascii=False) + "\n")
    self._stack.close()

  def __enter__(self):
    return self

  def __exit__(self, kind, value, traceback):
    if kind is None:
      try:
        self.close()
      except BaseException as e:
        self._abort(type(e), e, e.__traceback__)
        raise
      return False
    self._abort(kind, value, traceback)
    return False

  def _abort(self, kind, value, traceback):
    """Removes every temp file, renaming none."""
    if self.tfrecord and self._writer is not None:
      self._writer.close()
    self._pieces = self._pooled = None
    self._stack.__exit__(kind, value, traceback)


class _EmptyArray:
  """An array file of no rows (memory-mapping cannot map 0 bytes)."""

  def __init__(self, path: str, shape):
    with open(path, "wb") as f:
      np.save(f, np.zeros(shape, np.float32), allow_pickle=False)

  def flush(self):
    pass

  def __setitem__(self, key, value):
    pass  # only empty slices reach an array of no rows


def _bytes_feature(values) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[v.encode("utf-8") for v in values]))


def read_embedding_file(path: str, poolings: Sequence[str]) -> List[dict]:
  """What `EmbeddingWriter` wrote to `path`, text by text: the index fields
  plus `vectors` `[n, K, D]` (None without piece vectors) and `pooled`
  {pooling: `[K, D]`}, float32 arrays."""
  out = []
  if path.endswith(".tfrecord"):
    with paths.local_copy(path) as local:  # TF has no s3://
      for raw in tf.data.TFRecordDataset(local).as_numpy_iterator():
        f = tf.train.Example.FromString(raw).features.feature
        ints = {k: list(f[k].int64_list.value)
                for k in ("ids", "starts", "ends", "layers")}
        k, d = len(ints["layers"]), f["d_model"].int64_list.value[0]
        row = {"index": f["index"].int64_list.value[0],
               "text": f["text"].bytes_list.value[0].decode("utf-8"),
               "pieces": [p.decode("utf-8")
                          for p in f["pieces"].bytes_list.value],
               **ints, "vectors": None, "pooled": {}}
        if "piece_vectors" in f:
          row["vectors"] = np.asarray(f["piece_vectors"].float_list.value,
                                      np.float32).reshape(-1, k, d)
        for name in poolings:
          row["pooled"][name] = np.asarray(
              f[f"pooled/{name}"].float_list.value, np.float32).reshape(k, d)
        out.append(row)
    return out
  stem = path[:-len(".jsonl")]
  arrays = {name: np.load(io.BytesIO(paths.read_bytes(f"{stem}.{name}.npy")))
            for name in ["pieces"] + list(poolings)
            if name != "pieces" or paths.isfile(f"{stem}.pieces.npy")}
  with paths.open_file(path, encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      rows = row.pop("rows")
      row["vectors"] = rows and arrays["pieces"][rows[0]:rows[1]]
      row["pooled"] = {k: arrays[k][row["index"]] for k in poolings}
      out.append(row)
  return out
