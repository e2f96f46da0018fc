"""Content fingerprints that key the caches (feature records, SQuAD records,
pretraining records): a cache is reused only while the bytes it was built
from are the same, whatever happened to their paths or modification times.

Every fingerprint is a sha256 hex digest. Hashing is far cheaper than
tokenizing the same text, so it is done on every run.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, List

from data_utils import paths

BLOCK = 1 << 20  # bytes read at a time


def file_sha256(path: str) -> str:
  """sha256 of a file's bytes (a local path or a `paths` URL), read in
  1 MB blocks.

  Example:
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("wb", delete=False) as f:
    ...   _ = f.write(b"abc")
    >>> file_sha256(f.name)[:16]
    'ba7816bf8f01cfea'
  """
  digest = hashlib.sha256()
  with paths.open_file(path, "rb") as f:
    for block in iter(lambda: f.read(BLOCK), b""):
      digest.update(block)
  return digest.hexdigest()


def files_sha256(paths: Iterable[str]) -> List[str]:
  """The `file_sha256` of each path, in order."""
  return [file_sha256(p) for p in paths]


def items_sha256(items: Iterable[object]) -> str:
  """sha256 of the items' `repr`s, in order (one per line): exact for the
  parsed examples (dataclasses of strings, ints and floats, whose reprs are
  exact), so any change to a text, a label or the order changes it.

  Example:
    >>> items_sha256(["a", 1.5]) == items_sha256(["a", 1.5])
    True
    >>> items_sha256(["a", 1.5]) == items_sha256(["a", 2.5])
    False
  """
  digest = hashlib.sha256()
  for item in items:
    digest.update(repr(item).encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
  return digest.hexdigest()
