"""Classification (and RACE) feature files: build or reuse, and read.

Record, one `tf.train.Example` per row (keys as written on disk):
  input_ids, segment_ids [n] int64; input_mask [n] float (1 = pad);
  label int64 (class id) or float (score); is_real_example int64.
`n` is the sequence length, or choices x length for multiple choice (RACE).
Eval/predict files are padded to a multiple of the batch size with
`is_real_example = 0` rows, as the original does for TPUs (fixed shapes);
metrics ignore them. Naming, caching and atomic writes: `data_utils.records`.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.atomic import write_json
from data_utils.progress import Progress
from data_utils.records import (example_bytes, feature_file, float_feature,
                                input_fingerprints, int_feature,
                                prepare_cache_dir, records_dataset,
                                reusable_info, write_records)

FORMAT = "xlnet-tf/classifier/v1"


def build_features(examples: Sequence, featurize: Callable[[object], dict],
                   record_length: int, regression: bool, output_dir: str,
                   settings: dict, pad_to_multiple: int = 1,
                   num_passes: int = 1, overwrite: bool = False,
                   seed: int = 0, input_files: Optional[dict] = None,
                   stat_keys: Sequence[str] = ()) -> dict:
  """Writes (or reuses) the feature file of `featurize(example)` dicts
  (`input_ids`, `segment_ids`, `input_mask` of `record_length`, `label`);
  returns its info dict (`path`, `num_examples` real, `num_records`).
  `settings` must name the `task`, the `split` and everything else that
  shapes the features; `input_files` (name -> path, e.g. `{"spiece":
  model_path}`) the files featurize reads: they and the examples key the
  cache by content. `stat_keys`: 0/1 ints of the featurize dicts (not
  written) summed over the examples, each counted once, into the info's
  `stats` (e.g. how many documents were truncated)."""
  settings = dict(settings, format=FORMAT, record_length=record_length,
                  regression=regression, pad_to_multiple=pad_to_multiple,
                  num_passes=num_passes, seed=seed)
  inputs = input_fingerprints(examples, input_files)
  prepare_cache_dir(output_dir)
  path = feature_file(output_dir, settings["task"], settings["split"],
                      record_length, settings)
  info_path = path + ".json"
  info = None if overwrite else reusable_info(path, settings, inputs)
  # A cache built before its stats were asked for is built again (same
  # name, same bytes) so that they are known.
  known = info.get("stats") if info is not None else None
  if info is not None and set(stat_keys) <= set(
      known if isinstance(known, dict) else {}):
    return info

  order = list(range(len(examples))) * num_passes
  if num_passes > 1:  # the original repeats (and shuffles) training data
    np.random.default_rng(seed).shuffle(order)
  n_real = len(order)
  pad = (-n_real) % pad_to_multiple
  progress = Progress(f"{settings['task']} {settings['split']} features",
                      total=n_real, unit="examples")
  stats = dict.fromkeys(stat_keys, 0)

  def records():
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
          for key in stat_keys:
            stats[key] += int(cache[k][key])
          progress.update()
        feats = dict(cache[k], real=1)
        if num_passes == 1:
          del cache[k]
      yield _record(feats, regression)

  write_records(path, records(), stale_info=info_path)
  progress.finish()
  info = {"settings": settings, "inputs": inputs, "num_examples": n_real,
          "num_records": n_real + pad}
  if stat_keys:
    info["stats"] = stats
  write_json(info_path, info)
  return dict(info, path=path)


def _record(feats: dict, regression: bool) -> bytes:
  return example_bytes({
      "input_ids": int_feature(feats["input_ids"]),
      "segment_ids": int_feature(feats["segment_ids"]),
      "input_mask": float_feature(feats["input_mask"]),
      "label": float_feature([feats["label"]]) if regression else int_feature(
          [feats["label"]]),
      "is_real_example": int_feature([feats["real"]]),
  })


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
