"""Reading a user's text files safely: only regular files, UTF-8 only (a
UTF-16/UTF-32 file is named as such), a UTF-8 byte-order mark read as the
encoding marker it is, and lines read in bounded pieces.

`file_problem(path)` says why a file cannot be read as text (None: it can):

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...   path = os.path.join(d, "u16.txt")
    ...   with open(path, "wb") as f:
    ...     _ = f.write("hi\\n".encode("utf-16"))
    ...   print(file_problem(path))
    ...   print(file_problem(d) == f"a directory, not a file (name its "
    ...         f"files, e.g. {d}/*)")
    UTF-16 text (a byte-order mark); convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8
    True

`read_lines(f)` gives `(n, text)` for each line of a binary file (n from 1,
the line ending kept), or `(n, BadLine(reason))` for a line that is no
UTF-8 text, holds a NUL byte, or is over `MAX_LINE_BYTES` (skipped in
bounded pieces, never held whole):

    >>> import io
    >>> for n, text in read_lines(io.BytesIO(b"\\xef\\xbb\\xbfa\\nb\\x00\\n")):
    ...   print(n, repr(text))
    1 'a\\n'
    2 BadLine(reason='NUL byte at column 2 (a binary file, not text)')
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from typing import BinaryIO, Iterator, NamedTuple, Optional, Tuple, Union

from data_utils import paths
from data_utils.errors import UserError

MAX_LINE_BYTES = 1 << 20   # a text is far shorter; a longer line is dead
_SKIP_BYTES = 1 << 20      # the piece an over-long line is skipped in
_HEAD_BYTES = 4096         # what the encoding is guessed from

# UTF-32's marks first: UTF-32LE's starts with UTF-16LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
# Latin text without a mark: which byte positions (mod 4) are mostly NUL.
_NUL_PATTERNS = {(1, 3): "UTF-16LE", (0, 2): "UTF-16BE",
                 (1, 2, 3): "UTF-32LE", (0, 1, 2): "UTF-32BE"}
_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class BadLine(NamedTuple):
  """A line that is not text, and why (one line)."""
  reason: str


def foreign_encoding(head: bytes) -> Optional[str]:
  """`(name, how it shows)` in words for the first bytes of a UTF-16 or
  UTF-32 file, e.g. 'UTF-16 text (a byte-order mark)'; None for anything
  else (UTF-8, with or without its mark, or bytes that are no text).

  Example:
    >>> foreign_encoding("text".encode("utf-16-le"))
    'UTF-16LE text (NUL bytes between the letters, no byte-order mark)'
    >>> foreign_encoding(b"plain\\x00text"), foreign_encoding(b"")
    (None, None)
  """
  for bom, name in _BOMS:
    if head.startswith(bom):
      return f"{name} text (a byte-order mark)"
  if len(head) < 4 or b"\0" not in head:
    return None
  mostly_nul = tuple(r for r in range(4)
                     if head[r::4].count(0) * 2 > len(head[r::4]))
  name = _NUL_PATTERNS.get(mostly_nul)
  if name is None:
    return None
  return f"{name} text (NUL bytes between the letters, no byte-order mark)"


def _not_regular(path: str, mode: int) -> Optional[str]:
  if stat.S_ISREG(mode):
    return None
  if stat.S_ISDIR(mode):
    return (f"a directory, not a file (name its files, e.g. "
            f"{path.rstrip(os.sep)}{os.sep}*)")
  kind = next((k for test, k in _KINDS if test(mode)), "a special file")
  return f"{kind}, not a regular file"


def file_problem(path: str, text: bool = True) -> Optional[str]:
  """Why `path` cannot be read as a UTF-8 text file (with `text=False`: as
  a file at all), in one line without the path (None: it can be). Anything
  but a regular file is refused without being opened (opening a FIFO waits
  for a writer); a UTF-16 or UTF-32 file is named with the command that
  converts it."""
  if paths.is_remote(path):
    try:
      if not paths.isfile(path):
        return "does not exist"
    except OSError as e:
      return f"cannot read ({e.strerror or e})"
  else:
    try:
      mode = os.stat(path).st_mode
    except FileNotFoundError:
      return "does not exist" + (" (a broken link?)" if os.path.islink(path)
                                 else "")
    except OSError as e:
      return f"cannot read ({e.strerror or e})"
    problem = _not_regular(path, mode)
    if problem:
      return problem
  if not text:
    return None
  try:
    with paths.open_file(path, "rb") as f:
      head = f.read(_HEAD_BYTES)
  except OSError as e:
    return f"cannot read ({e.strerror or e})"
  found = foreign_encoding(head)
  if found is None:
    return None
  name = found.split()[0]
  return f"{found}; convert it to UTF-8, e.g. iconv -f {name} -t UTF-8"


def _skip_rest(f: BinaryIO, size: int) -> int:
  """Reads past the rest of an over-long line in bounded pieces; the
  line's length in bytes, without its line ending."""
  while True:
    raw = f.readline(_SKIP_BYTES)
    size += len(raw)
    if not raw or raw.endswith(b"\n"):
      return size - raw.endswith(b"\n")


