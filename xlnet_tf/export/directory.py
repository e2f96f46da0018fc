"""Where an export may be written, and writing it there safely.

An export only ever replaces a previous export of the same kind, which it
recognises by the marker file every export carries (`xlnet_tf_export.json`:
its kind, the files it wrote, the version). Anything else at the path (a
user's directory, a checkpoint folder, an export of another kind or one
older than the marker) is refused with one line, before training and again
at export time. The export is written beside its target, given the
permissions any new directory gets under the umask (a server may run as
another user), then moved into place. In a bucket (gs://), where there is no
rename, it is written in local scratch and uploaded with its marker last
(`bucket.py`).

An export made with a SentencePiece model says how to feed it outside the
graph (a batch-inference job tokenizing in Python): a byte-identical copy
of the model at `assets.extra/spiece.model` and the marker's `batch` entry,
`{"spiece_model": "assets.extra/spiece.model", "spiece_model_sha256",
"lower", "max_seq_length", ...}` plus what the task adds.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf
from absl import logging
from tf_keras.src.saving.legacy.saved_model.utils import keras_option_scope

from data_utils import paths
from data_utils.atomic import host_name, writer_gone
from data_utils.errors import (UsageError, UserError,
                               disk_full_is)
from data_utils.path_checks import check_writable_dir
from xlnet_tf.export.bucket import PARTIAL, write_to_bucket
from xlnet_tf.export.modes import set_ordinary_modes
from xlnet_tf.version import __version__

EXPORT_MARKER = "xlnet_tf_export.json"
MARKER_FORMAT = 1
# An export's kind names its serving contract (the signatures' inputs and
# outputs: a regressor answers `score`, a classifier `logits`/`label`...), so
# a client of one cannot use the other. Each task's spec names its kind
# (`TaskSpec.export_kind`, from its package's `formats.py`); here a kind is
# a name.
_EXPORT_KIND = re.compile(r"^[a-z][a-z_]*$")

# What `tf.saved_model.save` writes at the top of an export, the TFLite
# files of a TFLite export (`layout.py`), plus the marker;
# `<name>.tmp<hex>` is TF's own temp file (a killed save may leave one).
_EXPORT_ENTRY = re.compile(
    r"^(saved_model\.pb(txt)?|fingerprint\.pb|variables|assets|assets\.extra|"
    r"[a-z0-9_]+\.tflite|" + re.escape(EXPORT_MARKER) + r")(\.tmp[0-9a-f]*)?$")

# Temp directories beside the target: `.tmp-export-<host>-<pid>-<8 hex>`
# (`-old` for a replaced export being removed). The host and pid say who
# writes it, so a leftover is removed only once its writer is gone: a live
# export (even one taking hours) and another host's on a shared disk stay.
EXPORT_TEMP_PREFIX = ".tmp-export-"
_TEMP_NAME = re.compile(
    r"^\.tmp-export-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}(-old)?$")
# Versions before the marker used `tempfile.mkdtemp` names, without a writer:
# those are removed only after a day without change (no export takes that
# long between writes).
_LEGACY_TEMP_NAME = re.compile(r"^\.tmp-export-[a-z0-9_]{8}(-old)?$")
LEGACY_TEMP_AGE = 24 * 3600.0
# What training writes in model_dir (checkpoints, summaries, worker dirs):
# an export there would collide with it.
_TRAINING_ENTRY = re.compile(r"^(checkpoint|ckpt-.*|train|\.worker_.*)$")
# Where an export keeps its copy of the SentencePiece model (`assets.extra`
# is TF's folder for files the SavedModel itself does not read).
_BATCH_SPIECE = "assets.extra/spiece.model"


def real_path(path: str) -> str:
  """`os.path.realpath` of a local path; a URL as given (a bucket has no
  links, and a URL made "real" would turn into a local path)."""
  return paths.absolute(path) if paths.is_remote(path) else \
      os.path.realpath(path)


def _inside(path: str, directory: str) -> bool:
  """True if real path `path` lies strictly under real path `directory`."""
  sep = "/" if paths.is_remote(directory) else os.sep
  return path != directory and path.startswith(directory.rstrip(sep) + sep)


def _only_export_entries(names) -> bool:
  return all(_EXPORT_ENTRY.match(n) for n in names)


def read_export_marker(export_dir: str) -> Optional[dict]:
  """The marker of the xlnet-tf export in `export_dir` (`{"kind", "files",
  "xlnet_tf_version", ...}`), None if there is none or it is damaged."""
  try:
    with paths.open_file(paths.join(export_dir, EXPORT_MARKER),
                         encoding="utf-8") as f:
      marker = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(marker, dict) or \
      not _EXPORT_KIND.match(str(marker.get("kind"))) \
      or not isinstance(marker.get("files", []), list):
    return None
  return marker


def check_export_dir(export_dir: str, export_kind: str,
                     flag: str = "export_dir",
                     keep: Optional[Dict[str, str]] = None,
                     model_dir: Optional[str] = None) -> None:
  """Raises a one-line UserError naming `--flag=export_dir` unless an export
  of `export_kind` may be written there: a path that does not exist yet, an empty
  directory, or an xlnet-tf export of the same kind holding only what it
  wrote. `keep` maps flag names to paths the run reads or writes: the export
  may be none of them, nor contain one; inside `model_dir` it may not take a
  name training writes. Writes nothing."""
  names = check_export_target(export_dir, export_kind, flag, keep, model_dir)
  if names is None:
    return
  real = real_path(export_dir)
  where = f"--{flag}={export_dir}"
  # A killed upload to a bucket (`bucket.py`): replaced by the next one.
  partial = paths.is_remote(real) and PARTIAL in names
  if partial and _only_export_entries(set(names) - {PARTIAL}):
    return
  if names:
    if EXPORT_MARKER not in names:
      raise unmarked(where, export_kind, names)
    marker = check_marker_kind(real, export_kind, where)
    extra = sorted(set(names) - set(marker.get("files", [])) -
                   {EXPORT_MARKER, PARTIAL if partial else EXPORT_MARKER})
    if extra:
      raise UserError(
          f"{where}: holds files the export did not write ("
          f"{', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); move "
          "them out or choose another directory")
  if paths.is_remote(real):
    return  # the store answered and has the bucket (check_writable_dir)
  parent = os.path.dirname(real)
  if not os.access(parent, os.W_OK | os.X_OK):
    raise UsageError(f"{where}: {parent} is not writable")


def unmarked(where: str, export_kind: str, names) -> UserError:
  """The refusal of a directory holding `names` and no marker."""
  if "saved_model.pb" in names or "saved_model.pbtxt" in names:
    return UserError(
        f"{where}: holds a SavedModel without {EXPORT_MARKER} (older than "
        "this check, or not an xlnet-tf export); remove it yourself or "
        "choose another directory")
  return UserError(
      f"{where}: exists and is not an xlnet-tf {export_kind} export (no "
      f"{EXPORT_MARKER}); choose another directory or remove it yourself")


def check_marker_kind(path: str, export_kind: str, where: str) -> dict:
  """The marker in `path`; a one-line UserError starting with `where` if it
  is damaged or of another kind."""
  marker = read_export_marker(path)
  if marker is None:
    raise UserError(f"{where}: its {EXPORT_MARKER} is damaged; choose "
                    "another directory or remove it yourself")
  if marker["kind"] != export_kind:
    raise UserError(
        f"{where}: holds an xlnet-tf {marker['kind']} export, not a "
        f"{export_kind} export; choose another directory or remove it "
        "yourself")
  return marker


def check_export_target(export_dir: str, export_kind: str, flag: str,
                        keep: Optional[Dict[str, str]] = None,
                        model_dir: Optional[str] = None
                        ) -> Optional[List[str]]:
  """The checks of `check_export_dir` before its look at what the
  directory holds: the kind is a name, the path is given, it is none of
  `keep`'s paths nor contains one, it takes no name training writes in
  `model_dir`, and it is a directory or can be made one. Returns the names
  in the directory, None if it does not exist yet."""
  if not _EXPORT_KIND.match(export_kind):
    raise ValueError(f"not an export kind: {export_kind!r}")
  where = f"--{flag}={export_dir}"
  if not export_dir:
    raise UsageError(f"--{flag} is required")
  real = real_path(export_dir)
  remote = paths.is_remote(real)
  for name, path in (keep or {}).items():
    if not path:
      continue
    other = real_path(path)
    if other == real:
      raise UsageError(f"{where}: is also --{name}; the export would replace "
                       "it; choose another directory")
    if _inside(other, real):
      raise UsageError(f"{where}: contains --{name}={path}; the export would "
                       "replace it; choose another directory")
  if model_dir and _inside(real, real_path(model_dir)):
    first = paths.relpath(real, real_path(model_dir)).split(
        "/" if remote else os.sep)[0]
    if _TRAINING_ENTRY.match(first):
      raise UsageError(f"{where}: training writes '{first}' in --model_dir="
                       f"{model_dir}; choose another directory")
  if remote:
    check_writable_dir(export_dir, flag)  # the store and its bucket first
  if not paths.exists(real):
    if not remote:
      check_writable_dir(export_dir, flag)
    return None
  if not paths.isdir(real) or (remote and paths.isfile(real)):
    raise UsageError(f"{where}: is a file, not an export directory; choose "
                     "another path")
  return paths.listdir(real) if remote else os.listdir(real)


def remove_stale_export_temps(directory: str) -> List[str]:
  """Removes, in `directory`, the temp directories of interrupted exports of
  this project: named with our prefix, holding nothing but SavedModel
  entries, and whose writer (on this host) is gone (for the pre-marker names,
  unchanged for `LEGACY_TEMP_AGE`). Returns their paths; anything else stays.
  """
  removed = []
  if paths.is_remote(directory):
    return removed  # an export to a bucket keeps its temp in local scratch
  try:
    names = sorted(os.listdir(directory))
  except FileNotFoundError:
    return removed
  now = time.time()
  for name in names:
    path = os.path.join(directory, name)
    match = _TEMP_NAME.match(name)
    try:
      if match:
        if not writer_gone(match.group("host"), int(match.group("pid"))):
          continue
      elif not (_LEGACY_TEMP_NAME.match(name) and
                now - os.lstat(path).st_mtime > LEGACY_TEMP_AGE):
        continue
      if os.path.islink(path) or not os.path.isdir(path) or \
          not _only_export_entries(os.listdir(path)):
        continue
    except FileNotFoundError:
      continue  # another run removed it first
    shutil.rmtree(path, ignore_errors=True)
    removed.append(path)
  return removed


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
  """Swaps two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`); False
  where the system or file system cannot."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (OSError, AttributeError):
    return False
  renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                        ctypes.c_char_p, ctypes.c_uint]
  if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
               _RENAME_EXCHANGE) == 0:
    return True
  err = ctypes.get_errno()
  if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
    return False
  raise OSError(err, os.strerror(err), a, None, b)


def _remove_replaced(path: str) -> None:
  """Removes a replaced export (or empty directory) now at temp `path`; if
  something not ours appeared in it meanwhile, it is left there."""
  names = os.listdir(path)
  if not names:
    os.rmdir(path)
  elif read_export_marker(path) is not None and _only_export_entries(names):
    shutil.rmtree(path, ignore_errors=True)
  else:
    logging.warning("left %s in place: it holds files the export did not "
                    "write", path)


def save_atomically(module: tf.Module, signatures: dict, export_dir: str,
                    export_kind: str, spiece_model_file: Optional[str] = None,
                    batch: Optional[Dict[str, Any]] = None) -> str:
  """`tf.saved_model.save` of `module` with `signatures` through
  `write_atomically`. With `spiece_model_file`, a copy of it at
  `assets.extra/spiece.model` and the marker's `batch` entry: the fields
  of `batch` (`lower`, `max_seq_length`, what the task adds) plus
  `spiece_model` (that path) and `spiece_model_sha256`. Returns
  `export_dir`."""
  fields = {"signatures": sorted(signatures)}
  spiece = None
  if spiece_model_file:
    # Read before the long save: an unreadable file fails first.
    try:
      spiece = paths.read_bytes(spiece_model_file)
    except OSError as e:
      raise UsageError(f"--spiece_model_file={spiece_model_file}: "
                       f"{e.strerror or e}") from None
    fields["batch"] = dict(batch or {}, spiece_model=_BATCH_SPIECE,
                           spiece_model_sha256=hashlib.sha256(
                               spiece).hexdigest())

  def write(tmp):
    # The signatures are the export: without Keras' own traces of every
    # layer's call (for a Keras-level reload no tool here does), a save
    # takes a third less time.
    with keras_option_scope(save_traces=False, in_tf_saved_model_scope=True):
      tf.saved_model.save(module, tmp, signatures=signatures)
    if spiece is not None:
      path = os.path.join(tmp, *_BATCH_SPIECE.split("/"))
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "wb") as f:
        f.write(spiece)
  return write_atomically(export_dir, export_kind, write, **fields)


def write_atomically(export_dir: str, export_kind: str,
                     write: Callable[[str], None], **marker_fields) -> str:
  """`write(tmp)` fills a temp directory beside `export_dir` (with what
  `_EXPORT_ENTRY` allows); it gets the marker of `export_kind` (plus
  `marker_fields`) and ordinary permissions, then is moved into place. Only
  a path `check_export_dir` accepts is written; a previous export is swapped
  out in one step (or, where the file system cannot, renamed aside first),
  so a killed export leaves the old export or the new one, plus at most a
  temp directory that the next export removes. In a bucket: written in
  local scratch, then published (`bucket.publish`: the marker last).
  Returns `export_dir`."""
  check_export_dir(export_dir, export_kind)
  if paths.is_remote(export_dir):
    return write_to_bucket(export_dir, lambda tmp: (
        write(tmp), _write_marker(tmp, export_kind, marker_fields)),
                           EXPORT_MARKER, lambda scratch: disk_full_is(
        f"{export_dir}: no space left on device in local scratch "
        f"({scratch}) while exporting"))
  target = os.path.realpath(export_dir)
  parent = os.path.dirname(target)
  os.makedirs(parent, exist_ok=True)
  for path in remove_stale_export_temps(parent):
    logging.info("removed %s, left by an interrupted export", path)
  tmp = os.path.join(parent, f"{EXPORT_TEMP_PREFIX}{host_name()}-{os.getpid()}-"
                     f"{secrets.token_hex(4)}")
  os.mkdir(tmp)
  try:
    with disk_full_is(f"{export_dir}: no space left on device while "
                      "exporting (a previous export there is kept)"):
      write(tmp)
      _write_marker(tmp, export_kind, marker_fields)
      set_ordinary_modes(tmp)
      if not os.path.isdir(target):
        os.rename(tmp, target)  # fails, writing nothing, if a file appeared
      elif _exchange(tmp, target):
        _remove_replaced(tmp)  # `tmp` now names the previous export
      else:
        old = tmp + "-old"
        os.rename(target, old)
        os.rename(tmp, target)
        _remove_replaced(old)
  finally:
    if os.path.isdir(tmp) and _only_export_entries(os.listdir(tmp)):
      shutil.rmtree(tmp, ignore_errors=True)
  return export_dir


def _write_marker(tmp: str, export_kind: str, marker_fields: dict) -> None:
  """The marker of the export in local folder `tmp` (what it holds)."""
  marker = dict(marker_fields, format=MARKER_FORMAT, kind=export_kind,
                files=sorted(os.listdir(tmp)), xlnet_tf_version=__version__)
  with open(os.path.join(tmp, EXPORT_MARKER), "w", encoding="utf-8") as f:
    f.write(json.dumps(marker, indent=2, sort_keys=True) + "\n")
