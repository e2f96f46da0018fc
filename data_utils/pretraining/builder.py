"""The record builder's units of work, shared by the CLI and Beam.

A build (`BuildJob`) is a list of tasks (`task_split`), each built in passes.
Its units, each a function of the job alone, so any runner may run them in
any order, on any machine, any number of times, with the same bytes:

  range_ids(job, r)          tokenize one input range into the ids cache
                             (skipped when its ids file exists)
  build_task_pass(job, t, p, ids)
                             one (task, pass) TFRecord file and its
                             record-info (kept when already built from the
                             same bytes with the same settings)
  write_corpus_info(job)     `corpus_info.json`: the settings and the split

The plain CLI runs them for its tasks (`build_tasks`); the Beam pipeline
(`beam_pipeline.py`) for every task and pass. Before any of them, the
driver checks what the run will write (`check_job`: one build per save_dir,
the output ledger; `save_dir.py`), and each unit records what it wrote.
Files appear atomically (temp name, then rename; in a bucket, an upload of
a finished local file). Pass streams are memory-mapped files in local
scratch, so a worker's memory does not grow with its task's size, and a
unit needs no other unit's disk: the inputs, the ids cache and the outputs
may all be in a bucket.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from data_utils import paths
from data_utils.atomic import temp_dir, write_json
from data_utils.errors import UsageError, check_positive
from data_utils.fingerprint import file_sha256
from data_utils.path_checks import check_writable_dir
from data_utils.pretraining import (examples, fast_examples, ids_cache,
                                    save_dir as save_dirs, task_split)
from data_utils.pretraining.examples import DataError, PretrainDataConfig
from data_utils.pretraining.save_dir import (RECORD_FORMAT, already_built,
                                              format_name, record_info_path)
from data_utils.pretraining.task_split import InputRange
from data_utils.progress import Progress
from data_utils.records import prepare_cache_dir, write_records
from data_utils.tokenization import SentencePieceTokenizer

# Steps between drops of the pass stream's mapped pages (MappedStream): a
# step maps a few MB (its windows and random B spans), so the resident set
# stays near 8 steps' worth whatever the stream's length.
_RELEASE_EVERY = 8

Count = Callable[[str, int], None]


def _no_count(name: str, n: int) -> None:
  del name, n


@dataclasses.dataclass(frozen=True)
class BuildJob:
  """Everything a unit of work needs (plain values: it is pickled to Beam
  workers). `tasks[t]` lists task t's input ranges."""
  cfg: PretrainDataConfig
  tasks: Tuple[Tuple[InputRange, ...], ...]
  split_by: dict
  save_dir: str
  sp_path: str
  sp_sha256: str
  vocab_size: int
  from_raw_text: bool
  split: str
  seed: int
  pass_ids: Tuple[int, ...]
  max_batches: int
  # Replace a file of this run's names that the ledger does not list.
  overwrite: bool = False
  # The inputs' common folder: record-infos name inputs relative to it.
  input_root: str = ""

  @property
  def tfrecord_dir(self) -> str:
    return paths.join(self.save_dir, save_dirs.TFRECORDS)

  @property
  def cache_dir(self) -> str:
    return paths.join(self.save_dir, save_dirs.IDS_CACHE)

  @property
  def num_task(self) -> int:
    return len(self.tasks)

  def unique_ranges(self) -> List[InputRange]:
    return sorted({r for task in self.tasks for r in task},
                  key=InputRange.to_list)


