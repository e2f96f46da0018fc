"""Token-classification feature records: build or reuse, read back.

Record, one `tf.train.Example` per window (`features.NerWindow`):
`input_ids`, `segment_ids`, `label_ids`, `word_index` int64 [L],
`input_mask` float [L], `sentence_index`, `is_real_example` int64 [].
TFRecords in `output_dir` named by a hash of every setting that shapes them,
keyed by content (the parsed sentences, the label list, the SentencePiece
model's bytes), written atomically, with a `.json` info file (settings,
fingerprints, counts, window statistics); see `data_utils.records`.
Training records are shuffled (seeded) and repeated `num_passes` times;
others keep the file's order, padded with non-real records to a multiple of
the batch size.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Dict, List, Optional

import tensorflow as tf
from absl import logging

from data_utils.atomic import write_json
from data_utils.ner.alignment import IGNORE_LABEL, WordPieces
from data_utils.ner.features import (NerFeatureSettings, NerWindow,
                                     convert_data)
from data_utils.ner.reader import NerData
from data_utils.records import (example_bytes, feature_file, float_feature,
                                input_fingerprints, int_feature,
                                prepare_cache_dir, records_dataset,
                                reusable_info, write_records)
from data_utils.tokenization import SEG_ID_PAD

FORMAT = "xlnet-tf/ner/v1"


def _record(window: NerWindow, real: int) -> bytes:
  return example_bytes({
      "input_ids": int_feature(window.input_ids),
      "segment_ids": int_feature(window.segment_ids),
      "input_mask": float_feature(window.input_mask),
      "label_ids": int_feature(window.label_ids),
      "word_index": int_feature(window.word_index),
      "sentence_index": int_feature([window.sentence]),
      "is_real_example": int_feature([real]),
  })


def _padding(length: int) -> NerWindow:
  return NerWindow(-1, 0, [0] * length, [SEG_ID_PAD] * length, [1.0] * length,
                   [IGNORE_LABEL] * length, [-1] * length)


def cached_ner_features(data: NerData, word_pieces: WordPieces,
                        labels: Optional[List[str]],
                        settings: NerFeatureSettings, output_dir: str,
                        split: str, training: bool = False,
                        pad_to_multiple: int = 1, num_passes: int = 1,
                        overwrite: bool = False, seed: int = 0) -> dict:
  """Builds (or reuses) the record file of `data`'s windows; returns its
  info (`path`, `num_records`, `num_windows`, `num_sentences`, `stats`).
  `labels` (IOB2 tags, id = index) labels the windows; None leaves them
  unlabelled (a file without gold tags)."""
  key = dict(dataclasses.asdict(settings), format=FORMAT, split=split,
             training=training, labels=labels,
             pad_to_multiple=1 if training else pad_to_multiple,
             num_passes=num_passes if training else 1,
             seed=seed if training else None)
  inputs = input_fingerprints(
      [(s.words, s.tags, s.document) for s in data.sentences],
      {"spiece": word_pieces.tokenizer.model_path})
  prepare_cache_dir(output_dir)
  path = feature_file(output_dir, "ner", split, settings.max_seq_length, key)
  info = None if overwrite else reusable_info(path, key, inputs)
  if info is not None:
    logging.info("reusing %s (%d windows)", path, info["num_windows"])
    return info
  label_map: Optional[Dict[str, int]] = (
      {t: i for i, t in enumerate(labels)} if labels else None)
  windows, stats = convert_data(data, word_pieces, label_map, settings,
                                what=f"ner {split} features")
  order = list(range(len(windows)))
  if training:
    order = order * num_passes
    random.Random(seed).shuffle(order)
  pad = 0 if training else (-len(order)) % pad_to_multiple
  records = itertools.chain(
      (_record(windows[k], 1) for k in order),
      itertools.repeat(_record(_padding(settings.max_seq_length), 0), pad))
  n = write_records(path, records, stale_info=path + ".json")
  info = {"settings": key, "inputs": inputs, "num_records": n,
          "num_windows": len(windows), "num_sentences": len(data.sentences),
          "stats": dataclasses.asdict(stats)}
  write_json(path + ".json", info)
  logging.info("wrote %s (%d windows of %d sentences, %d split in several)",
               path, len(windows), stats.sentences, stats.split_sentences)
  return dict(info, path=path)


def ner_dataset(path: str, max_seq_length: int, batch_size: int,
                training: bool = False, shuffle_buffer: int = 2048,
                seed: int = 0, skip_batches: int = 0, input_context=None):
  """Batches of the record's keys (int64 -> int32); `training` repeats and
  shuffles (seeded), inference keeps every record in file order."""
  L = max_seq_length
  spec = {
      "input_ids": tf.io.FixedLenFeature([L], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([L], tf.int64),
      "input_mask": tf.io.FixedLenFeature([L], tf.float32),
      "label_ids": tf.io.FixedLenFeature([L], tf.int64),
      "word_index": tf.io.FixedLenFeature([L], tf.int64),
      "sentence_index": tf.io.FixedLenFeature([], tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return records_dataset(path, spec, batch_size, training, shuffle_buffer,
                         seed, skip_batches, input_context)
