"""Builds pretraining TFRecords with precomputed permutations.

    python -m data_utils.pretraining.create_pretrain_data \
        --input_glob='corpus/*.txt' --sp_path=spiece.model --save_dir=proc \
        --bsz_per_host=32 --seq_len=512 --reuse_len=256 --num_predict=85 \
        --perm_size=256 --bi_data --num_passes=2

Input: text files, one sentence or paragraph per line, an empty line between
documents (`<eop>` may end a paragraph); or, without `--from_raw_text`, lines
of space-separated token ids. Output, under `save_dir/tfrecords/`: one
TFRecord file per (split, task, pass) and beside it a record-info JSON with
its record and batch counts, every setting that shaped it and the sha256 of
every input file and of the SentencePiece model; readers check those
settings against their own flags. Files appear atomically (temp file, then
rename; a killed run's temp files are removed by the next run). A re-run
keeps a pass already built from the same bytes with the same settings whose
records all read back, and builds any other again. Same inputs and seed,
same bytes (records and record-infos).
The record schema is documented in `data_utils/pretraining/examples.py`.
"""

from __future__ import annotations

import glob
import os
from typing import List, Optional, Sequence

import numpy as np
from absl import logging

from absl import app, flags

from data_utils.atomic import write_json
from data_utils.errors import (UsageError, check_positive, check_writable_dir,
                               run_main, utf8_error)
from data_utils.fingerprint import file_sha256, files_sha256
from data_utils.pretraining import examples
from data_utils.pretraining.examples import DataError, PretrainDataConfig
from data_utils.progress import Progress
from data_utils.records import (example_bytes, float_feature, int_feature,
                                prepare_cache_dir, read_info, record_problem,
                                write_records)
from data_utils.tokenization import SentencePieceTokenizer

RECORD_FORMAT = "xlnet-tf/pretrain/v1"


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
  return os.path.join(tfrecord_dir, format_name(
      f"record_info-{split}-{task}-{pass_id}", cfg, "json"))


def _read_shard(path: str, tokenizer: Optional[SentencePieceTokenizer],
                use_eod: bool, progress: Progress):
  """`(ids, sent_ids)` of one input file."""
  line_no = 0

  def encode(line: str) -> List[int]:
    if tokenizer is not None:
      return tokenizer.encode_ids(line)
    try:
      return [int(tok) for tok in line.split()]
    except ValueError:
      raise DataError(f"{path}:{line_no}: not a line of token ids "
                      f"(run with --from_raw_text for text): "
                      f"{line[:60]!r}") from None

  def lines():
    nonlocal line_no
    try:
      with open(path, encoding="utf-8") as f:
        for line in f:
          line_no += 1
          progress.update()
          yield line
    except UnicodeDecodeError:
      # The text layer decodes blocks ahead of the lines handed out, so
      # line_no is not the bad line: utf8_error finds it in the bytes.
      raise DataError(utf8_error(path)) from None

  return examples.lines_to_ids(lines(), encode, use_eod)


def _record(example: dict) -> bytes:
  return example_bytes({
      key: float_feature(value.tolist()) if value.dtype.kind == "f"
      else int_feature(value.tolist()) for key, value in example.items()})


def build_pass(data: np.ndarray, sent_ids: np.ndarray,
               cfg: PretrainDataConfig, is_start: np.ndarray,
               tfrecord_dir: str, split: str, task: int, pass_id: int,
               seed: int, info_extra: dict, max_batches: int = 0) -> dict:
  """Writes one pass's TFRecord file and record-info; returns the info.
  `max_batches` > 0 stops after that many host steps (quick experiments)."""
  rng = np.random.default_rng([seed, task, pass_id])
  name = format_name(f"{split}-{task}-{pass_id}", cfg, "tfrecords")
  path = os.path.join(tfrecord_dir, name)
  total = examples.max_host_steps(len(data), cfg)
  if max_batches:
    total = min(total, max_batches)
  progress = Progress(f"pass {pass_id} batches", total=total, unit="batches")
  info_path = record_info_path(tfrecord_dir, split, task, pass_id, cfg)
  num_batch = 0

  def records():
    nonlocal num_batch
    for step in examples.host_steps(data, sent_ids, cfg, is_start, rng):
      for example in step:
        yield _record(example)
      num_batch += 1
      progress.update()
      if num_batch == max_batches:
        break
    if num_batch == 0:   # raised inside the write: nothing is renamed
      raise DataError(
          f"no example could be built: {len(data)} tokens make streams "
          f"shorter than seq_len + reuse_len for {cfg.bsz_per_host} streams "
          "(use more text, a smaller bsz_per_host or a shorter seq_len)")

  write_records(path, records(), stale_info=info_path)
  progress.finish()
  info = dict(info_extra, format=RECORD_FORMAT, filenames=[name],
              num_batch=num_batch, num_example=num_batch * cfg.bsz_per_host,
              split=split, task=task, pass_id=pass_id, seed=seed,
              config=cfg.to_dict())
  write_json(info_path, info)
  return info


