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
TFRecord datasets, summaries) goes to TF with the path as given
(`tf_path`): TF has `gs://` built in, but TF 2.20 has no `s3://`, so such a
flag is refused in one line before any work.

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
import os
import posixpath
import re
import shutil
import tempfile
import threading
from typing import IO, Iterator, List, Optional, Tuple

from data_utils.errors import UsageError

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
# The schemes TensorFlow 2.20 reads and writes itself (besides local paths).
TF_SCHEMES = ("gs",)
# What a user installs for each scheme's filesystem.
_INSTALL = {"gs": "gcsfs", "gcs": "gcsfs", "s3": "s3fs", "s3a": "s3fs"}
# The bounded wait for a store to answer the first request of a run.
CHECK_SECONDS = float(os.environ.get("XLNET_TF_STORE_TIMEOUT", "30"))


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


def _local(path: str) -> str:
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
  return os.path.abspath(_local(path))


def join(path: str, *parts: str) -> str:
  """`os.path.join` for local paths, "/"-joined keys for URLs."""
  if is_remote(path):
    return posixpath.join(path, *parts)
  return os.path.join(_local(path), *parts)


def dirname(path: str) -> str:
  """The folder of `path` ("gs://b" for an object at the top of bucket b).

  >>> dirname("gs://b/o/x.json"), dirname("gs://b/x")
  ('gs://b/o', 'gs://b')
  """
  if is_remote(path):
    head = posixpath.dirname(path.rstrip("/"))
    return head if head.count("/") >= 2 and not head.endswith(":/") else \
        path.rstrip("/")
  return os.path.dirname(_local(path))


def basename(path: str) -> str:
  return posixpath.basename(path.rstrip("/")) if is_remote(path) else \
      os.path.basename(os.path.normpath(_local(path)))


def relpath(path: str, start: str) -> str:
  """`path` below `start`, as `os.path.relpath` (URLs: the key's rest)."""
  if is_remote(path):
    start = start.rstrip("/") + "/"
    return path[len(start):] if path.startswith(start) else path
  return os.path.relpath(_local(path), _local(start))


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
  return os.path.exists(_local(path))


def isfile(path: str) -> bool:
  if is_remote(path):
    return filesystem(path).isfile(path)
  return os.path.isfile(_local(path))


def isdir(path: str) -> bool:
  """A local folder; in a bucket, a bucket or a prefix with objects below."""
  if is_remote(path):
    return filesystem(path).isdir(path)
  return os.path.isdir(_local(path))


def getsize(path: str) -> int:
  if is_remote(path):
    return filesystem(path).size(path)
  return os.path.getsize(_local(path))


def listdir(path: str) -> List[str]:
  """The names in folder `path`, sorted (FileNotFoundError if it has
  none)."""
  if not is_remote(path):
    return sorted(os.listdir(_local(path)))
  fs = filesystem(path)
  names = sorted({posixpath.basename(p.rstrip("/"))
                  for p in fs.ls(path, detail=False)})
  return [n for n in names if n]


def walk_files(path: str) -> List[str]:
  """Every file below folder `path`, as paths relative to it, sorted."""
  if not is_remote(path):
    root = _local(path)
    found = []
    for top, _, files in os.walk(root):
      found += [os.path.relpath(os.path.join(top, f), root) for f in files]
    return sorted(found)
  fs = filesystem(path)
  prefix = _key(path).rstrip("/") + "/"
  return sorted(k[len(prefix):] for k in fs.find(path)
                if k.startswith(prefix))


def glob(pattern: str) -> List[str]:
  """The files matching `pattern` (`*`, `?`, `[...]` within one name),
  sorted; URLs keep their scheme."""
  if not is_remote(pattern):
    return sorted(glob_module.glob(_local(pattern)))
  fs = filesystem(pattern)
  return sorted(_url(pattern, k) for k in fs.glob(pattern)
                if fnmatch.fnmatchcase(k, _key(pattern)))


# ---- reading and writing ---------------------------------------------------

