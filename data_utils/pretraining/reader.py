"""tf.data reader of the pretraining records (schema in `examples.py`).

It expands each record's stored factorization order into the features the
model takes, exactly as the original's `_local_perm` + `num_predict` packing
would have produced them from that order:

  input_ids      [L]     int32 token ids (stored as `input`)
  segment_ids    [L]     int32 (stored as `seg_id`, the original's name)
  perm_mask      [L, L]  float, [i, j] = 1: i may not attend j
  target_mapping [P, L]  float one-hot rows (all-zero on padding)
  input_q        [L]     float, 1 = predicted position
  target         [P]     int32, target_mask [P] float

The rule, per part (reuse part and the rest): non-target, non-functional
tokens get rank -1 (everyone sees them, they see no target); a target sees
strictly earlier ranks, never itself; <sep>/<cls> see ranks up to their own.
The reuse part never sees the rest; the rest sees all of the reuse part.

Stream order is kept (memory needs it): files may be shuffled, records not.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import tensorflow as tf

from data_utils import paths
from data_utils.text_files import read_json
from data_utils.pretraining.examples import DataError, PretrainDataConfig
from data_utils.records import record_problem
from data_utils.tokenization import CLS_ID, SEP_ID


def record_spec(seq_len: int, num_predict: int) -> dict:
  return {
      "input": tf.io.FixedLenFeature([seq_len], tf.int64),
      "seg_id": tf.io.FixedLenFeature([seq_len], tf.int64),
      "label": tf.io.FixedLenFeature([1], tf.int64),
      "perm_order": tf.io.FixedLenFeature([seq_len], tf.int64),
      "target_pos": tf.io.FixedLenFeature([num_predict], tf.int64),
      "target_id": tf.io.FixedLenFeature([num_predict], tf.int64),
      "target_mask": tf.io.FixedLenFeature([num_predict], tf.float32),
  }


def _part_perm_mask(order, is_target, masked_or_func):
  """`_local_perm`'s mask for one part from its order `[n]` -> `[n, n]`."""
  rank = tf.where(masked_or_func, order, -tf.ones_like(order))
  self_rank = tf.where(is_target, rank, rank + 1)
  return tf.cast(tf.logical_and(self_rank[:, None] <= rank[None, :],
                                masked_or_func[None, :]), tf.float32)


def expand_example(example: Dict[str, tf.Tensor], reuse_len: int
                   ) -> Dict[str, tf.Tensor]:
  """Parsed record -> model features (see the module docstring)."""
  tokens = example["input"]
  seq_len = tokens.shape[0]
  target_mask = example["target_mask"]
  positions = example["target_pos"]
  is_target = tf.scatter_nd(positions[:, None], tf.cast(target_mask, tf.int32),
                            [seq_len]) > 0
  functional = tf.logical_or(tf.equal(tokens, SEP_ID), tf.equal(tokens, CLS_ID))
  masked_or_func = tf.logical_or(is_target, functional)
  order = example["perm_order"]
  non_reuse = seq_len - reuse_len

  top = _part_perm_mask(order[:reuse_len], is_target[:reuse_len],
                        masked_or_func[:reuse_len])
  bottom = _part_perm_mask(order[reuse_len:], is_target[reuse_len:],
                           masked_or_func[reuse_len:])
  perm_mask = tf.concat([
      tf.concat([top, tf.ones([reuse_len, non_reuse])], axis=1),
      tf.concat([tf.zeros([non_reuse, reuse_len]), bottom], axis=1)], axis=0)
  target_mapping = tf.one_hot(positions, seq_len) * target_mask[:, None]
  return {
      "input_ids": tf.cast(tokens, tf.int32),
      "segment_ids": tf.cast(example["seg_id"], tf.int32),
      "perm_mask": perm_mask,
      "target_mapping": target_mapping,
      "input_q": tf.cast(is_target, tf.float32),
      "target": tf.cast(example["target_id"], tf.int32),
      "target_mask": target_mask,
      "label": tf.cast(example["label"], tf.int32),
  }


def read_record_info(path: str) -> dict:
  """One record-info file, checked to be one: a JSON object with a
  `filenames` list of names and an integer `num_batch`; else a one-line
  DataError naming the file."""
  info = read_json(path, DataError)
  if not isinstance(info, dict):
    raise DataError(f"{path}: not a record-info (a JSON "
                    f"{type(info).__name__}, expected an object)")
  names = info.get("filenames")
  if not (isinstance(names, list) and names
          and all(isinstance(n, str) and n for n in names)):
    raise DataError(f"{path}: not a record-info (no \"filenames\" list of "
                    "file names)")
  for key in ("num_batch", "num_example", "pass_id"):
    value = info.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      raise DataError(f"{path}: not a record-info ({key!r} is {value!r}, "
                      "expected a count)")
  if not isinstance(info.get("config", {}), dict):
    raise DataError(f"{path}: not a record-info (\"config\" is not an "
                    "object)")
  return info


# What every record-info of one build shares (besides "config").
_BUILD_KEYS = ("format", "seed", "sp_sha256", "vocab_size", "from_raw_text",
               "num_task", "task_split")


