"""Prediction and result files, written into folders the user names
(`--predict_dir`, `--model_dir`) without ever replacing a user's file.

Each such folder keeps a ledger, `.xlnet_tf_outputs.json`: for every file
this project wrote there, its sha256 and the input it was made from. A file
that already exists is replaced only when

- the ledger lists it with its current bytes (ours, and unchanged since),
  and it was made from the same input (a re-run), or
- the user passed `--overwrite` (`overwrite=True`);

and never when it is one of the run's own inputs. Anything else is a
one-line `UsageError` raised by `check_outputs`, which the scripts call in
their preflight (before a model loads); `write_output` checks again at the
moment of writing.

A prediction file keeps its input's whole name (`output_name`), so two
inputs with the same stem (`eng.testa`, `eng.testb`) never share an output.

Writers in parallel processes of one job (the record builder's tasks) record
their files with `record_outputs(..., lock=True)`: the read-modify-write of
the ledger then holds an exclusive lock on `.xlnet_tf_outputs.lock` beside
it, so no writer loses another's entries.

In a bucket (a `data_utils.paths` URL) there is neither rename nor lock, so
the ledger is a folder, `.xlnet_tf_outputs.d/`, of one object per file
(`<name>.json`: its sha256 and source), written after the file itself. Each
entry has one writer, so parallel writers need no lock and a retried one
writes the same bytes again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from typing import Dict, Iterable, Optional

from data_utils import path_checks, paths
from data_utils.atomic import write_json, write_text
from data_utils.errors import UsageError, UserError
from data_utils.fingerprint import file_sha256

LEDGER = ".xlnet_tf_outputs.json"
LEDGER_LOCK = ".xlnet_tf_outputs.lock"
LEDGER_ENTRIES = ".xlnet_tf_outputs.d"  # the ledger in a bucket
_LEDGER_FORMAT = 1


def output_name(input_path: str, suffix: str) -> str:
  """The name of an output made from `input_path`: its whole base name,
  then `suffix`.

  >>> output_name("conll2003/eng.testb", ".predictions.conll")
  'eng.testb.predictions.conll'
  >>> output_name("dev/test.conll", ".predictions.conll")
  'test.conll.predictions.conll'
  """
  return paths.basename(input_path) + suffix


def _source_id(source: Optional[str]) -> Optional[str]:
  return None if source is None else paths.absolute(source)


def read_ledger(directory: str) -> Dict[str, dict]:
  """`{name: {"sha256", "source"}}` of the files this project wrote in
  `directory` (empty when it has no ledger). A ledger file that is not
  ours is a one-line `UserError`: it is a user's file, never replaced."""
  if paths.is_remote(directory):
    return _read_entries(directory)
  path = os.path.join(directory, LEDGER)
  if not os.path.exists(path):
    return {}
  try:
    with open(path, encoding="utf-8") as f:
      ledger = json.load(f)
    files = ledger["files"]
    if ledger.get("format") != _LEDGER_FORMAT or not isinstance(files, dict):
      raise ValueError
  except (OSError, ValueError, KeyError, TypeError):
    raise UserError(f"{path}: not the output ledger of xlnet-tf; move it "
                    "away (it is not replaced)") from None
  return files


def _read_entries(directory: str) -> Dict[str, dict]:
  folder = paths.join(directory, LEDGER_ENTRIES)
  try:
    names = paths.listdir(folder)
  except FileNotFoundError:
    return {}
  files = {}
  for name in names:
    path = paths.join(folder, name)
    try:
      with paths.open_file(path) as f:
        entry = json.load(f)
      if entry.get("format") != _LEDGER_FORMAT or \
          f"{entry['name']}.json" != name:
        raise ValueError
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
      raise UserError(f"{path}: not an output ledger entry of xlnet-tf; move"
                      " it away (it is not replaced)") from None
    files[entry["name"]] = {"sha256": entry["sha256"],
                            "source": entry["source"]}
  return files


def _write_entries(directory: str, files: Dict[str, dict],
                   forget: Iterable[str]) -> None:
  folder = paths.join(directory, LEDGER_ENTRIES)
  for name in forget:
    if paths.exists(paths.join(folder, f"{name}.json")):
      paths.remove(paths.join(folder, f"{name}.json"))
  for name, entry in sorted(files.items()):
    write_json(paths.join(folder, f"{name}.json"),
               {"format": _LEDGER_FORMAT, "name": name, **entry})


