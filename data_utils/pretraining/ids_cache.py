"""Token ids on disk: each input range tokenized once, each pass mapped.

  ids cache    `<cache_dir>/<key>.ids`: one uint32 per piece, the id in the
               low 31 bits and the sentence parity (`sent_ids`, alternating
               per line as the original) in the top bit. `key` hashes the
               range's bytes, the SentencePiece model's bytes and the
               settings that change the ids, so an edited input or model
               gets a new file and a re-run or another pass reuses it.
  pass stream  a task's ranges joined in one pass's order, as two files
               (`int32` ids, `bool` sent_ids) that the pass reads through
               memory maps (`MappedStream`): the builder's memory does not
               grow with the corpus.

An ids file is written to a temp name and renamed (in a bucket: a local
temp file, uploaded whole), so a killed or duplicated writer leaves one
whole file or none. Inputs and ids files are read as streams, a block at a
time, wherever they lie; a pass stream is always local (the unit's own
scratch), as it is read at random.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from data_utils import paths
from data_utils.atomic import atomic_path
from data_utils.pretraining import examples
from data_utils.pretraining.examples import DataError
from data_utils.pretraining.task_split import InputRange
from data_utils.text_files import MAX_LINE_BYTES, BadLine, decode_line

CACHE_FORMAT = "xlnet-tf/ids/v1"
_SENT_BIT = np.uint32(1 << 31)
# Pieces per write: bounds the memory a shard's tokenization holds.
_FLUSH_PIECES = 1 << 20
_READ_BUFFER = 1 << 20


def range_sha256(r: InputRange) -> str:
  digest = hashlib.sha256()
  with paths.open_file(r.path, "rb") as f:
    f.seek(r.begin)
    left = r.size
    while left > 0:
      block = f.read(min(left, 1 << 22))
      if not block:
        raise DataError(f"{r.path}: shorter than the task split expects "
                        f"({r.end} bytes); did it change during the build?")
      digest.update(block)
      left -= len(block)
  return digest.hexdigest()


def cache_key(content_sha256: str, sp_sha256: str, settings: dict) -> str:
  """The ids file's name: a hash of the range's bytes, the model's bytes and
  `settings` (uncased, use_eod, from_raw_text)."""
  text = json.dumps({"format": CACHE_FORMAT, "input": content_sha256,
                     "sp": sp_sha256, "settings": settings}, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:32]


def _line_number(path: str, offset: int) -> int:
  """Lines before byte `offset` of `path` (for messages only)."""
  count = 0
  with paths.open_file(path, "rb") as f:
    left = offset
    while left > 0:
      block = f.read(min(left, 1 << 22))
      if not block:
        break
      count += block.count(b"\n")
      left -= len(block)
  return count


def _decoded(path: str, line_no: int, raw: bytes) -> str:
  """One line's bytes as text; a bad byte or a NUL is a one-line DataError
  naming the file and line."""
  text = decode_line(raw)
  if isinstance(text, BadLine):
    raise DataError(f"{path}:{line_no}: {text.reason}")
  return text


def _too_long(path: str, line_no: int, raw: bytes) -> DataError:
  if b"\0" in raw:  # a binary file is named as one, not as a long line
    reason = decode_line(raw[:raw.index(b"\0") + 1]).reason
    return DataError(f"{path}:{line_no}: {reason}")
  return DataError(f"{path}:{line_no}: line longer than {MAX_LINE_BYTES} "
                   "bytes (1 MiB, the longest line the builder reads; the "
                   "input is one sentence or paragraph per line)")


def range_lines(r: InputRange) -> Iterator[Tuple[int, str]]:
  """`(line number in the file, line)` of a range, decoded as the readers
  open text (UTF-8, universal newlines: `\\r\\n` and a lone `\\r` end a
  line too, as `\\n`). Reads a line at most `MAX_LINE_BYTES` long at a
  time: a longer line, a bad byte or a NUL byte (a binary file) is a
  one-line DataError naming the file and line, found in this same read."""
  line_no = None
  with paths.open_file(r.path, "rb", buffering=_READ_BUFFER) as f:
    f.seek(r.begin)
    left = r.size
    while left > 0:
      raw = f.readline(min(left, MAX_LINE_BYTES + 1))
      if not raw:
        break
      left -= len(raw)
      if line_no is None:  # counted once, and only for a range with text
        line_no = _line_number(r.path, r.begin) if r.begin else 0
      line_no += 1
      if len(raw) > MAX_LINE_BYTES:
        raise _too_long(r.path, line_no, raw)
      text = _decoded(r.path, line_no, raw)
      if "\r" not in text:
        yield line_no, text
        continue
      # A UTF-8 sequence never holds a \r or \n byte: splitting the decoded
      # line is splitting the bytes.
      parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
      for part in parts[:-1]:
        yield line_no, part + "\n"
      if parts[-1]:
        yield line_no, parts[-1]


def tokenize_range(r: InputRange, encode: Optional[Callable[[str], List[int]]],
                   use_eod: bool, out_path: str,
                   count: Callable[[str, int], None] = lambda k, n: None
                   ) -> int:
  """Writes the ids file of one range (see the module docstring) and
  returns its number of pieces; lines become ids as `examples.line_ids`
  says. `encode(line) -> ids` tokenizes text; None reads lines of
  space-separated ids. `count(name, n)` receives the `lines` and `pieces`
  counters."""
  line_no = seen = 0

  def numbered_lines():
    nonlocal line_no, seen
    for line_no, line in range_lines(r):
      seen += 1
      if seen % 10000 == 0:
        count("lines", 10000)
      yield line

  def read_ids(line: str) -> List[int]:
    try:
      ids = [int(tok) for tok in line.split()]
    except ValueError:
      raise DataError(f"{r.path}:{line_no}: not a line of token ids (run "
                      f"with --from_raw_text for text): {line[:60]!r}") \
          from None
    bad = [i for i in ids if not 0 <= i < 1 << 31]
    if bad:
      raise DataError(f"{r.path}:{line_no}: token id {bad[0]} is out of "
                      "range")
    return ids

  pending: List[int] = []
  parity: List[bool] = []
  total = 0
  with atomic_path(out_path) as tmp, open(tmp, "wb") as out:

    def flush():
      packed = np.array(pending, np.uint32)
      packed[np.array(parity, bool)] |= _SENT_BIT
      out.write(packed.tobytes())
      pending.clear()
      parity.clear()

    for cur, sent_id in examples.line_ids(numbered_lines(), encode or read_ids,
                                          use_eod):
      pending.extend(cur)
      parity.extend([sent_id] * len(cur))
      if len(pending) >= _FLUSH_PIECES:
        total += len(pending)
        flush()
    total += len(pending)
    flush()
  count("lines", seen % 10000)
  count("pieces", total)
  return total


def num_pieces(ids_path: str) -> int:
  return paths.getsize(ids_path) // 4


def read_ids(ids_path: str) -> Tuple[np.ndarray, np.ndarray]:
  """`(ids int64, sent_ids bool)` of one ids file, in memory (tests and
  small inputs)."""
  packed = np.frombuffer(paths.read_bytes(ids_path), dtype=np.uint32)
  return ((packed & ~_SENT_BIT).astype(np.int64),
          (packed & _SENT_BIT) != 0)


def _read_packed(f) -> np.ndarray:
  """The next block of an ids file (at most `_FLUSH_PIECES` ids): a read,
  not `np.fromfile`, so a store's stream serves as a local file does."""
  return np.frombuffer(f.read(_FLUSH_PIECES * 4), dtype=np.uint32)


