"""TFRecord feature files: names, writing, checking, caching, reading.

What every task's records share. A feature file is named by every setting
that shapes it (`feature_file`) and its info file holds, besides those
settings, the content fingerprints of its inputs (the parsed examples, the
SentencePiece model's bytes; see `data_utils.fingerprint`). It is reused
only when both match and its records read back whole (every CRC, the
recorded count); otherwise, or with `overwrite`, it is built again in place.
Files appear atomically (`write_records`; in a bucket, a finished local
file is uploaded) and the stale temp files of a killed build are removed on
the next build (`prepare_cache_dir`). Any path here may be a bucket's URL
(`data_utils.paths`); TensorFlow itself only ever sees local files. Records
are serialized deterministically (`example_bytes`): same features, same
bytes. Each task's record layout is in its own `records` module
(`data_utils/<task>/records.py`). TensorFlow is imported on first use: a
job that is refused before any work never loads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

import numpy as np
from absl import logging

from data_utils import paths
from data_utils.atomic import atomic_path, remove_stale_temps
from data_utils.fingerprint import file_sha256, items_sha256

if TYPE_CHECKING:  # the annotations only
  import tensorflow as tf


def feature_file(output_dir: str, name: str, split: str, length: int,
                 settings: dict) -> str:
  """`output_dir/<name>.<split>.len-<length>.<hash>.tf_record`, the hash
  (12 hex digits of a sha1) over the JSON of `settings` with sorted keys.

  Example:
    >>> feature_file("out", "rte", "dev", 128, {"a": 1})
    'out/rte.dev.len-128.e4ad4daad53a.tf_record'
  """
  key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
  return paths.join(output_dir, f"{name}.{split}.len-{length}."
                    f"{key[:12]}.tf_record")


def int_feature(values) -> tf.train.Feature:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def float_feature(values) -> tf.train.Feature:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def example_bytes(record: dict) -> bytes:
  """One `tf.train.Example` of `{key: tf.train.Feature}`, serialized with
  its map entries in key order: same features, same bytes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Example(features=tf.train.Features(
      feature=record)).SerializeToString(deterministic=True)


def write_records(path: str, records: Iterable[bytes],
                  stale_info: Optional[str] = None) -> int:
  """Writes serialized records to `path` atomically; returns their number.
  `stale_info` (a cache's info file) is removed once every record is
  written, just before the rename: records without an info are never
  reused, so a build killed between the two renames cannot pair new records
  with an old info, and a build that fails earlier keeps the old cache."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  n = 0
  with atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for record in records:
        writer.write(record)
        n += 1
    if stale_info is not None:
      forget_info(stale_info)
  return n


_RECORD_ERROR = re.compile(r"(corrupted|truncated) record at (\d+)")


def _tf_text(e) -> str:
  # TF's message without its "{{function_node ...}}" prefix and
  # "[Op:...]" suffix, on one line.
  text = re.sub(r"\{\{function_node [^}]*\}\}", "", str(e.message))
  return " ".join(text.split(" [Op:")[0].split())


def count_records(path: str) -> int:
  """The number of records in a TFRecord file, reading every one (length
  and data CRCs are checked); raises TF's DataLossError on a bad record.
  Batched, so the per-record cost of the dataset vanishes (see
  benchmarks/README.md)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  ds = tf.data.TFRecordDataset(path, buffer_size=1 << 22).batch(1024)
  return int(ds.reduce(np.int64(0), lambda n, batch: n + tf.cast(
      tf.shape(batch)[0], tf.int64)))