# Where the files are does not matter, only what they hold.
_PATH_KEYS = ("sp_path", "input_files")


def _already_built(info_path: str, info_extra: dict, seed: int,
                   cfg: PretrainDataConfig) -> bool:
  """Whether the pass of `info_path` was built from the same bytes with the
  same settings and its records all read back (else it is built again)."""
  old = read_info(info_path)
  if old is None:
    return False
  same = all(old.get(k) == v for k, v in info_extra.items()
             if k not in _PATH_KEYS)
  if not (same and old.get("seed") == seed
          and old.get("config") == cfg.to_dict()):
    logging.info("%s: inputs or settings changed; building it again",
                 info_path)
    return False
  names = old.get("filenames")
  if not isinstance(names, list) or len(names) != 1:
    return False
  path = os.path.join(os.path.dirname(info_path), str(names[0]))
  if not os.path.exists(path):
    return False
  count = old.get("num_example")
  problem = record_problem(path, count) if isinstance(count, int) else \
      "its record-info has no num_example"
  if problem:
    logging.warning("%s: %s; building it again", path, problem)
    return False
  logging.info("%s: already built from these inputs with these settings, "
               "kept", info_path)
  return True


def create_pretrain_data(input_paths: Sequence[str], cfg: PretrainDataConfig,
                         save_dir: str, sp_path: Optional[str],
                         from_raw_text: bool = True, split: str = "train",
                         task: int = 0, num_task: int = 1,
                         pass_ids: Sequence[int] = (0,), seed: int = 0,
                         max_batches: int = 0) -> List[dict]:
  """Builds the passes of one task; returns their record-infos.

  The task takes every `num_task`-th input file starting at `task`. Each
  pass shuffles the file order, redraws A/B splits, spans and permutations
  (all from `seed`, task and pass: the output is deterministic).
  """
  cfg.validate()
  check_writable_dir(save_dir, "save_dir")
  check_positive(max_batches, "max_batches", minimum=0)
  if not pass_ids or min(pass_ids) < 0:
    raise UsageError(f"passes {list(pass_ids)}: need at least one pass, "
                     "each id at least 0 (--num_passes >= 1, --pass_id >= 0)")
  if not 0 <= task < num_task:
    raise DataError(f"task ({task}) must be in [0, num_task={num_task})")
  if not input_paths:
    raise DataError("no input file matches the input glob")
  if not sp_path:
    raise DataError("--sp_path is required (span sampling needs the pieces)")
  vocab = SentencePieceTokenizer(sp_path, lower=cfg.uncased)
  tokenizer = vocab if from_raw_text else None
  is_start = examples.start_piece_table(
      [vocab.id_to_piece(i) for i in range(vocab.vocab_size)])

  tfrecord_dir = os.path.join(save_dir, "tfrecords")
  prepare_cache_dir(tfrecord_dir)

  my_paths = sorted(input_paths)[task::num_task]
  if not my_paths:
    raise DataError(f"task {task} of {num_task} has no input file "
                    f"({len(input_paths)} files in all)")
  info_extra = {"sp_path": os.path.abspath(sp_path) if sp_path else None,
                "vocab_size": vocab.vocab_size,
                "from_raw_text": from_raw_text, "num_task": num_task,
                "input_files": [os.path.abspath(p) for p in my_paths],
                "max_batches": max_batches,
                # content, so an edited corpus or model is built again
                "input_sha256": files_sha256(my_paths),
                "sp_sha256": file_sha256(sp_path)}

  wanted = [pass_id for pass_id in pass_ids if not _already_built(
      record_info_path(tfrecord_dir, split, task, pass_id, cfg), info_extra,
      seed, cfg)]
  infos = []
  if not wanted:
    return infos

  progress = Progress("input lines", unit="lines")
  shards = []
  for path in my_paths:
    shards.append(_read_shard(path, tokenizer, cfg.use_eod, progress))
  progress.finish()
  if sum(len(s[0]) for s in shards) == 0:
    raise DataError(f"input is empty: {len(my_paths)} file(s) hold no text "
                    f"({', '.join(my_paths[:3])})")

  for pass_id in wanted:
    order = np.random.default_rng([seed, task, pass_id, 1]).permutation(
        len(shards))
    data, sent_ids = examples.concat_documents(shards, order)
    infos.append(build_pass(data, sent_ids, cfg, is_start, tfrecord_dir,
                            split, task, pass_id, seed, info_extra,
                            max_batches))
  if task == 0:
    write_json(os.path.join(save_dir, "corpus_info.json"),
               dict(info_extra, config=cfg.to_dict(), split=split))
  return infos