def _write_in_pages(f, array: np.ndarray) -> None:
  """Writes `array` a memory page at a time. The page cache then holds the
  file in small folios, so a read through the memory map maps a page, not
  the megabytes a large write's folio spans (the pass reads it at random:
  with large folios one step would map ~bsz of them)."""
  view = memoryview(array.tobytes())
  for i in range(0, len(view), mmap.PAGESIZE):
    f.write(view[i:i + mmap.PAGESIZE])


def write_pass_stream(ids_paths: Sequence[str], order: Sequence[int],
                      directory: str) -> Tuple[str, str, int]:
  """Joins the ids files in `order` into `<directory>/stream.ids` (int32)
  and `stream.sent` (bool), a block at a time; a file's sentence parity is
  flipped when it starts with the parity the previous file ended with, so
  two files never merge into one sentence (`examples.concat_documents`).
  Returns both paths and the number of pieces."""
  ids_out = os.path.join(directory, "stream.ids")
  sent_out = os.path.join(directory, "stream.sent")
  prev: Optional[bool] = None
  total = 0
  with open(ids_out, "wb") as ids_f, open(sent_out, "wb") as sent_f:
    for k in order:
      flip = None
      with paths.open_file(ids_paths[k], "rb", buffering=_READ_BUFFER) as f:
        while True:
          packed = _read_packed(f)
          if not len(packed):
            break
          sent = (packed & _SENT_BIT) != 0
          if flip is None:
            flip = prev is not None and bool(sent[0]) == prev
          if flip:
            sent = ~sent
          _write_in_pages(ids_f, (packed & ~_SENT_BIT).astype(np.int32))
          _write_in_pages(sent_f, sent)
          total += len(packed)
          prev = bool(sent[-1])
  return ids_out, sent_out, total


class MappedStream:
  """A pass stream's `ids` `[N] int32` and `sent_ids` `[N] bool`, read-only
  memory maps. `release()` drops the pages the process has touched (they
  stay in the page cache): called between steps it keeps the resident set
  flat however long the stream is. Use as a context manager."""

  def __init__(self, ids_path: str, sent_path: str):
    self._files = [open(ids_path, "rb"), open(sent_path, "rb")]
    self._maps = [mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                  if os.fstat(f.fileno()).st_size else None
                  for f in self._files]
    self.ids = (np.frombuffer(self._maps[0], np.int32) if self._maps[0]
                else np.zeros(0, np.int32))
    self.sent_ids = (np.frombuffer(self._maps[1], bool) if self._maps[1]
                     else np.zeros(0, bool))

  def release(self) -> None:
    for m in self._maps:
      if m is not None and hasattr(mmap, "MADV_DONTNEED"):
        m.madvise(mmap.MADV_DONTNEED)

  def close(self) -> None:
    self.ids = self.sent_ids = None
    for m in self._maps:
      if m is not None:
        try:
          m.close()
        except BufferError:  # a view is still alive: the GC unmaps it
          pass
    for f in self._files:
      f.close()

  def __enter__(self) -> "MappedStream":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
