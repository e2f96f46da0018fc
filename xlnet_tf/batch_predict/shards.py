"""A batch job's output files: sharded JSONL (and TFRecord) written by the
workers into the job's temp folder, then moved into `--output_dir` by the
driver with a manifest and the folder's output ledger.

Names (N shards of a stream, K its index, both zero-padded to 5 digits):
  predictions-KKKKK-of-NNNNN.jsonl     one row per line, sorted by key
  predictions-KKKKK-of-NNNNN.tfrecord  one tf.train.Example per row, the
                                       same rows in the same order
                                       (embeddings with --tfrecord)
  dead-letter-KKKKK-of-NNNNN.jsonl     {"file", "line", "reason"} per row
  manifest.json                        every shard's name, rows, sha256,
                                       and the counts
A row's shard is a hash of its key `(file, line)` and N follows from the
row count (`--rows_per_shard`), so the same rows give the same files
whatever the runner, the workers or the retries. Each worker writes a
shard under a temp name, renames it, and leaves `<name>.info.json` (rows,
sha256) beside it for the driver. In a bucket (the job's temp folder is
then a key prefix under `--output_dir`), the worker writes the shard into
a local temp file and uploads it finished (`atomic_path`): the object
appears whole, and a retried unit uploads the same bytes again. Workers
share nothing but that prefix.

A write that fails (a full disk, or any OS error) is one line naming
`--output_dir` and what state it was left in (`write_failures`).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import zlib
from typing import Dict, Iterable, List, Optional, Tuple

import tensorflow as tf

from data_utils import paths
from data_utils.atomic import atomic_path
from data_utils.errors import UserError, describe_os_error, is_disk_full
from data_utils.fingerprint import file_sha256

STREAMS = ("predictions", "dead-letter")
MANIFEST = "manifest.json"
_INFO = ".info.json"
# What this job may write in --output_dir (anything else there is left be).
OUTPUT_NAME = re.compile(r"^(?:(?:predictions|dead-letter)-\d{5}-of-\d{5}"
                         r"\.(?:jsonl|tfrecord)|manifest\.json)$")


def shard_count(rows: int, rows_per_shard: int) -> int:
  """Shards for `rows` rows (at least one).

  Example:
    >>> shard_count(0, 10), shard_count(10, 10), shard_count(11, 10)
    (1, 1, 2)
  """
  return max(1, math.ceil(rows / rows_per_shard))


def shard_of(key: Tuple[str, int], shards: int) -> int:
  """A row's shard: a stable hash of its key (the same on every worker).

  Example:
    >>> shard_of(("a.txt", 3), 1)
    0
  """
  return zlib.crc32(f"{key[0]}\0{key[1]}".encode("utf-8")) % shards


def shard_name(stream: str, index: int, shards: int, suffix: str) -> str:
  """
  >>> shard_name("predictions", 2, 10, ".jsonl")
  'predictions-00002-of-00010.jsonl'
  """
  return f"{stream}-{index:05d}-of-{shards:05d}{suffix}"


def write_shard(job_dir: str, stream: str, index: int, shards: int,
                rows: Iterable[Tuple[Tuple[str, int], str, Optional[bytes]]],
                tfrecord: bool) -> List[str]:
  """Writes one shard's rows `(key, json_line, example_bytes)`, sorted by
  key, as JSONL (and TFRecord); returns the names written. Each file
  appears whole, with its `.info.json`."""
  ordered = sorted(rows, key=lambda r: r[0])
  names = [shard_name(stream, index, shards, ".jsonl")]

  def jsonl(tmp: str) -> None:
    with open(tmp, "w", encoding="utf-8") as f:
      for _, line, _ in ordered:
        f.write(line + "\n")
  _write_whole(paths.join(job_dir, names[0]), jsonl, len(ordered))
  if tfrecord:
    names.append(shard_name(stream, index, shards, ".tfrecord"))

    def records(tmp: str) -> None:
      with tf.io.TFRecordWriter(tmp) as writer:
        for _, _, example in ordered:
          writer.write(example)
    _write_whole(paths.join(job_dir, names[1]), records, len(ordered))
  return names


def _write_whole(path: str, write, rows: int) -> None:
  """`write(local temp file)`, then the file appears at `path` whole, then
  its info (its sha256 taken from the local file: a bucket's object is not
  read back)."""
  with atomic_path(path) as tmp:
    write(tmp)
    sha256 = file_sha256(tmp)
  with atomic_path(path + _INFO) as tmp:
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump({"rows": rows, "sha256": sha256}, f)


def complete_shards(job_dir: str, tfrecord: bool) -> Dict[str, List[dict]]:
  """Every shard of every stream, `{stream: [{"name", "rows", "sha256"}]}`
  in name order: the workers' (from their info files) plus an empty file
  for each shard no row hashed to (a stream without rows has one, empty)."""
  written = [n[:-len(_INFO)] for n in paths.listdir(job_dir)
             if n.endswith(_INFO)]
  out: Dict[str, List[dict]] = {}
  for stream in STREAMS:
    found = {int(m.group(1)) for m in (
        re.match(re.escape(stream) + r"-\d{5}-of-(\d{5})\.", n)
        for n in written) if m}
    if len(found) > 1:
      raise RuntimeError(f"{job_dir}: {stream} shards of {sorted(found)} "
                         "(one count expected)")
    shards = found.pop() if found else 1
    suffixes = [".jsonl"] + ([".tfrecord"] if tfrecord and
                             stream == "predictions" else [])
    listed = []
    for index in range(shards):
      for suffix in suffixes:
        name = shard_name(stream, index, shards, suffix)
        path = paths.join(job_dir, name)
        if not paths.exists(path + _INFO):
          _write_whole(path, lambda tmp: open(tmp, "wb").close(), 0)
        with paths.open_file(path + _INFO, encoding="utf-8") as f:
          info = json.load(f)
        listed.append({"name": name, "rows": info["rows"],
                       "sha256": info["sha256"]})
    out[stream] = listed
  return out


def failure_line(output_dir: str, e: BaseException, placing: bool
                 ) -> Optional[str]:
  """The one line for a write into `output_dir` that failed with `e` (None
  if `e` is not a failed write): `placing` is False until the new files
  start to go into place (nothing the user sees has changed), True after
  (the ledger lists them, so the re-run replaces what is there).

  Example:
    >>> line = failure_line("/o", OSError(28, "No space left on device"),
    ...                     False)
    >>> line[:60]
    '--output_dir=/o: no space left on device; nothing in it was '
  """
  # atomic_path turns a full disk into a UserError: its cause is kept.
  if is_disk_full(e) or is_disk_full(e.__context__):
    reason, advice = ("no space left on device",
                      "free some space, then run the same command again")
  elif isinstance(e, OSError):
    reason, advice = (describe_os_error(e),
                      "run the same command again once that is fixed")
  else:
    return None
  if placing:
    return (f"--output_dir={output_dir}: {reason} while moving the new "
            f"outputs into place; some are missing ({advice}: it replaces "
            "them)")
  return f"--output_dir={output_dir}: {reason}; nothing in it was changed " \
      f"({advice})"


@contextlib.contextmanager
def write_failures(output_dir: str, placing: bool = False):
  """Inside the block, a failed write is a `UserError` of its
  `failure_line`."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    line = failure_line(output_dir, e, placing)
    if line is None:
      raise
    raise UserError(line) from None
