"""SQuAD feature records: build or reuse, read back, and tf.data.

Record, one `tf.train.Example` per window (keys as written on disk): the
model features of `features.py` (`unique_ids`, `input_ids`, `input_mask`,
`segment_ids`, `p_mask`, `cls_index`, and for training `start_positions`,
`end_positions`, `is_impossible`), plus what postprocessing needs
(`example_index`, `doc_span_index`, `paragraph_len`,
`tok_start_to_orig_index`, `tok_end_to_orig_index`, `token_is_max_context`,
variable length). TFRecords in `output_dir` named by a hash of every setting
that shapes them, written atomically, with a `.json` info file (settings,
input fingerprints, counts, alignment statistics); see `data_utils.records`.
"""

from __future__ import annotations

import dataclasses
import random
from typing import List

import tensorflow as tf
from absl import logging

from data_utils.atomic import write_json
from data_utils.records import (example_bytes, feature_file, float_feature,
                                input_fingerprints, int_feature,
                                prepare_cache_dir, records_dataset,
                                reusable_info, write_records)
from data_utils.squad.features import (FeatureSettings, SquadFeature,
                                       convert_examples)
from data_utils.squad.reader import SquadData

FORMAT = "xlnet-tf/squad/v1"


def _record(feature: SquadFeature, max_seq_length: int) -> bytes:
  a = feature.arrays(max_seq_length)
  return example_bytes({
      "unique_ids": int_feature([feature.unique_id]),
      "input_ids": int_feature(a["input_ids"]),
      "input_mask": float_feature(a["input_mask"]),
      "segment_ids": int_feature(a["segment_ids"]),
      "p_mask": float_feature(a["p_mask"]),
      "cls_index": int_feature([a["cls_index"]]),
      "start_positions": int_feature([feature.start_position]),
      "end_positions": int_feature([feature.end_position]),
      "is_impossible": float_feature([float(feature.is_impossible)]),
      # Postprocessing only (variable length).
      "example_index": int_feature([feature.example_index]),
      "doc_span_index": int_feature([feature.doc_span_index]),
      "paragraph_len": int_feature([feature.paragraph_len]),
      "tok_start_to_orig_index": int_feature(feature.tok_start_to_orig_index),
      "tok_end_to_orig_index": int_feature(feature.tok_end_to_orig_index),
      "token_is_max_context": int_feature([int(x) for x in
                                           feature.token_is_max_context]),
  })


def cached_features(data: SquadData, tokenizer, settings: FeatureSettings,
                    output_dir: str, split: str, is_training: bool,
                    num_proc: int = 1, overwrite: bool = False,
                    seed: int = 0) -> dict:
  """Builds (or reuses) the record file of `data`; returns its info
  (`path`, `num_features`, `num_examples`, `stats`, `settings`). Training
  records are shuffled (seeded) so a small shuffle buffer suffices. Keyed
  by content: the examples and the SentencePiece model's bytes (see
  `data_utils.records.reusable_info`), plus every setting."""
  key = dict(dataclasses.asdict(settings), format=FORMAT, split=split,
             is_training=is_training, seed=seed if is_training else None)
  inputs = input_fingerprints(data.examples, {"spiece": tokenizer.model_path})
  prepare_cache_dir(output_dir)
  path = feature_file(output_dir, "squad", split, settings.max_seq_length,
                      key)
  info_path = path + ".json"
  info = None if overwrite else reusable_info(path, key, inputs,
                                              "num_features")
  if info is not None:
    logging.info("reusing %s (%d features)", path, info["num_features"])
    return info
  features, stats = convert_examples(
      data.examples, tokenizer, settings, is_training, num_proc,
      what=f"squad {split} features")
  if is_training:
    random.Random(seed).shuffle(features)
  write_records(path, (_record(f, settings.max_seq_length) for f in features),
                stale_info=info_path)
  info = {"settings": key, "inputs": inputs, "num_features": len(features),
          "num_examples": len(data.examples),
          "stats": dataclasses.asdict(stats)}
  write_json(info_path, info)
  logging.info("wrote %s (%d features)", path, len(features))
  return dict(info, path=path)


def squad_dataset(path: str, max_seq_length: int, batch_size: int,
                  is_training: bool = False, shuffle_buffer: int = 2048,
                  seed: int = 0, skip_batches: int = 0, input_context=None):
  """Batches of the model features (+ positions when training); training
  repeats and shuffles (seeded), inference keeps the file order."""
  L = max_seq_length
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([L], tf.int64),
      "input_mask": tf.io.FixedLenFeature([L], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
      "p_mask": tf.io.FixedLenFeature([L], tf.float32),
      "cls_index": tf.io.FixedLenFeature([], tf.int64),
  }
  if is_training:
    spec.update(start_positions=tf.io.FixedLenFeature([], tf.int64),
                end_positions=tf.io.FixedLenFeature([], tf.int64),
                is_impossible=tf.io.FixedLenFeature([], tf.float32))
  return records_dataset(path, spec, batch_size, is_training, shuffle_buffer,
                         seed, skip_batches, input_context)


def read_feature_meta(path: str) -> List[SquadFeature]:
  """The features of a record file with what postprocessing needs (tokens
  are not read back)."""
  out = []
  for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
    f = tf.train.Example.FromString(raw).features.feature

    def ints(key):
      return list(f[key].int64_list.value)
    out.append(SquadFeature(
        unique_id=ints("unique_ids")[0], example_index=ints("example_index")[0],
        doc_span_index=ints("doc_span_index")[0], tokens=[],
        paragraph_len=ints("paragraph_len")[0],
        tok_start_to_orig_index=ints("tok_start_to_orig_index"),
        tok_end_to_orig_index=ints("tok_end_to_orig_index"),
        token_is_max_context=[bool(x) for x in ints("token_is_max_context")],
        start_position=ints("start_positions")[0],
        end_position=ints("end_positions")[0],
        is_impossible=bool(f["is_impossible"].float_list.value[0])))
  return out
