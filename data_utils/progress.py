"""Progress lines for long jobs: count, rate and ETA through absl logging."""

from __future__ import annotations

import time
from typing import Optional

from absl import logging


def format_seconds(seconds: float) -> str:
  seconds = int(max(seconds, 0))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h:d}:{m:02d}:{s:02d}"


class Progress:
  """Logs `what: done/total (pct) rate unit/s, ETA h:mm:ss` at most every
  `every_seconds` (and on `finish`).

  Example:
    >>> p = Progress("lines", total=10, every_seconds=1e9)
    >>> p.update(4); p.done
    4
  """

  def __init__(self, what: str, total: Optional[int] = None,
               unit: str = "", every_seconds: float = 10.0):
    self.what = what
    self.total = total
    self.unit = unit or what
    self.every = every_seconds
    self.done = 0
    self.start = time.monotonic()
    self._last = self.start

  def line(self) -> str:
    elapsed = max(time.monotonic() - self.start, 1e-9)
    rate = self.done / elapsed
    text = f"{self.what}: {self.done}"
    if self.total:
      text += f"/{self.total} ({100.0 * self.done / self.total:.1f}%)"
    text += f", {rate:.1f} {self.unit}/s, elapsed {format_seconds(elapsed)}"
    if self.total and rate > 0:
      text += f", ETA {format_seconds((self.total - self.done) / rate)}"
    return text

  def update(self, n: int = 1) -> None:
    self.done += n
    now = time.monotonic()
    if now - self._last >= self.every:
      self._last = now
      logging.info(self.line())

  def finish(self) -> str:
    line = self.line()
    logging.info(line)
    return line