def open_file(path: str, mode: str = "r", encoding: Optional[str] = None,
              newline: Optional[str] = None) -> IO:
  """`open()` for a local path; an fsspec file for a URL (written objects
  appear when the file closes, whole)."""
  if not is_remote(path):
    return open(_local(path), mode, encoding=encoding, newline=newline)  # pylint: disable=unspecified-encoding
  if "b" not in mode and encoding is None:
    encoding = "utf-8"
  return filesystem(path).open(path, mode, encoding=encoding,
                               newline=newline)


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def makedirs(path: str) -> None:
  """Makes a local folder (and its parents); nothing in a bucket."""
  if not is_remote(path):
    os.makedirs(_local(path), exist_ok=True)


def remove(path: str) -> None:
  if is_remote(path):
    filesystem(path).rm_file(path)
  else:
    os.remove(_local(path))


def rmtree(path: str) -> None:
  """Removes folder `path` and everything below it (no error if gone)."""
  if not is_remote(path):
    shutil.rmtree(_local(path), ignore_errors=True)
    return
  fs = filesystem(path)
  keys = fs.find(path)
  if keys:
    fs.rm(keys)


def upload(local_path: str, path: str) -> None:
  """Copies a finished local file to `path` (a URL: one object, whole when
  the upload completes; a local path: a copy)."""
  if is_remote(path):
    filesystem(path).put_file(local_path, path)
  else:
    shutil.copyfile(local_path, _local(path))


def download(path: str, local_path: str) -> None:
  if is_remote(path):
    filesystem(path).get_file(path, local_path)
  else:
    shutil.copyfile(_local(path), local_path)


def copy(source: str, target: str) -> None:
  """Copies one file, within one store (server side) or between any two."""
  if is_remote(source) and scheme(source) == scheme(target):
    filesystem(source).copy(source, target)
  elif not is_remote(source) and not is_remote(target):
    shutil.copyfile(_local(source), _local(target))
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
    yield _local(path)
    return
  with scratch_dir() as tmp:
    local = os.path.join(tmp, basename(path))
    download(path, local)
    yield local


# ---- checks ----------------------------------------------------------------

def tf_path(path: str, flag: str) -> str:
  """`path` for TensorFlow to read or write itself (checkpoints,
  SavedModels, TFRecord datasets, summaries): a local path made absolute,
  or a `gs://` URL as given. Any other URL is a one-line UsageError naming
  `--flag`: TF 2.20 has no filesystem for it.

  >>> tf_path("gs://b/model", "model_dir")
  'gs://b/model'
  >>> tf_path("s3://b/model", "model_dir")
  Traceback (most recent call last):
  ...
  data_utils.errors.UsageError: --model_dir=s3://b/model: TensorFlow 2.20 has no s3:// filesystem (it reads and writes this path itself); use gs:// or a local path
  """
  name = scheme(path)
  if name and name not in TF_SCHEMES:
    raise UsageError(f"--{flag}={path}: TensorFlow 2.20 has no {name}:// "
                     "filesystem (it reads and writes this path itself); "
                     "use gs:// or a local path")
  return absolute(path)


def check_store(path: str, flag: str) -> None:
  """One-line UsageError naming `--flag` unless the store of URL `path` can
  be used: its filesystem is installed, the endpoint answers (within
  CHECK_SECONDS), there are credentials, and the bucket exists. Nothing for
  a local path; writes nothing."""
  if not is_remote(path):
    return
  where = f"--{flag}={path}"
  try:
    fs = filesystem(path)
  except UsageError as e:
    raise UsageError(f"--{flag}={e}") from None
  name = bucket(path)
  if not name:
    raise UsageError(f"{where}: names no bucket")
  missing = _with_deadline(lambda: _credentials_missing(path))[0]
  if missing:
    raise UsageError(f"{where}: {missing}")
  # info, not exists: exists answers False for an unreachable endpoint too.
  _, error = _with_deadline(lambda: fs.info(f"{scheme(path)}://{name}"))
  if error is None:
    return
  if isinstance(error, FileNotFoundError):
    raise UsageError(f"{where}: bucket {name} does not exist (or these "
                     "credentials cannot see it)")
  raise UsageError(f"{where}: {store_problem(path, error)}")