def prepare_job(input_paths: Sequence[str], cfg: PretrainDataConfig,
                save_dir: str, sp_path: Optional[str],
                from_raw_text: bool = True, split: str = "train",
                num_task: int = 1, task_size_mb: Optional[float] = None,
                pass_ids: Sequence[int] = (0,), seed: int = 0,
                max_batches: int = 0, overwrite: bool = False) -> BuildJob:
  """Checks every setting and input file and splits the input into tasks
  (one-line errors, before any long work or any write)."""
  cfg.validate()
  check_writable_dir(save_dir, "save_dir")
  check_positive(max_batches, "max_batches", minimum=0)
  check_positive(seed, "seed", minimum=0)  # numpy's generators take no sign
  if not pass_ids or min(pass_ids) < 0:
    raise UsageError(f"passes {list(pass_ids)}: need at least one pass, "
                     "each id at least 0 (--num_passes >= 1, --pass_id >= 0)")
  if num_task < 1:
    raise DataError(f"num_task ({num_task}) must be at least 1")
  if not input_paths:
    raise DataError("no input file matches the input glob")
  if not sp_path:
    raise DataError("--sp_path is required (span sampling needs the pieces)")
  if paths.exists(sp_path):  # a missing one: the tokenizer's own line
    task_split.check_input_files([sp_path], f"sp_path={sp_path}",
                                  text=False)
  task_split.check_input_files(input_paths)
  # Before the split: --num_task=10**9 would build a billion empty tasks.
  if task_size_mb is None and num_task > len(input_paths):
    raise DataError(f"task {len(input_paths)} of {num_task} has no input "
                    f"file ({len(input_paths)} files in all)")
  vocab = SentencePieceTokenizer(sp_path, lower=cfg.uncased)
  tasks = task_split.plan_tasks(input_paths, num_task, task_size_mb)
  if not tasks:
    raise DataError(f"input is empty: {len(input_paths)} file(s) hold no "
                    f"text ({', '.join(sorted(input_paths)[:3])})")
  return BuildJob(
      cfg=cfg, tasks=tuple(tuple(t) for t in tasks),
      split_by=task_split.split_record(len(tasks), task_size_mb),
      save_dir=paths.absolute(save_dir), sp_path=paths.absolute(sp_path),
      sp_sha256=file_sha256(sp_path), vocab_size=vocab.vocab_size,
      from_raw_text=from_raw_text, split=split, seed=seed,
      pass_ids=tuple(pass_ids), max_batches=max_batches,
      overwrite=overwrite, input_root=paths.common_folder(
          [paths.absolute(p) for p in input_paths]))


def record_path(job: BuildJob, task: int, pass_id: int) -> str:
  return paths.join(job.tfrecord_dir, format_name(
      f"{job.split}-{task}-{pass_id}", job.cfg, "tfrecords"))


def claimed(job: BuildJob):
  """`save_dir.claimed` for the job's build (making save_dir): hold it
  from the checks to the end of the build."""
  paths.makedirs(job.save_dir)
  return save_dirs.claimed(job.save_dir,
                           save_dirs.build_settings(corpus_info(job)))


def check_job(job: BuildJob, tasks: Sequence[int], with_corpus_info: bool
              ) -> None:
  """Before any work: one-line UsageError unless save_dir holds no other
  build, its ids cache is the builder's, and every file the passes of
  `tasks` (and `corpus_info.json`, when this run writes it) would write may
  be written (`save_dir.py`). Creates nothing."""
  save_dirs.check_one_build(job.save_dir,
                            save_dirs.build_settings(corpus_info(job)))
  save_dirs.check_ids_cache(job.save_dir)
  if with_corpus_info:  # never onto an input, even with --overwrite
    save_dirs.check_free(job.save_dir, [paths.join(
        job.save_dir, save_dirs.CORPUS_INFO)], job.overwrite,
                         [r.path for r in job.unique_ranges()])
  save_dirs.check_passes_free(job.save_dir, [
      (record_path(job, t, p), record_info_path(job.tfrecord_dir, job.split,
                                                t, p, job.cfg))
      for t in tasks for p in job.pass_ids], job.overwrite)


_TOKENIZERS: Dict[Tuple[str, bool], SentencePieceTokenizer] = {}


def _tokenizer(job: BuildJob) -> SentencePieceTokenizer:
  """One tokenizer per process and model (a worker runs many units)."""
  key = (job.sp_path, job.cfg.uncased)
  if key not in _TOKENIZERS:
    _TOKENIZERS[key] = SentencePieceTokenizer(job.sp_path,
                                              lower=job.cfg.uncased)
  return _TOKENIZERS[key]


def _start_table(job: BuildJob) -> np.ndarray:
  vocab = _tokenizer(job)
  return examples.start_piece_table(
      [vocab.id_to_piece(i) for i in range(vocab.vocab_size)])


