"""Files that appear whole or not at all: write a temp file beside the
target, then rename it into place (a crash leaves the old file, or none, and
at most a temp file).

One rule for every writer's temps: files and folders are named
`.tmp-xlnet-<host>-<pid>-<random>`. The prefix is this project's own and the
host and process id say who writes it, so `remove_stale_temps` removes only
temps of ours whose writer is gone (a live writer's, another host's on a
shared disk, or any other file stays). Every writer calls it on the folder
it writes into before it writes (`atomic_path` and `temp_dir` do), so a
killed run's temps go at the next run that writes there.

In a bucket (a `data_utils.paths` URL) there is no rename: an object
appears whole when its upload completes. So `atomic_path` hands out a local
temp file and uploads it to the final name when the block ends well, and a
`temp_dir` there is a key prefix with the same temp name, whose objects are
removed when the block ends. Its writer holds a lease beside it
(`<temp name>.lease`, `data_utils.leases`) from before its first object
until after its last is removed, so a dead writer's temp goes at the next
run there on any host once the lease has expired (on its own host, as soon
as its process is gone), and a live one's stays.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
from typing import List, Optional

from data_utils import leases, paths
from data_utils.errors import disk_full_is

TEMP_PREFIX = ".tmp-xlnet-"
# mkstemp's random part is lower-case letters, digits and "_".
_TEMP_NAME = re.compile(r"^\.tmp-xlnet-(?P<host>.+)-(?P<pid>\d+)-[a-z0-9_]+$")


def host_name() -> str:
  # Kept to what is safe in a file name (hostnames are letters, digits, "-"
  # and "."; anything else becomes "_").
  return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def temp_prefix() -> str:
  """The name prefix of this process's temp files."""
  return f"{TEMP_PREFIX}{host_name()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
  if pid <= 0:
    return True  # not a pid we could have written: never remove
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):
    return True  # another user's live process, or not a pid: keep
  return True


def writer_gone(host: str, pid: int) -> bool:
  """True when the writer a temp name records (`host`, `pid`) has stopped:
  it ran on this host and its process is gone. Another host's writer (a
  shared disk) is never taken for gone."""
  return host == host_name() and not _pid_alive(pid)


def remove_stale_temps(directory: str,
                       now: Optional[float] = None) -> List[str]:
  """Removes the temp files and folders of this project in `directory`
  whose writing process (on this host) is no longer running, and in a
  bucket also those whose lease has expired by `now` (a stamp of that
  store; by default a fresh one); returns their paths. Any other file, and
  a live writer's temp, is left alone.

  Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> dead = os.path.join(d, f".tmp-xlnet-{host_name()}-999999999-abc")
    >>> for name in (dead, os.path.join(d, ".tmp-foo")):
    ...   open(name, "w").close()
    >>> [os.path.basename(p) for p in remove_stale_temps(d)] == [
    ...     os.path.basename(dead)]
    True
    >>> os.listdir(d)
    ['.tmp-foo']
  """
  removed = []
  try:
    names = paths.listdir(directory)
  except FileNotFoundError:
    return removed
  if paths.is_remote(directory):
    return _remove_stale_in_bucket(directory, names, now)
  for name in names:
    match = _TEMP_NAME.match(name)
    if not match or not writer_gone(match.group("host"),
                                    int(match.group("pid"))):
      continue
    path = paths.join(directory, name)
    if os.path.islink(path):
      continue
    try:
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.isfile(path):
        os.remove(path)
      else:
        continue
    except FileNotFoundError:
      continue  # another run cleaned it first
    removed.append(path)
  return removed


def _remove_stale_in_bucket(directory: str, names: List[str],
                            now: Optional[float]) -> List[str]:
  leased = {n[:-len(leases.SUFFIX)] for n in names
            if n.endswith(leases.SUFFIX)
            and _TEMP_NAME.match(n[:-len(leases.SUFFIX)])}
  stamp = [now]

  def gone(name: str) -> bool:
    match = _TEMP_NAME.match(name)
    if writer_gone(match.group("host"), int(match.group("pid"))):
      return True
    if name not in leased:
      return False
    if stamp[0] is None:  # the store's time now, from a lease of our own
      with leases.Lease(paths.join(directory, temp_prefix() + _random_part()
                                   + leases.SUFFIX)) as probe:
        stamp[0] = probe.stamp
    return leases.expired(paths.join(directory, name + leases.SUFFIX),
                          stamp[0])

  removed = []
  for name in names:
    if not _TEMP_NAME.match(name) or not gone(name):
      continue
    path = paths.join(directory, name)
    paths.rmtree(path)
    if paths.isfile(path):
      paths.remove(path)
    removed.append(path)
  for name in leased:  # after its temp, so no temp is ever left unleased
    if paths.join(directory, name) in removed or (
        name not in names and gone(name)):
      try:
        paths.remove(paths.join(directory, name + leases.SUFFIX))
      except FileNotFoundError:
        pass  # another run removed it first
  return removed


@contextlib.contextmanager
def temp_dir(directory: str):
  """Yields a new temp folder (`temp_prefix()` + random) in `directory`,
  after removing the stale temps there; removes it, and whatever is still
  in it, when the block ends (a writer renames what it keeps out first).
  In a bucket its lease (`<name>.lease`) is held from before the first
  object until the last is removed."""
  if paths.is_remote(directory):
    path = paths.join(directory, temp_prefix() + _random_part())
    with leases.Lease(path + leases.SUFFIX) as lease:
      remove_stale_temps(directory, now=lease.stamp)
      try:
        yield path
      finally:
        paths.rmtree(path)
    return
  os.makedirs(directory, exist_ok=True)
  remove_stale_temps(directory)
  path = tempfile.mkdtemp(dir=directory, prefix=temp_prefix())
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)


def _random_part() -> str:
  # The same alphabet as mkstemp's random part (see _TEMP_NAME).
  return next(tempfile._get_candidate_names())  # pylint: disable=protected-access


@contextlib.contextmanager
def atomic_path(path: str):
  """Yields a temp path (`temp_prefix()` + random, beside `path`) to write;
  renames it to `path` if the block ends normally, deletes it otherwise.
  A full disk is a one-line `UserError` naming `path` (whatever was there
  before stays as it was).

  Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(d, "a.txt")) as tmp:
    ...   _ = open(tmp, "w").write("hi")
    >>> open(os.path.join(d, "a.txt")).read()
    'hi'
  """
  if paths.is_remote(path):
    with _uploaded(path) as tmp:
      yield tmp
    return
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  remove_stale_temps(directory)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=temp_prefix())
  os.close(fd)
  try:
    with disk_full_is(f"{path}: no space left on device (not written; what "
                      "was there before is kept)"):
      yield tmp
      os.chmod(tmp, 0o644)
      os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


@contextlib.contextmanager
def _uploaded(path: str):
  """A local temp file (in the system temp folder, under this process's
  temp name) that is uploaded to URL `path` when the block ends well; the
  object appears whole, or not at all."""
  scratch = tempfile.gettempdir()
  remove_stale_temps(scratch)
  fd, tmp = tempfile.mkstemp(dir=scratch, prefix=temp_prefix())
  os.close(fd)
  try:
    with disk_full_is(f"{path}: no space left on device for its local temp "
                      f"file in {scratch} (not written)"):
      yield tmp
    paths.upload(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_text(path: str, text: str) -> None:
  with atomic_path(path) as tmp:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)


def write_json(path: str, data, indent: int = 2) -> None:
  """JSON with sorted keys, atomically (same data, same bytes)."""
  write_text(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")