def decode_line(raw: bytes) -> Union[str, BadLine]:
  """The text of one line's bytes, or why it is none.

  Example:
    >>> decode_line(b"caf\\xc3\\xa9\\n"), decode_line(b"bad \\xff")
    ('café\\n', BadLine(reason='not UTF-8 text (byte 0xff at column 5)'))
  """
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    # Columns count characters, as an editor shows them.
    column = len(raw[:e.start].decode("utf-8")) + 1
    return BadLine(f"not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                   f"{column})")
  if "\0" in text:
    return BadLine(f"NUL byte at column {text.index(chr(0)) + 1} (a binary "
                   "file, not text)")
  return text


def read_lines(f: BinaryIO, limit: int = MAX_LINE_BYTES
               ) -> Iterator[Tuple[int, Union[str, BadLine]]]:
  """`(n, text or BadLine)` for each line of the binary file `f` from its
  start (see the module docstring). At most `limit` bytes of a line are
  held; the UTF-8 byte-order mark is dropped from line 1, so a header's
  first column or a first text does not start with U+FEFF."""
  n = 0
  while True:
    raw = f.readline(limit + 1)
    if not raw:
      return
    n += 1
    # Measured before the mark is dropped: the limit counts the bytes read.
    over = len(raw) > limit and not raw.endswith(b"\n")
    if n == 1 and raw.startswith(codecs.BOM_UTF8):
      raw = raw[len(codecs.BOM_UTF8):]
    if over:
      size = _skip_rest(f, len(raw))
      yield n, BadLine(f"line too long: {size} bytes (the limit is "
                       f"{size_words(limit)})")
      continue
    yield n, decode_line(raw)


def size_words(n: int) -> str:
  """`n` bytes in words: '1 MiB', '64 KiB', else '100 bytes'."""
  for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
    if n % unit == 0:
      return f"{n // unit} {name}"
  return f"{n} bytes"


def text_problem(path: str, reject_nul: bool = False) -> Optional[str]:
  """Where `path` first stops being UTF-8 text, as `path:line: ...` (line
  and column 1-based, the column in characters), or None if it is all text.
  With `reject_nul` a NUL byte also counts (the mark of a binary file).

  Reads the bytes line by line: a text-mode reader decodes whole blocks
  ahead of the lines it has handed out, so the line it had reached when
  decoding failed is not the line of the bad byte. (A UTF-8 sequence never
  contains a newline byte, so lines decode independently.)

  Example (a file whose second line holds the byte 0xff):
    `/x/train.tsv:2: not UTF-8 text (byte 0xff at column 4)`
  """
  with paths.open_file(path, "rb") as f:
    for line_no, raw in enumerate(f, start=1):
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        column = len(raw[:e.start].decode("utf-8")) + 1
        return (f"{path}:{line_no}: not UTF-8 text (byte 0x{raw[e.start]:02x}"
                f" at column {column})")
      if reject_nul and "\0" in text:
        return (f"{path}:{line_no}: NUL byte at column "
                f"{text.index(chr(0)) + 1} (a binary file, not text)")
  return None


def utf8_error(path: str) -> str:
  """The one-line message for a UnicodeDecodeError met reading `path`."""
  try:
    found = text_problem(path)
  except OSError:
    found = None
  return found or f"{path}: not UTF-8 text"


def read_json(path: str, error: type = UserError):
  """The JSON value in `path`. A file that is not UTF-8 or not valid JSON
  raises `error` with one line naming it and where:
  `/x/c.json: not valid JSON (Expecting ',' delimiter at line 2 column 7)`.
  """
  try:
    with paths.open_file(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise error(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column "
                f"{e.colno})") from None
  except UnicodeDecodeError:
    raise error(utf8_error(path)) from None
