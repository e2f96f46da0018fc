"""What a record build may write in `--save_dir` (the names), checked
before any work, and the output ledger of what it wrote.

  corpus_info.json    the build as a whole (settings, split, tasks, passes)
  tfrecords/          per (task, pass): a TFRecord file and its record-info
  ids_cache/          the tokenized input ranges (`ids_cache.py`)

**One build per save_dir.** Every record-info and `corpus_info.json` there
must share this run's settings (`build_settings`: the record config, split,
seed, model, task split, max_batches); another build is refused with one
line naming the setting, so `corpus_info.json` always describes every
record beside it. More passes of the same build, or another of its tasks,
is the same build. The input's contents are not a setting: an edited
corpus rebuilds the passes it changes, in place.

**The ledger** is `data_utils/outputs.py`'s, one per folder: the records,
record-infos and `corpus_info.json` that this project wrote, with their
sha256. A file this run would write that is already there is replaced only
when its folder's ledger lists it with its current bytes, or with
`--overwrite`; else one-line UsageError before any work (`check_free`).
A listed records file that no longer reads back whole (cut short, a flipped
byte) is ours too, to build again, as the reader's message asks.

Who writes the ledgers, when units run in parallel (Beam workers, or the
plain CLI's one process per task into one save_dir): each (task, pass)
records its two files right after writing them, holding the lock of the
tfrecords/ ledger (`record_outputs(lock=True)`), so no writer loses
another's entries (in a bucket the ledger is one object per file, written
after the file: no lock is needed). `corpus_info.json` has one writer (task 0, or Beam's
last step), which records it in save_dir's ledger without a lock (a
duplicated last step writes the same entry). A ledger holds names and
sha256 only, so it too is the same bytes whoever builds. A pass kept from
an earlier run is recorded again only with `--overwrite` (a build from
before the ledger). A unit killed between its rename and its record leaves
a file that the re-run names (then pass --overwrite); any failure before
the rename leaves the old state.

**The ids cache** is not in a ledger: `ids_cache/` is a folder of the
builder's own (anything else in it is refused), whose files are named by a
hash of what they hold and never written over (one that exists is reused).
Recording them would add a locked ledger write per input range for files
that cannot clobber anything; owning the folder whole keeps "delete
ids_cache/ once the records are built" (docs/pretraining.md) safe.

**Runs at the same time** (`claimed`): the check above reads what is on
disk, so two runs of other builds started together would both pass it and
mix. While a run checks and builds, it holds a shared lock on
`save_dir/.xlnet_tf_build.lock`, which holds its build's settings: runs of
the same build share it, a run of another build is refused in one line,
and a file there that no run of ours left is refused and kept. In a
bucket, which has no locks, the same holds through a claim object at that
name (`data_utils.claims`): the store lets exactly one of the runs
racing for it create it, runs of the same build share it, a run of another
build is refused in the same line, and the last run to leave removes it.
Each run holding it keeps a lease beside it (`.xlnet_tf_build.lock.d/`),
so a claim whose runs all died is taken over by the next run once their
leases expire (`XLNET_TF_LEASE_SECONDS`, 60 s).

A failed run removes the folders it made and left empty (`made_dirs`).
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import json
import os
import re
from typing import Dict, Iterable, Optional, Sequence, Tuple

from absl import logging

from data_utils import claims, paths as paths_module
from data_utils.atomic import TEMP_PREFIX
from data_utils.errors import UsageError
from data_utils.fingerprint import file_sha256
from data_utils.outputs import (check_outputs, read_ledger,
                                record_outputs)
from data_utils.pretraining.examples import PretrainDataConfig
from data_utils.records import read_info, record_problem

RECORD_FORMAT = "xlnet-tf/pretrain/v2"
CORPUS_INFO = "corpus_info.json"
TFRECORDS = "tfrecords"
IDS_CACHE = "ids_cache"
BUILD_LOCK = ".xlnet_tf_build.lock"
_FORMAT_PREFIX = "xlnet-tf/pretrain/"
# What every file of one build shares besides "config" (the reader's
# `_BUILD_KEYS`, and the split and max_batches that corpus_info.json holds).
_BUILD_KEYS = ("format", "split", "seed", "sp_sha256", "vocab_size",
               "from_raw_text", "num_task", "task_split", "max_batches")
_CACHE_FILE = re.compile(r"^[0-9a-f]{32}\.ids$")


def format_name(prefix: str, cfg: PretrainDataConfig, suffix: str) -> str:
  """File name carrying the settings, like the original's `format_filename`
  (plus the permutation size and the n-gram counting mode).

  Example:
    >>> format_name("train-0-0", PretrainDataConfig(), "tfrecords")
    'train-0-0.bsz-32.seqlen-512.reuse-256.bi.alpha-6.beta-1.fnp-85.perm-256.tfrecords'
  """
  parts = [prefix, f"bsz-{cfg.bsz_per_host}", f"seqlen-{cfg.seq_len}",
           f"reuse-{cfg.reuse_len}"]
  if cfg.uncased:
    parts.append("uncased")
  parts += ["bi" if cfg.bi_data else "uni", f"alpha-{cfg.mask_alpha}",
            f"beta-{cfg.mask_beta}", f"fnp-{cfg.num_predict}",
            f"perm-{cfg.perm_size}"]
  if cfg.original_ngram_count:
    parts.append("piececount")
  return ".".join(parts + [suffix])


def record_info_path(tfrecord_dir: str, split: str, task: int, pass_id: int,
                     cfg: PretrainDataConfig) -> str:
  return paths_module.join(tfrecord_dir, format_name(
      f"record_info-{split}-{task}-{pass_id}", cfg, "json"))


def build_settings(info: dict) -> Dict[str, object]:
  """The settings of the build a record-info or `corpus_info.json` belongs
  to: every config field (by name), then `_BUILD_KEYS`."""
  config = info.get("config")
  settings = dict(config) if isinstance(config, dict) else {}
  settings.update((k, info.get(k)) for k in _BUILD_KEYS)
  return settings


def _ours(path: str) -> Optional[dict]:
  # A file of a record build (any version); anything else is left to the
  # ledger check (a user's file at our name is refused there).
  try:
    with paths_module.open_file(path, encoding="utf-8") as f:
      info = json.load(f)
  except (OSError, ValueError):
    return None
  return info if _of_a_build(info) else None


def _shown(value) -> str:
  return json.dumps(value, sort_keys=True)


def _of_a_build(info) -> bool:
  return isinstance(info, dict) and str(info.get("format", "")).startswith(
      _FORMAT_PREFIX)


def check_one_build(save_dir: str, settings: Dict[str, object]) -> None:
  """A one-line UsageError when `corpus_info.json` or a record-info in
  `save_dir` belongs to a build with other `settings`."""
  tfrecords = paths_module.join(save_dir, TFRECORDS)
  try:
    names = paths_module.listdir(tfrecords)
  except OSError:  # none yet (or not a folder: check_free names it)
    names = []
  found = [paths_module.join(save_dir, CORPUS_INFO)] + [
      paths_module.join(tfrecords, n) for n in names
      if fnmatch.fnmatchcase(n, "record_info-*.json")]
  for path in found:
    info = _ours(path)
    if info is None:
      continue
    theirs = build_settings(info)
    for key, want in settings.items():
      if theirs.get(key) != want:
        raise UsageError(
            f"--save_dir={save_dir}: holds another build: "
            f"{paths_module.relpath(path, save_dir)} has {key}="
            f"{_shown(theirs.get(key))}, this run {key}={_shown(want)}; use "
            f"another --save_dir, or remove the old build ({CORPUS_INFO} and "
            f"{TFRECORDS}/) first")


def check_ids_cache(save_dir: str) -> None:
  """A one-line UsageError unless `save_dir/ids_cache` is absent or a
  folder holding only the builder's files (ids files, its temps)."""
  path = paths_module.join(save_dir, IDS_CACHE)
  remote = paths_module.is_remote(path)
  if not (paths_module.exists(path) if remote else os.path.lexists(path)):
    return
  if not paths_module.isdir(path):
    raise UsageError(f"--save_dir={save_dir}: {IDS_CACHE} is not a folder "
                     "(the builder keeps its ids cache there): move it away")
  for name in paths_module.listdir(path):
    if not (_CACHE_FILE.match(name) or name.startswith(TEMP_PREFIX)):
      raise UsageError(
          f"--save_dir={save_dir}: {IDS_CACHE}/{name} was not written by "
          f"xlnet-tf; {IDS_CACHE}/ is the builder's own folder (it may be "
          "deleted once the records are built): move it away")