def range_ids(job: BuildJob, r: InputRange, count: Count = _no_count
              ) -> Tuple[str, str]:
  """`(content sha256, ids file)` of one input range, tokenizing it into
  the ids cache unless that file is already there."""
  sha = ids_cache.range_sha256(r)
  settings = {"uncased": job.cfg.uncased, "use_eod": job.cfg.use_eod,
              "from_raw_text": job.from_raw_text}
  path = paths.join(job.cache_dir, ids_cache.cache_key(
      sha, job.sp_sha256, settings) + ".ids")
  if paths.exists(path):
    logging.info("%s [%d, %d): ids cached in %s", r.path, r.begin, r.end,
                 path)
    return sha, path
  encode = _tokenizer(job).encode_ids if job.from_raw_text else None
  paths.makedirs(job.cache_dir)
  ids_cache.tokenize_range(r, encode, job.cfg.use_eod, path, count)
  return sha, path


def task_info(job: BuildJob, task: int, shas: Sequence[str]) -> dict:
  """What a task's record-infos say besides the pass: the inputs (names
  relative to their common folder, byte ranges and content), the model
  (file name and content) and the split. Where the files lie is left out:
  the same job gives the same bytes on a disk or in a bucket."""
  ranges = job.tasks[task]
  return {"sp_path": paths.basename(job.sp_path),
          "vocab_size": job.vocab_size,
          "from_raw_text": job.from_raw_text, "num_task": job.num_task,
          "task_split": job.split_by,
          "input_files": [_name(job, r) for r in ranges],
          "input_ranges": [[_name(job, r), r.begin, r.end] for r in ranges],
          "max_batches": job.max_batches,
          # content, so an edited corpus or model is built again
          "input_sha256": list(shas), "sp_sha256": job.sp_sha256}


def _name(job: BuildJob, r: InputRange) -> str:
  return paths.name_in(r.path, job.input_root)


def build_pass(data: np.ndarray, sent_ids: np.ndarray,
               cfg: PretrainDataConfig, is_start: np.ndarray,
               tfrecord_dir: str, split: str, task: int, pass_id: int,
               seed: int, info_extra: dict, max_batches: int = 0,
               release: Callable[[], None] = lambda: None,
               count: Count = _no_count) -> dict:
  """Writes one pass's TFRecord file and record-info; returns the info.
  `data`/`sent_ids` `[N]` may be memory maps (`release()` is called every
  few steps to drop their touched pages). `max_batches` > 0 stops after
  that many host steps (quick experiments)."""
  rng = np.random.default_rng([seed, task, pass_id])
  name = format_name(f"{split}-{task}-{pass_id}", cfg, "tfrecords")
  path = paths.join(tfrecord_dir, name)
  total = examples.max_host_steps(len(data), cfg)
  if max_batches:
    total = min(total, max_batches)
  progress = Progress(f"task {task} pass {pass_id} batches", total=total,
                      unit="batches")
  info_path = record_info_path(tfrecord_dir, split, task, pass_id, cfg)
  num_batch = 0

  def records():
    nonlocal num_batch
    for step in fast_examples.host_step_records(data, sent_ids, cfg,
                                                is_start, rng):
      yield from step
      num_batch += 1
      progress.update()
      count("examples", len(step))
      if num_batch % _RELEASE_EVERY == 0:
        release()
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
  count("files", 1)
  return info