def record_problem(path: str, expected: Optional[int] = None
                   ) -> Optional[str]:
  """What is wrong with a TFRecord file, or None when every record reads
  back (and there are `expected` of them): `corrupted record at offset N`,
  `truncated record at offset N` (N as TensorFlow gives it), `N records,
  expected M`, or the read error. A file in a bucket is read from a local
  copy (TF 2.20 has no `s3://`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if paths.is_remote(path):
    try:
      with paths.local_copy(path) as local:
        return record_problem(local, expected)
    except FileNotFoundError:
      return "no such file"
  try:
    n = count_records(path)
  except tf.errors.DataLossError as e:
    match = _RECORD_ERROR.search(str(e.message))
    if match:
      return f"{match.group(1)} record at offset {match.group(2)}"
    return f"unreadable records ({_tf_text(e)})"
  except tf.errors.OpError as e:  # vanished or unreadable
    return _tf_text(e)
  if expected is not None and n != expected:
    return f"{n} records, expected {expected} (cut short?)"
  return None


def read_info(info_path: str) -> Optional[dict]:
  """A cache's JSON info, or None (with a warning) when it is unreadable,
  cut short or not an object: such a cache is built again."""
  try:
    with paths.open_file(info_path, encoding="utf-8") as f:
      info = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError
    logging.warning("%s: unreadable cache info (%s); building the cache "
                    "again", info_path, " ".join(str(e).split()))
    return None
  if not isinstance(info, dict):
    logging.warning("%s: cache info is not a JSON object; building the "
                    "cache again", info_path)
    return None
  return info


def reusable_info(path: str, settings: dict, inputs: Optional[dict] = None,
                  count_key: str = "num_records") -> Optional[dict]:
  """The info of a cache file built with exactly `settings` from inputs
  with the fingerprints `inputs`, whose records all read back (the number
  in its info's `count_key`), plus its `path`; None when it must be built
  (missing, other settings or inputs, corrupt: the reason is logged)."""
  if not paths.exists(path):
    return None
  info = read_info(path + ".json")
  if info is None or info.get("settings") != settings:
    return None
  if info.get("inputs") != (inputs or {}):
    logging.info("%s: its inputs changed since it was built; building it "
                 "again", path)
    return None
  count = info.get(count_key)
  problem = record_problem(path, count) if isinstance(count, int) else \
      f"its info has no {count_key}"
  if problem:
    logging.warning("%s: %s; building it again", path, problem)
    return None
  return dict(info, path=path)


def forget_info(info_path: str) -> None:
  """Removes a cache's info just before its new records are renamed into
  place: records without an info are never reused, so a build killed
  between the two renames cannot pair new records with an old info."""
  if paths.is_remote(info_path):
    if paths.exists(info_path):
      paths.remove(info_path)
  elif os.path.lexists(info_path):
    os.remove(info_path)


def prepare_cache_dir(output_dir: str) -> None:
  """Makes `output_dir` and removes the temp files that killed builds of
  ours left there."""
  paths.makedirs(output_dir)
  for stale in remove_stale_temps(output_dir):
    logging.info("removed %s (left by an interrupted build)", stale)


def input_fingerprints(examples: Sequence,
                       input_files: Optional[dict] = None) -> dict:
  """`{"examples_sha256": ..., "<name>_sha256": ...}`: the content
  fingerprints of the parsed examples and of each named file
  (`input_files`: name -> path) that featurizing reads."""
  inputs = {f"{name}_sha256": file_sha256(p)
            for name, p in (input_files or {}).items()}
  inputs["examples_sha256"] = items_sha256(examples)
  return inputs


def records_dataset(path: str, spec: dict, batch_size: int,
                    is_training: bool = False, shuffle_buffer: int = 2048,
                    seed: int = 0, skip_batches: int = 0,
                    input_context: Optional[tf.distribute.InputContext] = None
                    ) -> tf.data.Dataset:
  """Batches of one feature file parsed with `spec` (int64 -> int32):
  training repeats and shuffles (seeded), inference keeps every record in
  file order; each input pipeline reads its shard; `skip_batches` resumes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def parse(record):
    ex = tf.io.parse_single_example(record, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in ex.items()}

  ds = tf.data.TFRecordDataset(path)
  if input_context is not None and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines,
                  input_context.input_pipeline_id)
  if is_training:
    ds = ds.repeat().shuffle(shuffle_buffer, seed=seed,
                             reshuffle_each_iteration=True)
  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.batch(batch_size, drop_remainder=is_training)
  if skip_batches:
    ds = ds.skip(skip_batches)
  return ds.prefetch(tf.data.AUTOTUNE)
