"""Cached classification features as TFRecords, and their tf.data reader.

A feature file is keyed by every setting that shapes it (task, split, data
files, SentencePiece model, max_seq_length, casing, labels, passes, padding
to the batch size): a changed setting builds a new file, an unchanged one is
reused unless `overwrite`. Files appear atomically. Eval/predict files are
padded to a multiple of the batch size with `is_real_example = 0` rows, as
the original does for TPUs (fixed shapes); metrics ignore them.

Record: input_ids, segment_ids [n] int64; input_mask [n] float (1 = pad);
label int64 (class id) or float (score); is_real_example int64. n is the
sequence length, or choices x length for multiple choice (RACE).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.atomic import atomic_path, write_json
from data_utils.progress import Progress

FORMAT = "xlnet-tf/classifier/v1"


def _file_stamp(path: str) -> list:
  st = os.stat(path)
  return [os.path.abspath(path), st.st_size, int(st.st_mtime)]


def feature_file(output_dir: str, settings: dict) -> str:
  """`output_dir/<task>.<split>.len-<n>.<hash>.tf_record` for settings."""
  key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
  return os.path.join(output_dir, f"{settings['task']}.{settings['split']}."
                      f"len-{settings['record_length']}.{key[:12]}.tf_record")


def reusable_info(path: str, settings: dict) -> Optional[dict]:
  """The info of a feature file built with exactly `settings` (plus its
  `path`), or None when it is missing or was built otherwise."""
  info_path = path + ".json"
  if not (os.path.exists(path) and os.path.exists(info_path)):
    return None
  with open(info_path) as f:
    info = json.load(f)
  return dict(info, path=path) if info.get("settings") == settings else None


def build_features(examples: Sequence, featurize: Callable[[object], dict],
                   record_length: int, regression: bool, output_dir: str,
                   settings: dict, pad_to_multiple: int = 1,
                   num_passes: int = 1, overwrite: bool = False,
                   seed: int = 0) -> dict:
  """Writes (or reuses) the feature file of `featurize(example)` dicts
  (`input_ids`, `segment_ids`, `input_mask` of `record_length`, `label`);
  returns its info dict (`path`, `num_examples` real, `num_records`).
  `settings` must name everything else that shapes the features."""
  settings = dict(settings, format=FORMAT, record_length=record_length,
                  regression=regression, pad_to_multiple=pad_to_multiple,
                  num_passes=num_passes, seed=seed)
  os.makedirs(output_dir, exist_ok=True)
  path = feature_file(output_dir, settings)
  info_path = path + ".json"
  info = None if overwrite else reusable_info(path, settings)
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
  progress.finish()
  info = {"settings": settings, "num_examples": n_real,
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
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


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