def _refusal(path: str, flag: str, overwrite: bool, source: Optional[str],
             inputs: Iterable[str], ledger: Dict[str, dict],
             value: Optional[str] = None) -> Optional[str]:
  """Why `path` may not be written, or None."""
  name = paths.basename(path)
  where = f"--{flag}={paths.dirname(path)}"
  shown = name
  if value is not None:
    where, shown = f"--{flag}={value}", paths.relpath(path, value)
  for given in inputs:
    if _same_file(given, path):
      return f"{where}: {shown} is the input {given}; it is never replaced"
  remote = paths.is_remote(path)
  if not (paths.exists(path) if remote else os.path.lexists(path)):
    return None
  if paths.isdir(path) or (not remote and os.path.islink(path)):
    return f"{where}: {shown} exists and is not a file this run may replace"
  if overwrite:
    return None
  entry = ledger.get(name)
  if entry is None or entry.get("sha256") != file_sha256(path):
    return (f"{where}: {shown} exists and was not written by xlnet-tf (or "
            "was changed since); move it, or pass --overwrite to replace it")
  if _source_id(source) != entry.get("source"):
    return (f"{where}: {shown} holds the output of {entry.get('source')}, "
            f"not of {source}; use another --{flag}, or pass --overwrite")
  return None


def _same_file(a: str, b: str) -> bool:
  if paths.is_remote(a) or paths.is_remote(b):
    return paths.absolute(a) == paths.absolute(b)
  return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


def check_outputs(targets: Iterable[str], flag: str, overwrite: bool = False,
                  source: Optional[str] = None, inputs: Iterable[str] = (),
                  value: Optional[str] = None) -> None:
  """One-line `UsageError` (naming `--flag`, the folder and the file) if
  any of `targets` may not be written (see the module docstring): `source` is
  the input the outputs are made from, `inputs` every file the run reads.
  `value`: the flag's value, when `targets` lie in folders below it (the line
  then says `--flag=value: sub/name`). A folder that is a file, or that
  cannot be made, is refused too. Writes nothing."""
  inputs = list(inputs)
  ledgers: Dict[str, Dict[str, dict]] = {}
  for path in targets:
    directory = paths.dirname(path) or "."
    if directory not in ledgers:
      _check_folder(directory, flag)
      ledgers[directory] = read_ledger(directory) if paths.isdir(
          directory) else {}
    why = _refusal(path, flag, overwrite, source, inputs, ledgers[directory],
                   value)
    if why:
      raise UsageError(why)


def _check_folder(directory: str, flag: str) -> None:
  if paths.is_remote(directory):
    path_checks.check_store(directory, flag)
    return
  probe = os.path.abspath(directory)
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise UsageError(f"--{flag}={directory}: {probe} is a file, not a "
                     "directory")
  if not os.access(probe, os.W_OK | os.X_OK):
    raise UsageError(f"--{flag}={directory}: {probe} is not writable")


def write_output(path: str, data, flag: str, overwrite: bool = False,
                 source: Optional[str] = None, inputs: Iterable[str] = ()
                 ) -> str:
  """Writes `data` (text, or a JSON-able value for a `.json` path) to
  `path` atomically, if `check_outputs` allows it at this moment, and
  records it in the folder's ledger. Returns `path`."""
  check_outputs([path], flag, overwrite, source, inputs)
  if isinstance(data, str):
    write_text(path, data)
  else:
    write_json(path, data)
  record_outputs(paths.dirname(path) or ".",
                 {paths.basename(path): file_sha256(path)}, source)
  return path


def record_outputs(directory: str, files: Dict[str, str],
                   source: Optional[str] = None, forget: Iterable[str] = (),
                   lock: bool = False) -> None:
  """Records `files` ({name: sha256}, already in `directory`) as written
  from `source` in the folder's ledger, and drops the names in `forget`
  (files this project removed): one ledger write for a whole job. `lock`:
  other processes may record in the same folder at the same time (see the
  module docstring)."""
  if paths.is_remote(directory):
    _write_entries(directory, {name: {"sha256": sha256,
                                      "source": _source_id(source)}
                               for name, sha256 in files.items()}, forget)
    return
  with _locked(directory) if lock else contextlib.nullcontext():
    ledger = read_ledger(directory)
    for name in forget:
      ledger.pop(name, None)
    for name, sha256 in files.items():
      ledger[name] = {"sha256": sha256, "source": _source_id(source)}
    write_json(os.path.join(directory, LEDGER),
               {"format": _LEDGER_FORMAT, "files": ledger})


@contextlib.contextmanager
def _locked(directory: str):
  # A lock file of its own: the ledger itself is replaced by a rename, so a
  # lock on it would guard an inode that the next writer no longer opens.
  # flock on a regular file opened for writing also works over NFS (Linux
  # emulates it with a byte-range lock there).
  fd = os.open(os.path.join(directory, LEDGER_LOCK), os.O_RDWR | os.O_CREAT,
               0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)  # closing releases the lock


def own_unchanged(directory: str, name: str) -> bool:
  """Whether `name` in `directory` is a file the ledger lists with its
  current bytes (ours, unchanged since)."""
  path = paths.join(directory, name)
  entry = read_ledger(directory).get(name)
  if paths.is_remote(path):
    ours = paths.isfile(path)
  else:
    ours = os.path.isfile(path) and not os.path.islink(path)
  return (entry is not None and ours
          and entry.get("sha256") == file_sha256(path))