def build_task_pass(job: BuildJob, task: int, pass_id: int,
                    inputs: Sequence[Tuple[str, str]],
                    count: Count = _no_count) -> Tuple[dict, bool]:
  """One (task, pass): `(record-info, built)` where `built` is False when
  an earlier run's file was kept. `inputs` are the task's `range_ids`, in
  the task's order. The pass joins the ranges in an order drawn from
  `[seed, task, pass_id, 1]`, through a memory-mapped stream file."""
  extra = task_info(job, task, [sha for sha, _ in inputs])
  info_path = record_info_path(job.tfrecord_dir, job.split, task, pass_id,
                               job.cfg)
  old = already_built(info_path, extra, job.seed, job.cfg)
  if old is not None:
    if job.overwrite:  # kept, but perhaps not yet in the ledger
      save_dirs.record([record_path(job, task, pass_id), info_path])
    return old, False
  prepare_cache_dir(job.tfrecord_dir)
  if sum(ids_cache.num_pieces(p) for _, p in inputs) == 0:
    raise DataError(f"input is empty: task {task}'s "
                    f"{len(inputs)} input range(s) hold no text "
                    f"({', '.join(r.path for r in job.tasks[task][:3])})")
  order = np.random.default_rng([job.seed, task, pass_id, 1]).permutation(
      len(inputs))
  with _scratch(job) as work:
    ids_path, sent_path, _ = ids_cache.write_pass_stream(
        [p for _, p in inputs], order, work)
    with ids_cache.MappedStream(ids_path, sent_path) as stream:
      info = build_pass(stream.ids, stream.sent_ids, job.cfg,
                        _start_table(job), job.tfrecord_dir, job.split, task,
                        pass_id, job.seed, extra, job.max_batches,
                        release=stream.release, count=count)
  save_dirs.record([record_path(job, task, pass_id), info_path])
  return info, True


def _scratch(job: BuildJob):
  """Where a unit keeps its pass stream: beside the ids cache on a disk (as
  big as the task; the system temp folder may be small), in the unit's own
  local temp folder when the cache is in a bucket."""
  if paths.is_remote(job.cache_dir):
    return paths.scratch_dir()
  return temp_dir(job.cache_dir)


def corpus_info(job: BuildJob) -> dict:
  """The build as a whole: settings, model, split and every task's
  ranges (the same whoever writes it)."""
  return {"format": RECORD_FORMAT, "config": job.cfg.to_dict(),
          "split": job.split, "seed": job.seed, "sp_sha256": job.sp_sha256,
          "vocab_size": job.vocab_size, "from_raw_text": job.from_raw_text,
          "num_task": job.num_task, "task_split": job.split_by,
          "pass_ids": list(job.pass_ids), "max_batches": job.max_batches,
          "tasks": [[[_name(job, r), r.begin, r.end] for r in ranges]
                    for ranges in job.tasks]}


def write_corpus_info(job: BuildJob) -> str:
  """Writes `corpus_info.json` (its passes: the job's and those it listed
  already) and records it in save_dir's ledger."""
  info = corpus_info(job)
  info["pass_ids"] = save_dirs.merged_pass_ids(
      job.save_dir, save_dirs.build_settings(info), job.pass_ids)
  path = paths.join(job.save_dir, save_dirs.CORPUS_INFO)
  write_json(path, info)
  save_dirs.record([path], lock=False)  # its one writer
  return path


def build_tasks(job: BuildJob, tasks: Sequence[int]) -> List[dict]:
  """The plain CLI's work: the passes of `tasks`, one after another in this
  process, with progress over all of them; returns the record-infos of the
  passes it built. `corpus_info.json` is written last, by the run that
  builds task 0 (every task, or the original's one task per process)."""
  for task in tasks:
    if not 0 <= task < job.num_task:
      raise DataError(f"task ({task}) must be in [0, num_task="
                      f"{job.num_task})")
  lines = Progress("input lines", unit="lines")
  passes = Progress("passes", total=len(tasks) * len(job.pass_ids),
                    unit="passes")

  def count(name: str, n: int) -> None:
    if name == "lines":
      lines.update(n)

  infos = []
  with save_dirs.made_dirs(job.save_dir), claimed(job):
    check_job(job, tasks, with_corpus_info=0 in tasks)
    prepare_cache_dir(job.tfrecord_dir)
    paths.makedirs(job.cache_dir)
    for task in tasks:
      inputs = [range_ids(job, r, count) for r in job.tasks[task]]
      for pass_id in job.pass_ids:
        info, built = build_task_pass(job, task, pass_id, inputs)
        if built:
          infos.append(info)
        passes.update()
    lines.finish()
    passes.finish()
    if 0 in tasks:
      write_corpus_info(job)
  return infos