def _credentials_missing(path: str) -> Optional[str]:
  """Why there are no credentials for URL `path`'s store, or None. Asked
  up front: without them s3fs and gcsfs fall back to anonymous access, and
  a bucket would then just look missing."""
  if scheme(path) in ("s3", "s3a"):
    import botocore.session  # pylint: disable=g-import-not-at-top
    if botocore.session.get_session().get_credentials() is None:
      return ("no credentials for s3:// (set AWS_ACCESS_KEY_ID and "
              "AWS_SECRET_ACCESS_KEY, or an AWS profile)")
  elif scheme(path) in ("gs", "gcs") and not os.environ.get(
      "STORAGE_EMULATOR_HOST"):
    import google.auth  # pylint: disable=g-import-not-at-top
    try:
      google.auth.default()
    except google.auth.exceptions.DefaultCredentialsError:
      return ("no credentials for gs:// (run gcloud auth application-default"
              " login, or set GOOGLE_APPLICATION_CREDENTIALS)")
  return None


def _with_deadline(call) -> Tuple[object, Optional[BaseException]]:
  """`call()`'s result, or the error it raised; a TimeoutError after
  CHECK_SECONDS (the call goes on in a daemon thread)."""
  box: dict = {}

  def run():
    try:
      box["value"] = call()
    except BaseException as e:  # pylint: disable=broad-except
      box["error"] = e

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  thread.join(CHECK_SECONDS)
  if thread.is_alive():
    return None, TimeoutError(f"no answer within {CHECK_SECONDS:g} s")
  return box.get("value"), box.get("error")


def store_problem(path: str, error: BaseException) -> str:
  """What went wrong with a store request, in a few words, from the
  libraries' exceptions (credentials, endpoint, permission)."""
  name = type(error).__name__
  text = " ".join(str(error).split())
  if name in ("NoCredentialsError", "PartialCredentialsError",
              "DefaultCredentialsError", "RefreshError"):
    return f"the credentials for {scheme(path)}:// do not work ({text})"
  if isinstance(error, TimeoutError) or name in (
      "EndpointConnectionError", "ConnectTimeoutError",
      "ClientConnectorError", "ServerTimeoutError", "ConnectionError",
      "ConnectError", "ClientConnectionError"):
    endpoint = (os.environ.get("AWS_ENDPOINT_URL") if
                scheme(path).startswith("s3") else
                os.environ.get("STORAGE_EMULATOR_HOST"))
    at = f" at {endpoint}" if endpoint else ""
    return f"the {scheme(path)}:// endpoint{at} does not answer ({text})"
  if isinstance(error, PermissionError) or "403" in text or "401" in text:
    return f"access denied ({text})"
  return f"{name}: {text}" if text else name


def check_writable_dir(path: str, flag: str, value: Optional[str] = None
                       ) -> None:
  """UsageError unless `path` is, or can be made as, a writable folder
  (`value`: the flag's value, where `path` is derived from it, e.g. the
  folder of a prefix). Locally, the nearest existing ancestor must be a
  writable folder; in a bucket, the store must answer and the bucket exist
  (`check_store`). Creates nothing."""
  where = f"--{flag}={path if value is None else value}"
  if not path:
    raise UsageError(f"--{flag} is required")
  if is_remote(path):
    check_store(path, flag)
    if isfile(path):
      raise UsageError(f"{where}: {path} is an object, not a folder")
    return
  probe = os.path.abspath(_local(path))
  if os.path.exists(probe) and not os.path.isdir(probe):
    what = "" if value is None else f" {path}"
    raise UsageError(f"{where}:{what} exists and is not a directory")
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise UsageError(f"{where}: {probe} is a file, not a directory")
  if not os.access(probe, os.W_OK | os.X_OK):
    raise UsageError(f"{where}: {probe} is not writable")