def main(argv):
  del argv
  f = flags.FLAGS
  cfg = PretrainDataConfig(
      seq_len=f.seq_len, reuse_len=f.reuse_len, bsz_per_host=f.bsz_per_host,
      num_core_per_host=f.num_core_per_host, bi_data=f.bi_data,
      mask_alpha=f.mask_alpha, mask_beta=f.mask_beta,
      num_predict=f.num_predict,
      perm_size=f.perm_size if f.perm_size else f.reuse_len,
      uncased=f.uncased, use_eod=f.use_eod,
      original_ngram_count=f.original_ngram_count)

  def body():
    check_positive(f.num_passes, "num_passes")
    check_positive(f.pass_id, "pass_id", minimum=0)
    check_positive(f.max_batches, "max_batches", minimum=0)
    paths = sorted(glob.glob(f.input_glob))
    if not paths:
      raise UsageError(f"--input_glob={f.input_glob}: matches no file")
    pass_ids = range(f.pass_id, f.pass_id + f.num_passes)
    infos = create_pretrain_data(
        paths, cfg, f.save_dir, f.sp_path,
        from_raw_text=f.from_raw_text, split=f.split, task=f.task,
        num_task=f.num_task, pass_ids=list(pass_ids), seed=f.seed,
        max_batches=f.max_batches)
    for info in infos:
      logging.info("wrote %s: %d batches, %d examples", info["filenames"][0],
                   info["num_batch"], info["num_example"])
  return run_main("create_pretrain_data", body)


# name: (default, help); the flag's type is the default's (None: a string).
_FLAGS = {
    "bsz_per_host": (32, "Streams (batch size) per host."),
    "num_core_per_host": (1, "Replicas per host; with bi_data each "
                          "replica's batch is forward streams then reversed "
                          "streams."),
    "seq_len": (512, "Sequence length."),
    "reuse_len": (256, "Tokens cached as memory for the next step."),
    "uncased": (False, "Lower-case the text."),
    "bi_data": (True, "Also build reversed streams."),
    "mask_alpha": (6, "Context tokens per span group."),
    "mask_beta": (1, "Tokens predicted per group."),
    "use_eod": (True, "Append <eod> at the end of a document."),
    "from_raw_text": (True, "Input is raw text (else space-separated ids)."),
    "num_predict": (85, "Tokens to predict per example."),
    "perm_size": (0, "Permutation block size; 0 = reuse_len."),
    "input_glob": (None, "Input file glob."),
    "sp_path": (None, "SentencePiece model."),
    "save_dir": (None, "Output directory."),
    "pass_id": (0, "First pass id to write."),
    "num_passes": (1, "Passes to write (pass_id, pass_id + 1, ...; at "
                   "least 1), each with its own permutations and spans."),
    "num_task": (1, "Machines sharing the input files."),
    "task": (0, "This machine's task id."),
    "seed": (0, "Random seed: same seed, same records."),
    "max_batches": (0, "Stop each pass after this many batches (0 = all)."),
    "original_ngram_count": (False, "Reproduce the original's span sizing, "
                             "which counts sub-word pieces instead of "
                             "words."),
}


def define_flags():
  for name, (default, help_text) in _FLAGS.items():
    if isinstance(default, bool):
      flags.DEFINE_bool(name, default, help_text)
    elif isinstance(default, int):
      flags.DEFINE_integer(name, default, help_text)
    else:
      flags.DEFINE_string(name, default, help_text)
  flags.DEFINE_enum("split", "train", ["train", "dev", "test"], "Split name.")
  flags.mark_flags_as_required(["input_glob", "sp_path", "save_dir"])

if __name__ == "__main__":
  define_flags()
  app.run(main)
