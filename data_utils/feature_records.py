"""Cached classification features as TFRecords, and their tf.data reader.

A feature file is named by every setting that shapes it (task, split,
max_seq_length, casing, labels, passes, padding to the batch size) and its
info file holds, besides those settings, the content fingerprints of its
inputs (the parsed examples, the SentencePiece model's bytes; see
`data_utils.fingerprint`). It is reused only when both match and its records
read back whole (every CRC, the recorded count); otherwise, or with
`overwrite`, it is built again in place. Files appear atomically and the
stale temp files of a killed build are removed on the next build. Same
inputs and seed, same bytes. Eval/predict files are padded to a multiple of
the batch size with `is_real_example = 0` rows, as the original does for TPUs
(fixed shapes); metrics ignore them.

Record: input_ids, segment_ids [n] int64; input_mask [n] float (1 = pad);
label int64 (class id) or float (score); is_real_example int64. n is the
sequence length, or choices x length for multiple choice (RACE).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from data_utils.atomic import atomic_path, remove_stale_temps, write_json
from data_utils.fingerprint import file_sha256, items_sha256
from data_utils.progress import Progress

FORMAT = "xlnet-tf/classifier/v1"


def feature_file(output_dir: str, settings: dict) -> str:
  """`output_dir/<task>.<split>.len-<n>.<hash>.tf_record` for settings."""
  key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
  return os.path.join(output_dir, f"{settings['task']}.{settings['split']}."
                      f"len-{settings['record_length']}.{key[:12]}.tf_record")


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
  ds = tf.data.TFRecordDataset(path, buffer_size=1 << 22).batch(1024)
  return int(ds.reduce(np.int64(0), lambda n, batch: n + tf.cast(
      tf.shape(batch)[0], tf.int64)))


def record_problem(path: str, expected: Optional[int] = None
                   ) -> Optional[str]:
  """What is wrong with a TFRecord file, or None when every record reads
  back (and there are `expected` of them): `corrupted record at offset N`,
  `truncated record at offset N` (N as TensorFlow gives it), `N records,
  expected M`, or the read error."""
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
    with open(info_path, encoding="utf-8") as f:
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
  if not os.path.exists(path):
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
  if os.path.lexists(info_path):
    os.remove(info_path)


def prepare_cache_dir(output_dir: str) -> None:
  """Makes `output_dir` and removes the temp files that killed builds of
  ours left there."""
  os.makedirs(output_dir, exist_ok=True)
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


def build_features(examples: Sequence, featurize: Callable[[object], dict],
                   record_length: int, regression: bool, output_dir: str,
                   settings: dict, pad_to_multiple: int = 1,
                   num_passes: int = 1, overwrite: bool = False,
                   seed: int = 0, input_files: Optional[dict] = None) -> dict:
  """Writes (or reuses) the feature file of `featurize(example)` dicts
  (`input_ids`, `segment_ids`, `input_mask` of `record_length`, `label`);
  returns its info dict (`path`, `num_examples` real, `num_records`).
  `settings` must name everything else that shapes the features;
  `input_files` (name -> path, e.g. `{"spiece": model_path}`) the files
  featurize reads: they and the examples key the cache by content."""
  settings = dict(settings, format=FORMAT, record_length=record_length,
                  regression=regression, pad_to_multiple=pad_to_multiple,
                  num_passes=num_passes, seed=seed)
  inputs = input_fingerprints(examples, input_files)
  prepare_cache_dir(output_dir)
  path = feature_file(output_dir, settings)
  info_path = path + ".json"
  info = None if overwrite else reusable_info(path, settings, inputs)
  if info is not None:
    return info

  order = list(range(len(examples))) * num_passes
  if num_passes > 1:  # the original repeats (and shuffles) training data
    np.random.default_rng(seed).shuffle(order)
  n_real = len(order)
  pad = (-n_real) % pad_to_multiple
  progress = Progress(f"{settings['task']} {settings['split']} features",
                      total=n_real, unit="examples")
  with atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      cache = {}
      for k in order + [-1] * pad:
        if k < 0:
          feats = {"input_ids": [0] * record_length,
                   "segment_ids": [0] * record_length,
                   "input_mask": [1.0] * record_length,
                   "label": 0.0 if regression else 0, "real": 0}
        else:
          if k not in cache:
            cache[k] = featurize(examples[k])
            progress.update()
          feats = dict(cache[k], real=1)
          if num_passes == 1:
            del cache[k]
        writer.write(_serialize(feats, regression))
    forget_info(info_path)  # only now: a failed build keeps the old cache
  progress.finish()
  info = {"settings": settings, "inputs": inputs, "num_examples": n_real,
          "num_records": n_real + pad}
  write_json(info_path, info)
  return dict(info, path=path)


def _serialize(feats: dict, regression: bool) -> bytes:
  def ints(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

  def floats(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))
  feature = {
      "input_ids": ints(feats["input_ids"]),
      "segment_ids": ints(feats["segment_ids"]),
      "input_mask": floats(feats["input_mask"]),
      "label": floats([feats["label"]]) if regression else ints(
          [feats["label"]]),
      "is_real_example": ints([feats["real"]]),
  }
  # deterministic: map entries in key order, so same features, same bytes
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString(deterministic=True)


def classifier_dataset(path: str, record_length: int, batch_size: int,
                       regression: bool = False, is_training: bool = False,
                       shuffle_buffer: int = 2048, seed: int = 0,
                       skip_batches: int = 0,
                       input_context: Optional[tf.distribute.InputContext]
                       = None) -> tf.data.Dataset:
  """Batches of `{input_ids, segment_ids, input_mask, label,
  is_real_example}`; training repeats and shuffles (seeded), evaluation
  keeps the file order and every record."""
  spec = {
      "input_ids": tf.io.FixedLenFeature([record_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([record_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([record_length], tf.float32),
      "label": tf.io.FixedLenFeature([], tf.float32 if regression
                                     else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }

  return records_dataset(path, spec, batch_size, is_training, shuffle_buffer,
                         seed, skip_batches, input_context)


def records_dataset(path: str, spec: dict, batch_size: int,
                    is_training: bool = False, shuffle_buffer: int = 2048,
                    seed: int = 0, skip_batches: int = 0,
                    input_context: Optional[tf.distribute.InputContext] = None
                    ) -> tf.data.Dataset:
  """Batches of one feature file parsed with `spec` (int64 -> int32):
  training repeats and shuffles (seeded), inference keeps every record in
  file order; each input pipeline reads its shard; `skip_batches` resumes."""

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
