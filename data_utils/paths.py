"""Every file access of the project goes through here: local paths exactly
as the OS sees them, and buckets (`gs://`, `s3://`, any URL fsspec knows).

Why fsspec (gcsfs, s3fs), not Beam's `FileSystems`: one layer must serve the
entry scripts, the plain CLIs and the Beam workers alike; fsspec does all
three with the stores' own settings, while Beam's filesystems exist only
with Beam's GCP/AWS extras (about 50 packages) and speak Beam's own
match/create vocabulary. Endpoints and credentials are the stores' own:
`AWS_ENDPOINT_URL` and the AWS credential chain (MinIO, Ceph, SeaweedFS,
moto); Application Default Credentials and `STORAGE_EMULATOR_HOST` for GCS.

What TensorFlow reads and writes itself (checkpoints, SavedModels,
TFRecord datasets, summaries) goes to TF with the path as given: TF has
`gs://` built in, but TF 2.20 has no `s3://`, so such a flag is refused in
one line before any work (`path_checks.tf_path`).

A bucket has no folders and no rename: `makedirs` does nothing there,
`isdir` means "some object lies below", and an object appears whole when its
upload completes (`data_utils.atomic.atomic_path` uploads a finished local
temp file). Paths are strings throughout; a URL keeps its scheme.

Example (local paths are the OS's own):
  >>> import tempfile
  >>> d = tempfile.mkdtemp()
  >>> with open_file(join(d, "a.txt"), "w") as f:
  ...   _ = f.write("hi")
  >>> exists(join(d, "a.txt")), isdir(d), listdir(d)
  (True, True, ['a.txt'])
  >>> scheme("gs://b/x"), scheme("/tmp/x"), join("s3://b/out", "p.json")
  ('gs', '', 's3://b/out/p.json')
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob as glob_module
import io
import os
import posixpath
import re
import shutil
import tempfile
import threading
from typing import IO, Iterator, List, Optional, Sequence

from data_utils.errors import UsageError

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
# What a user installs for each scheme's filesystem.
_INSTALL = {"gs": "gcsfs", "gcs": "gcsfs", "s3": "s3fs", "s3a": "s3fs"}


def scheme(path: str) -> str:
  """The URL scheme of `path`, lower case ("" for a local path; `file://`
  is local).

  >>> scheme("S3://b/k"), scheme("file:///tmp/x"), scheme("rel/x")
  ('s3', '', '')
  """
  match = _URL.match(str(path))
  if not match or match.group("scheme").lower() == "file":
    return ""
  return match.group("scheme").lower()


def is_remote(path: str) -> bool:
  """Whether `path` is a URL of a store (not a local path)."""
  return bool(scheme(path))


def local_path(path: str) -> str:
  """A local path as the OS names it (`file://` dropped)."""
  match = _URL.match(str(path))
  if match and match.group("scheme").lower() == "file":
    return match.group("rest")
  return str(path)


def bucket(path: str) -> str:
  """The bucket of a URL.

  >>> bucket("gs://data/corpus/a.txt")
  'data'
  """
  return _URL.match(path).group("rest").split("/", 1)[0]


def absolute(path: str) -> str:
  """A local path made absolute; a URL as given (without a trailing "/").

  >>> absolute("gs://b/out/")
  'gs://b/out'
  """
  if is_remote(path):
    return path.rstrip("/") if path.rstrip("/").count("/") > 2 else path
  return os.path.abspath(local_path(path))


def join(path: str, *parts: str) -> str:
  """`os.path.join` for local paths, "/"-joined keys for URLs."""
  if is_remote(path):
    return posixpath.join(path, *parts)
  return os.path.join(local_path(path), *parts)


def dirname(path: str) -> str:
  """The folder of `path` ("gs://b" for an object at the top of bucket b).

  >>> dirname("gs://b/o/x.json"), dirname("gs://b/x")
  ('gs://b/o', 'gs://b')
  """
  if is_remote(path):
    head = posixpath.dirname(path.rstrip("/"))
    return head if head.count("/") >= 2 and not head.endswith(":/") else \
        path.rstrip("/")
  return os.path.dirname(local_path(path))


def basename(path: str) -> str:
  return posixpath.basename(path.rstrip("/")) if is_remote(path) else \
      os.path.basename(os.path.normpath(local_path(path)))


def relpath(path: str, start: str) -> str:
  """`path` below `start`, as `os.path.relpath` (URLs: the key's rest)."""
  if is_remote(path):
    start = start.rstrip("/") + "/"
    return path[len(start):] if path.startswith(start) else path
  return os.path.relpath(local_path(path), local_path(start))


def common_folder(path_list: Sequence[str]) -> str:
  """The folder every one of `path_list` (absolute, or URLs) lies below;
  "" when they share no store. Outputs name their inputs relative to it
  (`name_in`), so where a corpus lies, on a disk or in a bucket, is not
  part of the bytes.

  >>> common_folder(["gs://b/c/x.txt", "gs://b/c/d/y.txt"])
  'gs://b/c'
  >>> common_folder(["/data/a/x.txt", "/data/b/y.txt"])
  '/data'
  """
  schemes = {scheme(p) for p in path_list}
  if len(schemes) != 1:
    return ""
  name = schemes.pop()
  if not name:
    return os.path.commonpath([os.path.dirname(local_path(p))
                               for p in path_list])
  rests = [p.split("://", 1)[1] for p in path_list]
  return f"{name}://" + posixpath.commonpath(
      [posixpath.dirname(r) for r in rests])


def name_in(path: str, root: str) -> str:
  """`path` relative to folder `root` (`common_folder`); whole when `root`
  is "".

  >>> name_in("s3://b/c/d/y.txt", "s3://b/c"), name_in("/x/y.txt", "")
  ('d/y.txt', '/x/y.txt')
  """
  if not root:
    return path
  if not is_remote(root):
    return os.path.relpath(local_path(path), local_path(root))
  prefix = root if root.endswith("/") else root + "/"
  return path[len(prefix):] if path.startswith(prefix) else path


# ---- filesystems -----------------------------------------------------------

_FILESYSTEMS: dict = {}
_LOCK = threading.Lock()


def filesystem(path: str):
  """The fsspec filesystem of a URL (one per scheme and process), without
  a listings cache: other processes write the same bucket. A scheme with no
  filesystem installed is a `UsageError` naming the package."""
  name = scheme(path)
  key = (name, os.getpid())
  with _LOCK:
    if key not in _FILESYSTEMS:
      _FILESYSTEMS[key] = _open_filesystem(name, path)
    return _FILESYSTEMS[key]


def _open_filesystem(name: str, path: str):
  if name in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
    # An emulator has no gRPC endpoint for gcsfs's experimental zonal/HNS
    # probe (on by default; some gcsfs versions wait 60 s on it per call,
    # measured for issue 36). gcsfs reads this when fsspec imports it below.
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
  try:
    import fsspec  # pylint: disable=g-import-not-at-top
    cls = fsspec.get_filesystem_class(name)
  except (ImportError, ValueError) as e:
    hint = _INSTALL.get(name)
    install = (f"pip install {hint} (or xlnet-tf[cloud])" if hint else
               "no fsspec filesystem knows it")
    raise UsageError(f"{path}: no filesystem for {name}:// is installed "
                     f"({install})") from e
  options = {"use_listings_cache": False, "skip_instance_cache": True}
  if name in ("s3", "s3a"):
    # A dead endpoint fails in seconds, not after botocore's 60 s timeouts.
    options["config_kwargs"] = {"connect_timeout": 10, "read_timeout": 120,
                                "retries": {"max_attempts": 3}}
  return cls(**options)


def _key(path: str) -> str:
  return filesystem(path)._strip_protocol(path)  # pylint: disable=protected-access


def _url(path: str, key: str) -> str:
  return f"{scheme(path)}://{key.lstrip('/')}"


# ---- questions -------------------------------------------------------------

def exists(path: str) -> bool:
  if is_remote(path):
    return filesystem(path).exists(path)
  return os.path.exists(local_path(path))


def isfile(path: str) -> bool:
  if is_remote(path):
    return filesystem(path).isfile(path)
  return os.path.isfile(local_path(path))


def isdir(path: str) -> bool:
  """A local folder; in a bucket, a bucket or a prefix with objects below."""
  if is_remote(path):
    return filesystem(path).isdir(path)
  return os.path.isdir(local_path(path))


def getsize(path: str) -> int:
  if is_remote(path):
    return filesystem(path).size(path)
  return os.path.getsize(local_path(path))


def listdir(path: str) -> List[str]:
  """The names in folder `path`, sorted (FileNotFoundError if it has
  none)."""
  if not is_remote(path):
    return sorted(os.listdir(local_path(path)))
  fs = filesystem(path)
  names = sorted({posixpath.basename(p.rstrip("/"))
                  for p in fs.ls(path, detail=False)})
  return [n for n in names if n]


def walk_files(path: str) -> List[str]:
  """Every file below folder `path`, as paths relative to it, sorted."""
  if not is_remote(path):
    root = local_path(path)
    found = []
    for top, _, files in os.walk(root):
      found += [os.path.relpath(os.path.join(top, f), root) for f in files]
    return sorted(found)
  fs = filesystem(path)
  prefix = _key(path).rstrip("/") + "/"
  # A key ending in "/" is a folder marker (TF makes them in GCS), not a file.
  return sorted(k[len(prefix):] for k in fs.find(path)
                if k.startswith(prefix) and not k.endswith("/"))


def glob(pattern: str) -> List[str]:
  """The files matching `pattern` (`*`, `?`, `[...]` within one name),
  sorted; URLs keep their scheme."""
  if not is_remote(pattern):
    return sorted(glob_module.glob(local_path(pattern)))
  fs = filesystem(pattern)
  return sorted(_url(pattern, k) for k in fs.glob(pattern)
                if fnmatch.fnmatchcase(k, _key(pattern)))


# ---- reading and writing ---------------------------------------------------

def open_file(path: str, mode: str = "r", encoding: Optional[str] = None,
              newline: Optional[str] = None,
              buffering: int = io.DEFAULT_BUFFER_SIZE) -> IO:
  """`open()` for a local path; an fsspec file for a URL (written objects
  appear when the file closes, whole). A URL read in binary comes in an
  `io.BufferedReader`, as a local file does: fsspec's own files have no
  `readline(limit)`, which bounds what a long line holds in memory."""
  if not is_remote(path):
    return open(local_path(path), mode, buffering, encoding=encoding,  # pylint: disable=unspecified-encoding
                newline=newline)
  if "b" not in mode and encoding is None:
    encoding = "utf-8"
  f = filesystem(path).open(path, mode, encoding=encoding, newline=newline)
  if mode == "rb":
    return io.BufferedReader(f, buffering)
  return f


def read_bytes(path: str) -> bytes:
  """A whole file; from a bucket in one request (so one version of it)."""
  if is_remote(path):
    return filesystem(path).cat_file(path)
  with open(local_path(path), "rb") as f:
    return f.read()


def create_exclusive(path: str, data: bytes) -> bool:
  """Writes object `data` at URL `path` unless one is there: True if this
  call made it (of racing writers one does: the store decides)."""
  try:  # GCS ifGenerationMatch=0, S3 If-None-Match: *
    filesystem(path).pipe_file(path, data, mode="create")
  except FileExistsError:  # what gcsfs (on a 412) and s3fs raise
    return False
  return True


def modified(path: str) -> float:
  """When `path` was last written (seconds since 1970, its store's clock)."""
  return filesystem(path).modified(path).timestamp() if is_remote(path) \
      else os.path.getmtime(local_path(path))


def makedirs(path: str) -> None:
  """Makes a local folder (and its parents); nothing in a bucket."""
  if not is_remote(path):
    os.makedirs(local_path(path), exist_ok=True)


def remove(path: str) -> None:
  if is_remote(path):
    filesystem(path).rm_file(path)
  else:
    os.remove(local_path(path))


def rmtree(path: str) -> None:
  """Removes folder `path` and everything below it (no error if gone)."""
  if not is_remote(path):
    shutil.rmtree(local_path(path), ignore_errors=True)
    return
  keys = filesystem(path).find(path)
  if keys:
    filesystem(path).rm(keys)


def upload(local_file: str, path: str) -> None:
  """Copies a finished local file to `path` (a URL: one object, whole when
  the upload completes; a local path: a copy)."""
  if is_remote(path):
    filesystem(path).put_file(local_file, path)
  else:
    shutil.copyfile(local_file, local_path(path))


def download(path: str, local_file: str) -> None:
  if is_remote(path):
    filesystem(path).get_file(path, local_file)
  else:
    shutil.copyfile(local_path(path), local_file)


def copy(source: str, target: str) -> None:
  """Copies one file, within one store (server side) or between any two."""
  if is_remote(source) and scheme(source) == scheme(target):
    filesystem(source).copy(source, target)
  elif not is_remote(source) and not is_remote(target):
    shutil.copyfile(local_path(source), local_path(target))
  else:
    with scratch_dir() as tmp:
      local = os.path.join(tmp, "copy")
      download(source, local)
      upload(local, target)


@contextlib.contextmanager
def scratch_dir() -> Iterator[str]:
  """A new local temp folder of this process (removed when the block ends):
  the local scratch of a unit that reads or writes a bucket."""
  path = tempfile.mkdtemp(prefix="xlnet-tf-scratch-")
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
  """A local path holding `path`'s bytes for the block: `path` itself when
  local; else a download into local scratch, removed after."""
  if not is_remote(path):
    yield local_path(path)
    return
  with scratch_dir() as tmp:
    local = os.path.join(tmp, basename(path))
    download(path, local)
    yield local
