"""Whether a path can be used, asked before any work: one line naming the
flag for every bad location (exit 2 through `errors.run_main`).

- `check_store`: a bucket URL's store has its filesystem installed, answers
  within a bounded wait, has credentials, and holds the bucket (and
  `XLNET_TF_LEASE_SECONDS`, which its writers read, is valid).
- `check_writable_dir`: a folder that is, or can be made as, writable
  (locally: its nearest existing ancestor; in a bucket: `check_store`).
- `tf_path`: a path TensorFlow reads or writes itself: local, or a scheme
  TF has built in (`gs://`); `s3://` is refused there (TF 2.20 has none).

Nothing here creates a folder, so a bad URL never becomes a local folder
named `gs:` or `s3:`.
"""

from __future__ import annotations

import os
import threading
from typing import Optional, Tuple

from data_utils import leases, paths
from data_utils.errors import UsageError

# The bounded wait for a store to answer the first request of a run.
CHECK_SECONDS = float(os.environ.get("XLNET_TF_STORE_TIMEOUT", "30"))
# The schemes TensorFlow 2.20 reads and writes itself (besides local paths).
TF_SCHEMES = ("gs",)


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
  name = paths.scheme(path)
  if name and name not in TF_SCHEMES:
    raise UsageError(f"--{flag}={path}: TensorFlow 2.20 has no {name}:// "
                     "filesystem (it reads and writes this path itself); "
                     "use gs:// or a local path")
  return paths.absolute(path)


def check_store(path: str, flag: str) -> None:
  """One-line UsageError naming `--flag` unless the store of URL `path` can
  be used: its filesystem is installed, the endpoint answers (within
  CHECK_SECONDS), there are credentials, and the bucket exists. Nothing for
  a local path; writes nothing."""
  if not paths.is_remote(path):
    return
  leases.lease_seconds()  # what every writer to a bucket reads
  where = f"--{flag}={path}"
  try:
    fs = paths.filesystem(path)
  except UsageError as e:
    raise UsageError(f"--{flag}={e}") from None
  name = paths.bucket(path)
  if not name:
    raise UsageError(f"{where}: names no bucket")
  missing = _with_deadline(lambda: _credentials_missing(path))[0]
  if missing:
    raise UsageError(f"{where}: {missing}")
  # info, not exists: exists answers False for an unreachable endpoint too.
  root = f"{paths.scheme(path)}://{name}"
  _, error = _with_deadline(lambda: fs.info(root))
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
  if paths.scheme(path) in ("s3", "s3a"):
    import botocore.session  # pylint: disable=g-import-not-at-top
    if botocore.session.get_session().get_credentials() is None:
      return ("no credentials for s3:// (set AWS_ACCESS_KEY_ID and "
              "AWS_SECRET_ACCESS_KEY, or an AWS profile)")
  elif paths.scheme(path) in ("gs", "gcs") and not os.environ.get(
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
    return f"the credentials for {paths.scheme(path)}:// do not work ({text})"
  if isinstance(error, TimeoutError) or name in (
      "EndpointConnectionError", "ConnectTimeoutError",
      "ClientConnectorError", "ServerTimeoutError", "ConnectionError",
      "ConnectError", "ClientConnectionError"):
    endpoint = (os.environ.get("AWS_ENDPOINT_URL") if
                paths.scheme(path).startswith("s3") else
                os.environ.get("STORAGE_EMULATOR_HOST"))
    at = f" at {endpoint}" if endpoint else ""
    return f"the {paths.scheme(path)}:// endpoint{at} does not answer ({text})"
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
  if paths.is_remote(path):
    check_store(path, flag)
    if paths.isfile(path):
      raise UsageError(f"{where}: {path} is an object, not a folder")
    return
  probe = os.path.abspath(paths.local_path(path))
  if os.path.exists(probe) and not os.path.isdir(probe):
    what = "" if value is None else f" {path}"
    raise UsageError(f"{where}:{what} exists and is not a directory")
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise UsageError(f"{where}: {probe} is a file, not a directory")
  if not os.access(probe, os.W_OK | os.X_OK):
    raise UsageError(f"{where}: {probe} is not writable")
