"""The safetensors file format by hand where the `safetensors` package falls
short: the framing check (it has no checksums) and bfloat16 reading.

A file is an 8-byte little-endian header size, a JSON header giving each
tensor's dtype, shape and data_offsets, then the data up to the last offset.
"""

from __future__ import annotations

import json
import struct
from typing import Dict, Optional

import numpy as np
from safetensors.numpy import load, load_file

from data_utils import paths
from xlnet_tf.checkpoint_files import DAMAGED, CheckpointError

_RAW_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8",
               "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1",
               "BOOL": "?"}


# safetensors' own limit on the JSON header.
_MAX_HEADER = 100_000_000


def safetensors_problem(path: str) -> Optional[str]:
  """What is wrong with a safetensors file's framing (8-byte little-endian
  header size, JSON header giving each tensor's data_offsets, then the data
  up to the last offset, nothing after), or None. Reads the header only.
  The format has no checksums: changed bytes inside tensor data cannot be
  detected."""
  name = paths.basename(path)
  size = paths.getsize(path)
  if size == 0:
    return f"{name} is empty"
  if size < 8:
    return f"{name} is truncated ({size} bytes, not even its header size)"
  with paths.open_file(path, "rb") as f:
    (length,) = struct.unpack("<Q", f.read(8))
    if length > _MAX_HEADER:
      return (f"{name} is not a safetensors file (its first 8 bytes give a "
              f"header of {length} bytes)")
    if length > size - 8:
      return (f"{name} is truncated ({size} bytes; its header needs "
              f"{8 + length})")
    raw = f.read(length)
  try:
    header = json.loads(raw.decode("utf-8"))
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
    return f"{name} has a damaged header (not valid JSON: {e})"
  try:
    end = max((int(meta["data_offsets"][1]) for key, meta in header.items()
               if key != "__metadata__"), default=0)
  except (AttributeError, TypeError, KeyError, IndexError, ValueError):
    return f"{name} has a damaged header (a tensor without data_offsets)"
  expected = 8 + length + end
  if size < expected:
    return f"{name} is truncated ({size} of {expected} bytes)"
  if size > expected:
    return (f"{name} has {size - expected} bytes after its last tensor "
            f"({size} bytes, its header describes {expected})")
  return None


def _read_raw(path: str) -> Dict[str, np.ndarray]:
  """The file format by hand (8-byte header size, JSON header, data), for
  bfloat16, which NumPy (hence safetensors.numpy) has no dtype for; bfloat16
  is the top half of a float32, so it widens exactly."""
  with paths.open_file(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    data = f.read()
  tensors = {}
  for name, meta in header.items():
    if name == "__metadata__":
      continue
    start, end = meta["data_offsets"]
    raw = data[start:end]
    if meta["dtype"] == "BF16":
      value = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(
          np.float32)
    elif meta["dtype"] in _RAW_DTYPES:
      value = np.frombuffer(raw, _RAW_DTYPES[meta["dtype"]])
    else:
      raise CheckpointError(f"{path}: {name} has dtype {meta['dtype']}, "
                            "which cannot be read")
    try:
      tensors[name] = value.reshape(meta["shape"]).copy()
    except ValueError:
      raise CheckpointError(
          f"{path}: {DAMAGED}: {name} has {value.size} values, its shape "
          f"{meta['shape']} needs {int(np.prod(meta['shape']))}") from None
  return tensors


def read_safetensors(path: str, label: str) -> Dict[str, np.ndarray]:
  """One safetensors file; damage raises a one-line `CheckpointError`
  starting with `label` and naming the file."""
  problem = safetensors_problem(path)
  if problem:
    raise CheckpointError(f"{label}: {DAMAGED}: {problem}")
  try:
    # A bucket's file is read whole (the package reads local files only).
    return load(paths.read_bytes(path)) if paths.is_remote(path) else \
        load_file(path)
  except TypeError:  # a dtype NumPy lacks (bfloat16)
    return _read_raw(path)
  except Exception as e:  # the Rust reader's own error types
    raise CheckpointError(f"{path}: not a readable safetensors file ({e})"
                          ) from None
