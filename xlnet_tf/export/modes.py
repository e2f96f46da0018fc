"""File modes of an export: what any new file gets under the umask (TF
writes some with fixed modes), so a server running as another user can
read the export when the umask lets it."""

from __future__ import annotations

import os


def _umask() -> int:
  # /proc says it without changing it (os.umask sets it, process-wide).
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  except (OSError, ValueError):
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def set_ordinary_modes(root: str) -> None:
  """Directories 0777 and files 0666 less the umask, as any new file gets
  (TF writes some with fixed modes): a server running as another user can
  read the export when the umask lets it."""
  mask = _umask()
  for dirpath, dirnames, filenames in os.walk(root, topdown=False):
    for name in filenames:
      path = os.path.join(dirpath, name)
      if not os.path.islink(path):
        os.chmod(path, 0o666 & ~mask)
    for name in dirnames:
      path = os.path.join(dirpath, name)
      if not os.path.islink(path):
        os.chmod(path, 0o777 & ~mask)
  os.chmod(root, 0o777 & ~mask)
