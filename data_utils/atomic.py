"""Files that appear whole or not at all: write a temp file beside the
target, then rename it into place (a crash leaves the old file, or none, and
at most a `.tmp-*` file that the next run may remove)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile


@contextlib.contextmanager
def atomic_path(path: str, prefix: str = ".tmp-"):
  """Yields a temp path to write; renames it to `path` if the block ends
  normally, deletes it otherwise.

  Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(d, "a.txt")) as tmp:
    ...   _ = open(tmp, "w").write("hi")
    >>> open(os.path.join(d, "a.txt")).read()
    'hi'
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)
  os.close(fd)
  try:
    yield tmp
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_text(path: str, text: str) -> None:
  with atomic_path(path) as tmp:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)


def write_json(path: str, data, indent: int = 2) -> None:
  """JSON with sorted keys, atomically."""
  write_text(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")
