"""A claim on a folder in a bucket, which runs that agree share and a run
that disagrees is refused (`save_dir.claimed` in a bucket: one build per
save_dir, even for runs started at the same moment). A bucket has no locks;
this uses what every store gives: a create that only one writer wins
(`paths.create_exclusive`), reads that see every finished write, and leases
(`data_utils.leases`).

  <claim>            {"epoch": E, "holds": the settings}, created exclusively
  <claim>.d/<run>.lease   each run's lease; it holds E while the run holds
                     the claim (and "" while it only looks)
  <claim>.d/closing-E-<k> the one run now deciding whether to remove claim E

Taking: a run reads the claim. None: it writes E into its lease, then
creates the claim; of runs racing, one creates it and the others read it.
Same settings: it writes E into its lease, then reads that no closing
marker is fresh and that the claim still holds E; else it tries again.
Other settings: refused (`refuse`) if any lease holding E is live; if none
is (its holders died), it closes E and tries again.

Closing (the last holder leaving, or a run breaking a dead claim): create
closing marker k (one run wins it; a marker older than a lease period is
one whose run died, so the next k is taken), read that the claim still
holds E and that no live lease holds E, then remove the claim, the markers
and the expired leases. A run joining writes its lease before it reads the
markers, a closer creates its marker before it reads the leases: so either
the closer sees the joiner, or the joiner sees the marker and tries again.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from typing import Callable, Optional

from data_utils import leases, paths
from data_utils.atomic import host_name
from data_utils.errors import UsageError

_CLOSING = "closing-"


def _holders(claim: str) -> str:
  return claim + ".d"


def _read(claim: str) -> Optional[dict]:
  """The claim's content; None when there is none. An object there that is
  not a claim of ours is a one-line UsageError: it is never taken over or
  removed."""
  try:
    data = json.loads(paths.read_bytes(claim))
  except FileNotFoundError:
    return None
  except ValueError:
    data = None
  if not (isinstance(data, dict) and isinstance(data.get("epoch"), str)
          and data["epoch"]):
    raise UsageError(f"{claim}: not a build claim of xlnet-tf (JSON with an "
                     "epoch and settings); it is left as it is: remove it if "
                     "it is not yours, or use another folder")
  return data


def _epoch(content: Optional[dict]) -> Optional[str]:
  # Never "": a lease holding "" is a run that only looks.
  return None if content is None else content["epoch"]


def _wait() -> None:
  # A marker or a claim changes hands within a few requests: try again soon,
  # apart from the runs doing the same.
  time.sleep(random.uniform(0.05, 0.3))


def _live_holders(claim: str, epoch: str, now: float,
                  besides: str = "") -> bool:
  folder = _holders(claim)
  try:
    names = paths.listdir(folder)
  except FileNotFoundError:
    return False
  for name in names:
    path = paths.join(folder, name)
    if not name.endswith(leases.SUFFIX) or path == besides:
      continue
    try:
      holds = paths.read_bytes(path).decode("utf-8", "replace")
    except FileNotFoundError:
      continue
    if holds == epoch and not leases.expired(path, now):
      return True
  return False


def _markers(claim: str, epoch: str) -> list:
  folder = _holders(claim)
  try:
    names = paths.listdir(folder)
  except FileNotFoundError:
    return []
  prefix = f"{_CLOSING}{epoch}-"
  return [paths.join(folder, n) for n in names if n.startswith(prefix)]


def _closing(claim: str, epoch: str, now: float) -> bool:
  """Whether a run is deciding now whether to remove claim `epoch`."""
  return any(not leases.expired(m, now) for m in _markers(claim, epoch))


def _close(claim: str, epoch: str, lease: leases.Lease,
           deadline: float) -> None:
  """Removes claim `epoch` unless a live lease holds it (this run's
  `lease` holds "" by now) or the claim has moved on."""
  while time.monotonic() < deadline:
    if _epoch(_read(claim)) != epoch:
      return
    now = lease.renew()
    markers = _markers(claim, epoch)
    if any(not leases.expired(m, now) for m in markers):
      _wait()  # another run is closing it
      continue
    k = 1 + max([int(m.rsplit("-", 1)[1]) for m in markers], default=-1)
    mine = paths.join(_holders(claim), f"{_CLOSING}{epoch}-{k}")
    if not paths.create_exclusive(mine, b""):
      _wait()
      continue
    try:
      if _epoch(_read(claim)) != epoch or _live_holders(
          claim, epoch, now, besides=lease.path):
        return
      paths.remove(claim)
      _sweep(claim, now, lease.path)
    finally:
      for marker in _markers(claim, epoch):
        _remove(marker)
    return


def _sweep(claim: str, now: float, mine: str) -> None:
  """Removes the leases of runs that died (expired) and dead closers'
  markers; a live run's lease, and anything not named by us, stays."""
  folder = _holders(claim)
  try:
    names = paths.listdir(folder)
  except FileNotFoundError:
    return
  for name in names:
    path = paths.join(folder, name)
    ours = name.endswith(leases.SUFFIX) or name.startswith(_CLOSING)
    if ours and path != mine and leases.expired(path, now):
      _remove(path)


def _remove(path: str) -> None:
  try:
    paths.remove(path)
  except FileNotFoundError:
    pass  # another run removed it first


@contextlib.contextmanager
def held(claim: str, holds: dict, refuse: Callable[[bytes], None]):
  """Holds the claim at URL `claim` for settings `holds` (JSON values) for
  the block. `refuse(theirs)` gets the settings of the claim found (JSON
  bytes) and raises when this run may not share it: then, if a live run
  holds it, that is raised; a claim whose holders all died is removed and
  taken."""
  me = paths.join(_holders(claim),
                  f"{host_name()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                  f"{leases.SUFFIX}")
  with leases.Lease(me) as lease:
    epoch = _take(claim, holds, refuse, lease, _deadline())
    try:
      yield
    finally:
      lease.renew(b"")
      _close(claim, epoch, lease, _deadline())


def _deadline() -> float:
  # Long enough for dead holders' leases to expire while runs come and go.
  return time.monotonic() + 3 * leases.lease_seconds() + 30


def _take(claim: str, holds: dict, refuse: Callable[[bytes], None],
          lease: leases.Lease, deadline: float) -> str:
  while time.monotonic() < deadline:
    found = _read(claim)
    if found is None:
      epoch = uuid.uuid4().hex
      lease.renew(epoch.encode())
      if paths.create_exclusive(claim, json.dumps(
          {"epoch": epoch, "holds": holds}, sort_keys=True).encode()):
        return epoch
      lease.renew(b"")
      continue
    epoch = _epoch(found)
    try:
      refuse(json.dumps(found.get("holds")).encode())
    except UsageError:
      if _live_holders(claim, epoch, lease.renew(b""), besides=lease.path):
        raise
      _close(claim, epoch, lease, deadline)  # its holders died
      continue
    now = lease.renew(epoch.encode())
    if _closing(claim, epoch, now) or _epoch(_read(claim)) != epoch:
      lease.renew(b"")
      _wait()
      continue
    return epoch
  # Not a bug: runs of one build coming and going without a pause.
  raise UsageError(f"{claim}: other runs kept taking and leaving it for "
                   f"{3 * leases.lease_seconds() + 30:.0f} s; try again")