def check_free(save_dir: str, paths: Iterable[str], overwrite: bool,
               inputs: Sequence[str] = ()) -> None:
  """A one-line UsageError unless every one of `paths` (below `save_dir`)
  is absent, or listed in its folder's ledger with its current bytes, or
  `overwrite`; none may be one of `inputs`."""
  check_outputs(paths, "save_dir", overwrite, inputs=inputs, value=save_dir)


def check_passes_free(save_dir: str, passes: Sequence[Tuple[str, str]],
                      overwrite: bool) -> None:
  """`check_free` for the `(records, record-info)` paths of some passes,
  hashing each existing file once. A records file the ledger lists that no
  longer reads back whole (cut short, a flipped byte: the reader says
  "build it again") is ours to build again: its bytes are our records,
  broken, not a user's work."""
  ledgers: Dict[str, dict] = {}
  left = []
  for records, info in passes:
    for path in (records, info):
      folder = paths_module.dirname(path)
      if folder not in ledgers:
        ledgers[folder] = read_ledger(folder) if paths_module.isdir(
            folder) else {}
      entry = ledgers[folder].get(paths_module.basename(path))
      if overwrite or entry is None or not paths_module.isfile(path) or (
          not paths_module.is_remote(path) and os.path.islink(path)):
        left.append(path)
      elif entry.get("sha256") != file_sha256(path) and not (
          path == records and _broken(records, info)):
        left.append(path)
  check_free(save_dir, left, overwrite)


