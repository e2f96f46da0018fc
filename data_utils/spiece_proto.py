"""A SentencePiece model (a serialized ModelProto), read and rewritten for
`graph_tokenizer.GraphTokenizer`'s two ops, field by field: sentencepiece's
`_pb2` wants a protobuf runtime as new as the one that generated it, and
fields it does not know pass through here unchanged.

`split_model` gives, besides the pieces:
  * for `tensorflow_text.SentencepieceTokenizer`, which normalizes and finds
    the unknown characters, a reduced ModelProto (XLNet's: 239 KB, nearly
    all the normalizer's charsmap, of 798 KB): only the unknown, control and
    user-defined pieces and the one-character ones (134 of 32,000). It is a
    resource, whose model tf.saved_model writes twice (into the graph and
    into the function that restores it). Sentencepiece makes a character
    unknown where no one-character piece matches; if no piece holds such a
    character, the normalized text and its unknown characters stay the same
    (checked on every code point). A model where some piece does gets the
    whole ModelProto.
  * for `tensorflow_text.FastSentencepieceTokenizer`, which segments, the
    ModelProto with an empty charsmap, its input being normalized already
    (XLNet's: a 568 KB flatbuffer).
"""

from __future__ import annotations

from typing import List, NamedTuple, Tuple, Union

from data_utils import paths
from data_utils.tokenization import TokenizerError


def read_model(model: Union[str, bytes]) -> bytes:
  """The bytes of a model given as a path or as its bytes."""
  if isinstance(model, bytes):
    return model
  if not paths.exists(model):
    raise TokenizerError(f"{model}: SentencePiece model not found")
  return paths.read_bytes(model)


# sentencepiece_model.proto: piece types, and the unigram model type.
_NORMAL, _UNKNOWN, _USER_DEFINED, _BYTE, _UNIGRAM = 1, 2, 4, 6, 1


def _fields(buf: bytes) -> List[Tuple[int, Union[int, bytes], bytes]]:
  """A serialized protobuf message's fields, in order: (number, value, the
  field's bytes), value an int (varint) or bytes; ValueError if malformed."""
  def varint(pos):
    value, shift = 0, 0
    while pos < len(buf) and shift < 64:
      value, pos = value | (buf[pos] & 0x7F) << shift, pos + 1
      if buf[pos - 1] < 0x80:
        return value, pos
      shift += 7
    raise ValueError("truncated varint")

  if not isinstance(buf, bytes):
    raise ValueError("a number where a message belongs")
  fields, pos = [], 0
  while pos < len(buf):
    key, end = varint(pos)
    wire = key & 7
    if wire not in (0, 1, 2, 5) or key < 8:
      raise ValueError(f"malformed message (key {key})")
    if wire == 0:
      value, end = varint(end)
    else:
      size, end = varint(end) if wire == 2 else (8 if wire == 1 else 4, end)
      value, end = buf[end:end + size], end + size
    if end > len(buf):
      raise ValueError("truncated message")
    fields.append((key >> 3, value, buf[pos:end]))
    pos = end
  return fields


def _length_delimited(number: int, payload: bytes) -> bytes:
  out, size = [number << 3 | 2], len(payload)
  while size >= 0x80:
    out, size = out + [size & 0x7F | 0x80], size >> 7
  return bytes(out + [size]) + payload


class SplitModel(NamedTuple):
  pieces: List[str]  # all pieces, by id
  unk_id: int        # the unknown piece's
  normalizer: bytes  # ModelProto for SentencepieceTokenizer (maybe reduced)
  segmenter: bytes   # ModelProto for FastSentencepieceTokenizer


def split_model(proto: bytes) -> SplitModel:
  """The models the two ops get (see the module docstring) from a serialized
  ModelProto; ValueError if it is none."""
  fields = _fields(proto)
  pieces, types, model_type = [], [], _UNIGRAM
  for number, value, _ in fields:
    sub = dict((n, v) for n, v, _ in _fields(value)) if number < 3 else {}
    if number == 1:
      pieces.append(sub.get(1, b"").decode("utf-8"))
      types.append(sub.get(3, _NORMAL))
    model_type = sub.get(3, _UNIGRAM) if number == 2 else model_type
  # Sentencepiece puts an unknown node where no one-character piece matches:
  # if no piece holds such a character, the longer pieces can go.
  matched = [p for p, t in zip(pieces, types) if t in (_NORMAL, _USER_DEFINED)]
  reducible = (model_type == _UNIGRAM and _BYTE not in types
               and set("".join(matched)) <= {p for p in matched
                                              if len(p) == 1})
  keep = iter([t != _NORMAL or len(p) == 1 for p, t in zip(pieces, types)])
  normalizer, segmenter = [], []
  for number, value, raw in fields:
    # Self-test samples (field 4) expect the whole vocabulary.
    if (next(keep) if number == 1 else number != 4) or not reducible:
      normalizer.append(raw)
    if number == 3:
      # Its input is normalized already: an empty charsmap (trie size 0).
      spec = b"".join(r for n, _, r in _fields(value) if n != 2)
      raw = _length_delimited(3, spec + _length_delimited(2, bytes(4)))
    segmenter.append(raw)
  if _UNKNOWN not in types:
    raise ValueError("no unknown piece")
  return SplitModel(pieces, types.index(_UNKNOWN), b"".join(normalizer),
                     b"".join(segmenter))
