"""Leases in a bucket: an object that says "my writer is alive" for as long
as its writer renews it, so any later run, on any host, can tell a dead
writer's leftovers from a live one's (a bucket has no process ids and no
locks).

A `Lease` writes its object when it starts, rewrites it every third of the
lease period from a daemon thread, and removes it when it closes. A lease
not rewritten for longer than the period is `expired`: its writer stopped
(killed, or its host gone), and what it guarded may be taken. A writer that
stalls longer than a whole period counts as gone too; the period is long
enough (60 s) that a live process's renewals do not miss it.

`XLNET_TF_LEASE_SECONDS` sets the period (read at each use; tests shorten it).
Runs that share a bucket must use one period.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from absl import logging

from data_utils import paths
from data_utils.errors import UsageError

SUFFIX = ".lease"
ENV = "XLNET_TF_LEASE_SECONDS"
DEFAULT_SECONDS = 60.0
# S3 stamps whole seconds, so a stamp may read up to 1 s early.
_STAMP_SLACK = 1.0


def lease_seconds() -> float:
  """The lease period: $XLNET_TF_LEASE_SECONDS, or DEFAULT_SECONDS."""
  value = os.environ.get(ENV, "")
  if not value:
    return DEFAULT_SECONDS
  try:
    seconds = float(value)
  except ValueError:
    seconds = 0.0
  if not seconds > 0:
    raise UsageError(f"{ENV}={value}: must be a number of seconds above 0")
  return seconds


def expired(path: str, now: float) -> bool:
  """Whether the lease (or marker) at `path` was last written more than a
  lease period before `now`, a stamp of the same store (`Lease.stamp`,
  `Lease.renew`). Both stamps come from the store's clock: hosts' clocks
  may be apart by more than a period, the store's from itself is not. A
  lease that is gone counts as expired."""
  try:
    stamp = paths.modified(path)
  except FileNotFoundError:
    return True
  return now - stamp > lease_seconds() + _STAMP_SLACK


class Lease:
  """The lease object at URL `path`, holding `data`, while the `with` block
  (or `start` ... `close`) runs. `stamp` is the store's time of the last
  write this process saw: a fresh "now" to compare others' leases with."""

  def __init__(self, path: str, data: bytes = b""):
    self.path = path
    self.stamp = 0.0
    self._data = data
    self._lock = threading.Lock()  # one write at a time, the newest data
    self._stop = threading.Event()
    self._thread: Optional[threading.Thread] = None

  def start(self) -> "Lease":
    lease_seconds()  # a bad setting: one line here, not in the thread
    self.renew()
    self._thread = threading.Thread(target=self._keep, daemon=True,
                                    name=f"lease {self.path}")
    self._thread.start()
    return self

  def renew(self, data: Optional[bytes] = None) -> float:
    """Writes the lease now (with `data` from now on, if given); returns
    the store's stamp of that write."""
    with self._lock:
      if data is not None:
        self._data = data
      with paths.open_file(self.path, "wb") as f:
        f.write(self._data)
      self.stamp = paths.modified(self.path)
      return self.stamp

  def _keep(self) -> None:
    while not self._stop.wait(lease_seconds() / 3):
      try:
        if not paths.exists(self.path):
          # Taken as expired and removed by another run: writing it again
          # would claim back what that run may already have taken.
          logging.error("%s: lease lost (this process stalled for more "
                        "than %s s)", self.path, lease_seconds())
          return
        self.renew()
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("%s: lease not renewed (%s); trying again", self.path,
                        e)

  def close(self) -> None:
    """Stops renewing and removes the lease object."""
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    with self._lock:
      try:
        paths.remove(self.path)
      except FileNotFoundError:
        pass

  def __enter__(self) -> "Lease":
    return self.start()

  def __exit__(self, *exc) -> None:
    self.close()