def _check_same_build(path: str, info: dict, first_path: str,
                      first: dict) -> None:
  """A one-line DataError naming `path` when its records were built with
  other settings than those of `first_path` (two builds mixed in one
  directory)."""
  pairs = [(f"config.{k}", info.get("config", {}).get(k),
            first.get("config", {}).get(k))
           for k in sorted(set(info.get("config", {}))
                           | set(first.get("config", {})))]
  pairs += [(k, info.get(k), first.get(k)) for k in _BUILD_KEYS]
  for key, value, want in pairs:
    if value != want:
      raise DataError(f"{path}: built with {key}={value!r}, but "
                      f"{paths.basename(first_path)} with {key}={want!r} "
                      "(records of two builds in one place: keep one)")


def load_record_infos(record_info_dir: str, split: str, expected: dict,
                      num_passes: Optional[int] = None) -> dict:
  """Merges the record-infos of `split` in a directory (or a comma list).

  Every info's settings must agree with `expected` (a dict of
  `PretrainDataConfig` fields) and with each other's (one build: the same
  settings, model, seed and task split), and in one directory every pass
  must have every task of the build; else a one-line DataError naming the
  file, the key and both values. Passes `>= num_passes` are left out. Returns
  `{"filenames": [...], "num_batch": n, "num_records": {path: n}}` with full
  paths (`num_records` has the files whose info gives their count).
  """
  merged = {"filenames": [], "num_batch": 0, "num_records": {}}
  want = dict(expected)
  first: Optional[tuple] = None
  tasks: Dict[int, set] = {}
  for directory in record_info_dir.split(","):
    infos = paths.glob(paths.join(directory, f"record_info-{split}-*.json"))
    for path in infos:
      info = read_record_info(path)
      if num_passes is not None and info.get("pass_id", 0) >= num_passes:
        continue
      if first is None:
        first = (path, info)
      else:
        _check_same_build(path, info, *first)
      tasks.setdefault(info.get("pass_id", 0), set()).add(info.get("task"))
      got = info.get("config", {})
      for key, value in want.items():
        if got.get(key) != value:
          raise DataError(f"{path}: records were built with {key}="
                          f"{got.get(key)!r}, this run asks {key}={value!r}")
      for name in info["filenames"]:
        merged["filenames"].append(paths.join(directory, name))
      if "num_example" in info and len(info["filenames"]) == 1:
        merged["num_records"][merged["filenames"][-1]] = info["num_example"]
      merged["num_batch"] += info["num_batch"]
  if not merged["filenames"]:
    raise DataError(f"{record_info_dir}: no record_info-{split}-*.json "
                    "(build records with python -m "
                    "data_utils.pretraining.create_pretrain_data)")
  num_task = first[1].get("num_task")
  if isinstance(num_task, int) and "," not in record_info_dir:
    for pass_id, have in sorted(tasks.items()):
      lacking = sorted(set(range(num_task)) - have)
      if lacking:
        raise DataError(
            f"{record_info_dir}: pass {pass_id} has no record-info for "
            f"task(s) {lacking[:5]} of the build's {num_task} (finish the "
            "build: a re-run builds only what is missing)")
  missing = [p for p in merged["filenames"] if not paths.exists(p)]
  if missing:
    raise DataError(f"{missing[0]}: listed in a record-info but missing")
  return merged


def check_record_files(info: dict) -> None:
  """Reads every record of the files of `load_record_infos` (CRCs and
  counts) before training, so a cut-short or corrupt file is a one-line
  DataError naming it and the offset instead of a failure deep in the
  training loop (its speed: benchmarks/README.md)."""
  for path in info["filenames"]:
    problem = record_problem(path, info.get("num_records", {}).get(path))
    if problem:
      raise DataError(f"{path}: {problem} (build it again: rerun python -m "
                      "data_utils.pretraining.create_pretrain_data with the "
                      "same flags)")


def pretrain_dataset(filenames: List[str], cfg: PretrainDataConfig,
                     batch_size: int, num_hosts: int = 1, host_id: int = 0,
                     shuffle_files: bool = True, seed: int = 0,
                     skip_batches: int = 0, repeat: bool = True
                     ) -> tf.data.Dataset:
  """Batches of `batch_size` (= bsz_per_host) expanded examples, in stream
  order; the host's files are those of `host_id` (contiguous split).

  `skip_batches` resumes mid-stream after an interruption: the file order
  is a function of `seed` and the epoch only, so skipping reproduces the
  exact position.
  """
  per_host = len(filenames) // num_hosts
  if per_host == 0:
    raise DataError(f"{len(filenames)} record files for {num_hosts} hosts")
  begin = host_id * per_host
  end = len(filenames) if host_id == num_hosts - 1 else begin + per_host
  files = tf.data.Dataset.from_tensor_slices(sorted(filenames)[begin:end])
  if shuffle_files and end - begin > 1:
    files = files.shuffle(end - begin, seed=seed,
                          reshuffle_each_iteration=True)
  if repeat:
    files = files.repeat()
  spec = record_spec(cfg.seq_len, cfg.num_predict)
  ds = tf.data.TFRecordDataset(files)
  if skip_batches:
    ds = ds.skip(skip_batches * batch_size)
  ds = ds.map(lambda record: expand_example(
      tf.io.parse_single_example(record, spec), cfg.reuse_len),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