def _broken(records: str, info: str) -> bool:
  found = _ours(info)
  count = found.get("num_example") if found is not None else None
  return record_problem(records, count if isinstance(count, int)
                        else None) is not None


def record(paths: Sequence[str], lock: bool = True) -> None:
  """Records `paths` (one folder) in their folder's ledger, under its lock
  when other units may record in the same folder at the same time."""
  record_outputs(paths_module.dirname(paths[0]),
                 {paths_module.basename(p): file_sha256(p) for p in paths},
                 lock=lock)


def merged_pass_ids(save_dir: str, settings: Dict[str, object],
                    pass_ids: Sequence[int]) -> list:
  """This run's passes and those that `corpus_info.json` already lists for
  the same build: it describes every pass in the folder."""
  old = _ours(paths_module.join(save_dir, CORPUS_INFO))
  known = old.get("pass_ids") if old is not None else None
  if not (isinstance(known, list) and build_settings(old) == settings
          and all(isinstance(p, int) for p in known)):
    known = []
  return sorted(set(known) | set(pass_ids))


@contextlib.contextmanager
def made_dirs(save_dir: str):
  """When the block fails, removes the folders of the build it made and
  left empty (`save_dir`'s missing parents, `save_dir`, `tfrecords/`,
  `ids_cache/`): a refused input leaves the disk as it was. A bucket has
  no folders to remove."""
  if paths_module.is_remote(save_dir):
    yield
    return
  missing = []
  probe = os.path.abspath(save_dir)
  while not os.path.lexists(probe):
    missing.insert(0, probe)
    probe = os.path.dirname(probe)
  missing += [p for p in (os.path.join(save_dir, TFRECORDS),
                          os.path.join(save_dir, IDS_CACHE))
              if not os.path.lexists(p)]
  try:
    yield
  except BaseException:
    for path in reversed(missing):
      try:
        os.rmdir(path)  # only an empty folder goes
      except OSError:
        pass
    raise


