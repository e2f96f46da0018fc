"""`tf.train.Example` bytes straight from numpy arrays (a kernel).

`records_bytes` / `record_bytes` give the bytes that
`data_utils.records.example_bytes` gives for the same features (int64 and
float lists, map entries in key order, `SerializeToString(deterministic=
True)`), without protobuf objects or `.tolist()`: packed varints are built in
numpy. tests/test_pretrain_fast.py holds the two equal.
"""

from __future__ import annotations

import functools
from typing import Dict, List, Tuple

import numpy as np


def _varint(n: int) -> bytes:
  """The varint of a non-negative int (a length or a tag)."""
  out = bytearray()
  while n > 0x7F:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


def _varints(values: np.ndarray) -> Tuple[bytes, List[int]]:
  """Packed varints of the int64 rows `values [R, n]` (C-contiguous): the
  bytes of all rows, row-major, and the `R + 1` offsets where each row
  starts and the last ends. A negative value takes 10 bytes (two's
  complement as uint64), as protobuf writes an int64."""
  n_rows, n = values.shape
  if values.size == 0:
    return b"", [0] * (n_rows + 1)
  u = values.reshape(-1).view(np.uint64)
  hi = int(u.max())                       # a negative value is >= 2**63
  if hi < 0x80:                           # one byte each: the values
    return u.astype(np.uint8).tobytes(), [r * n for r in range(n_rows + 1)]
  if hi < 1 << 32:
    u = u.astype(np.uint32)               # cheaper shifts and compares
  width = 1
  while hi >> (7 * width):
    width += 1
  nbytes = np.ones(u.size, np.intp)
  for k in range(1, width):
    nbytes += u >= (1 << (7 * k))
  ends = np.cumsum(nbytes)
  total = int(ends[-1])
  starts = ends - nbytes
  # Every value writes all `width` bytes at its offset, highest byte first:
  # a short value's surplus bytes land on its successors' places, which
  # their own lower bytes (written later) overwrite; the spill past the end
  # goes into the `width` spare bytes.
  out = np.empty(total + width, np.uint8)
  for k in reversed(range(width)):
    chunk = (u >> (7 * k)).astype(np.uint8)
    if k < width - 1:
      chunk |= 0x80
    out[starts + k if k else starts] = chunk
  out[ends - 1] &= 0x7F                   # the last byte of a value ends it
  row_ends = ends[n - 1::n].tolist()
  return out[:total].tobytes(), [0] + row_ends


@functools.lru_cache(maxsize=1 << 14)
def _prefix(key: str, is_float: bool, n: int) -> bytes:
  """The bytes before an `n`-byte packed payload in an Example's map entry
  (the `features` map: entry tag and length, key, Feature tag and length,
  the list's tag and length, the packed field's tag and length)."""
  # An empty packed field is left out: the list message is empty.
  packed = b"\x0a" + _varint(n) if n else b""
  list_tag = b"\x12" if is_float else b"\x1a"    # float_list=2, int64_list=3
  feature = list_tag + _varint(len(packed) + n) + packed
  name = key.encode("utf-8")
  entry = (b"\x0a" + _varint(len(name)) + name
           + b"\x12" + _varint(len(feature) + n) + feature)
  return b"\x0a" + _varint(len(entry) + n) + entry


def _as_int64(value: np.ndarray) -> np.ndarray:
  """int64, C-contiguous (as protobuf's int64 takes them)."""
  if value.dtype.kind == "u" and value.size and int(value.max()) >= 1 << 63:
    raise ValueError(f"value {int(value.max())} out of int64 range")
  return np.ascontiguousarray(value, np.int64)


def records_bytes(features: Dict[str, np.ndarray]) -> List[bytes]:
  """Serialized `tf.train.Example`s of R records at once.

  `features`: key -> `[R, n_key]` array (float kinds as float32 lists, the
  rest as int64 lists). Record r holds row r of every key. Equal to
  `record_bytes` of each row (and so to `records.example_bytes`)."""
  keys = sorted(features)   # deterministic serialization: map keys sorted
  counts = {len(features[k]) for k in keys}
  if len(counts) > 1:
    raise ValueError(f"features have different record counts: {counts}")
  n_rec = counts.pop() if counts else 1
  plan = []
  for k in keys:
    value = features[k]
    is_float = value.dtype.kind == "f"
    if is_float:
      width = 4 * value.shape[1]
      with np.errstate(over="ignore"):   # as protobuf: out of range -> inf
        buf = value.astype("<f4").tobytes()
      offsets = [r * width for r in range(n_rec + 1)]
    else:
      buf, offsets = _varints(_as_int64(value))
    plan.append((k, is_float, memoryview(buf), offsets))
  out = []
  for r in range(n_rec):
    parts = []
    size = 0
    for key, is_float, buf, offsets in plan:
      lo, hi = offsets[r], offsets[r + 1]
      pre = _prefix(key, is_float, hi - lo)
      parts.append(pre)
      parts.append(buf[lo:hi])
      size += len(pre) + hi - lo
    out.append(b"\x0a" + _varint(size) + b"".join(parts))
  return out


def record_bytes(example: Dict[str, np.ndarray]) -> bytes:
  """One `tf.train.Example` of 1-D arrays `{key: [n_key]}`, the bytes of
  `records.example_bytes({k: float_feature(v.tolist()) if v.dtype.kind ==
  "f" else int_feature(v.tolist())})`: float kinds as float32 (rounded as
  protobuf rounds them), the rest as int64.

  Example:
    >>> record_bytes({"label": np.array([1])})
    b'\\n\\x10\\n\\x0e\\n\\x05label\\x12\\x05\\x1a\\x03\\n\\x01\\x01'
  """
  return records_bytes({k: np.asarray(v).reshape(1, -1)
                        for k, v in example.items()})[0]