@contextlib.contextmanager
def claimed(save_dir: str, settings: Dict[str, object]):
  """Held while a run checks and builds into `save_dir` (a folder): a
  one-line UsageError when a run of a build with other `settings` holds it
  (see the module docstring). The last run to leave removes the lock file.
  Claims and releases take turns under a lock on the folder itself, so a
  claim sees every run that started before it. In a bucket: the claim
  object of `data_utils.claims` at the lock file's name."""
  if paths_module.is_remote(save_dir):
    with claims.held(paths_module.join(save_dir, BUILD_LOCK), settings,
                     lambda them: _check_running(save_dir, them, settings)):
      yield
    return
  guard = os.open(save_dir, os.O_RDONLY)
  path = os.path.join(save_dir, BUILD_LOCK)
  fd = -1
  try:
    fcntl.flock(guard, fcntl.LOCK_EX)
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:  # never through a symlink
      raise _not_a_lock(path, "a symlink" if os.path.islink(path) else
                        "a folder" if os.path.isdir(path) else e.strerror
                        ) from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      if not _lock_is_ours(os.pread(fd, 1 << 20, 0)):
        os.close(fd)  # a file of the user's: never written over or removed
        fd = -1
        raise _not_a_lock(path, "it is neither empty nor a build's settings")
      os.ftruncate(fd, 0)  # no run holds it: the settings are ours now
      os.pwrite(fd, _shown(settings).encode(), 0)
    except BlockingIOError:
      _check_running(save_dir, os.pread(fd, 1 << 20, 0), settings)
    fcntl.flock(fd, fcntl.LOCK_SH)
    fcntl.flock(guard, fcntl.LOCK_UN)
    yield
  finally:
    fcntl.flock(guard, fcntl.LOCK_EX)
    if fd >= 0:
      with contextlib.suppress(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)  # no other run holds it
      os.close(fd)
    os.close(guard)  # releases the folder's lock


def _not_a_lock(path: str, what: str) -> UsageError:
  return UsageError(f"{path}: not a build lock of xlnet-tf ({what}); it is "
                    "left as it is: remove it if it is not yours, or use "
                    "another --save_dir")


def _lock_is_ours(content: bytes) -> bool:
  """Whether a lock file no run holds is one a run of ours left: empty (just
  made, or killed before writing) or a build's settings.

  Example:
    >>> [_lock_is_ours(c) for c in (b"", b'{"format": "xlnet-tf/pretrain/v2"}',
    ...                              b"my notes")]
    [True, True, False]
  """
  try:
    return not content or _of_a_build(json.loads(content))
  except ValueError:
    return False


def _check_running(save_dir: str, theirs: bytes,
                   settings: Dict[str, object]) -> None:
  try:
    running = json.loads(theirs)
  except ValueError:
    running = {}
  for key, want in settings.items():
    if not isinstance(running, dict) or running.get(key) != want:
      got = running.get(key) if isinstance(running, dict) else None
      raise UsageError(
          f"--save_dir={save_dir}: another build is being written into it "
          f"now ({key}={_shown(got)}, this run {key}={_shown(want)}); wait "
          "for it to end, or use another --save_dir")


# Where the files are does not matter, only what they hold.
_PATH_KEYS = ("sp_path", "input_files", "input_ranges")


def already_built(info_path: str, info_extra: dict, seed: int,
                  cfg: PretrainDataConfig) -> Optional[dict]:
  """The record-info at `info_path` when its pass was built from the same
  bytes with the same settings and its records all read back; else None
  (it is built again)."""
  old = read_info(info_path)
  if old is None:
    return None
  same = all(old.get(k) == v for k, v in info_extra.items()
             if k not in _PATH_KEYS)
  if not (same and old.get("seed") == seed
          and old.get("config") == cfg.to_dict()
          and old.get("format") == RECORD_FORMAT):
    logging.info("%s: inputs or settings changed; building it again",
                 info_path)
    return None
  names = old.get("filenames")
  if not isinstance(names, list) or len(names) != 1:
    return None
  path = paths_module.join(paths_module.dirname(info_path), str(names[0]))
  if not paths_module.exists(path):
    return None
  count = old.get("num_example")
  problem = record_problem(path, count) if isinstance(count, int) else \
      "its record-info has no num_example"
  if problem:
    logging.warning("%s: %s; building it again", path, problem)
    return None
  logging.info("%s: already built from these inputs with these settings, "
               "kept", info_path)
  return old
