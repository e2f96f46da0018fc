"""Builds pretraining TFRecords with precomputed permutations.

One process, every task one after another (`--task=K` builds task K alone,
the original's one process per task):

    python -m data_utils.pretraining.create_pretrain_data \
        --input_glob='corpus/*.txt' --sp_path=spiece.model --save_dir=proc \
        --bsz_per_host=32 --seq_len=512 --reuse_len=256 --num_predict=85 \
        --perm_size=256 --bi_data --num_passes=2

Every task and pass as one Apache Beam pipeline (`--runner`, Beam's own
options in `--pipeline_options`), e.g. on this machine's cores:

    ... --task_size_mb=64 --runner=DirectRunner \
        --pipeline_options="--direct_num_workers=2 \
                            --direct_running_mode=multi_processing"

Input: text files, one sentence or paragraph per line, an empty line between
documents (`<eop>` may end a paragraph); or, without `--from_raw_text`, lines
of space-separated token ids. Tasks are whole files (`--num_task`) or pieces
of about `--task_size_mb` cut at document ends (`task_split.py`). Output,
under `save_dir/tfrecords/`: one TFRecord file per (split, task, pass) and
beside it a record-info JSON with its record and batch counts, every setting
that shaped it, its input ranges and their sha256, and the SentencePiece
model's; readers check those settings against their own flags. Tokenized
ids are cached under `save_dir/ids_cache/` (`ids_cache.py`). Files appear
atomically (temp file, then rename; a killed run's temp files are removed by
the next run). The inputs, the model and `--save_dir` may be in a bucket
(`gs://`, `s3://`; `data_utils/paths.py`): objects are uploaded whole,
`corpus_info.json` and the ledger entries last, and the bytes are those of
the same job on a local disk (record-infos name inputs relative to their
common folder, and the model by its file name). A re-run keeps a pass already built from the same bytes with
the same settings whose records all read back, and builds any other again.
Same inputs, seed and split, same bytes (records, record-infos and
`corpus_info.json`), whoever builds them. The record schema is documented
in `data_utils/pretraining/examples.py`.

Nothing of the user's is replaced: a save_dir holds one build, and a file
this run would write that is already there is replaced only when the output
ledger lists it as written by xlnet-tf and unchanged since, or with
`--overwrite` (`save_dir.py`). Inputs are regular files (a FIFO or a device
is refused up front) read a line of at most 1 MiB at a time; a longer line,
a NUL byte or a byte that is not UTF-8 stops the build with one line naming
the file and line. Every such refusal is one line and exit code 2.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

from absl import flags, logging

from data_utils import beam_jobs, path_checks, paths
from data_utils.errors import UsageError, check_positive, run_app, run_main
from data_utils.pretraining import beam_pipeline
from data_utils.pretraining.builder import (RECORD_FORMAT, build_pass,
                                            build_tasks, format_name,
                                            prepare_job, record_info_path)
from data_utils.pretraining.examples import (PERM_SIZE_FLAG_DEFAULT,
                                             PretrainDataConfig,
                                             flag_perm_size)
from data_utils.pretraining.task_split import check_input_files

MAX_PASSES = 10_000

__all__ = ["RECORD_FORMAT", "build_pass", "create_pretrain_data",
           "format_name", "record_info_path"]


def create_pretrain_data(input_paths: Sequence[str], cfg: PretrainDataConfig,
                         save_dir: str, sp_path: Optional[str],
                         from_raw_text: bool = True, split: str = "train",
                         task: Optional[int] = 0, num_task: int = 1,
                         pass_ids: Sequence[int] = (0,), seed: int = 0,
                         max_batches: int = 0,
                         task_size_mb: Optional[float] = None,
                         overwrite: bool = False) -> List[dict]:
  """Builds the passes of task `task` (None: of every task, one after
  another); returns the record-infos of the passes it built (a pass
  already built is kept and not returned).

  The tasks are `task_split.plan_tasks(input_paths, num_task,
  task_size_mb)`. Each pass shuffles the task's input ranges, redraws A/B
  splits, spans and permutations (all from `seed`, task and pass: the
  output is deterministic). `overwrite`: replace a file at one of the
  build's names that the output ledger does not list as ours.
  """
  job = prepare_job(input_paths, cfg, save_dir, sp_path, from_raw_text,
                    split, num_task, task_size_mb, pass_ids, seed,
                    max_batches, overwrite)
  return build_tasks(job, range(job.num_task) if task is None else [task])


def build_from_flags(f) -> None:
  """The command line's work: `f` holds the flag values (absl's FLAGS, or
  any object with the same attributes). Every flag and input is checked
  before any work (one-line UserError)."""
  cfg = PretrainDataConfig(
      seq_len=f.seq_len, reuse_len=f.reuse_len, bsz_per_host=f.bsz_per_host,
      num_core_per_host=f.num_core_per_host, bi_data=f.bi_data,
      mask_alpha=f.mask_alpha, mask_beta=f.mask_beta,
      num_predict=f.num_predict,
      perm_size=flag_perm_size(f.perm_size, f.reuse_len),
      uncased=f.uncased, use_eod=f.use_eod,
      original_ngram_count=f.original_ngram_count)
  check_positive(f.num_passes, "num_passes")
  if f.num_passes > MAX_PASSES:  # the pass list is built whole, up front
    raise UsageError(f"--num_passes={f.num_passes}: at most {MAX_PASSES} "
                     "(each pass is the whole corpus again)")
  check_positive(f.pass_id, "pass_id", minimum=0)
  check_positive(f.max_batches, "max_batches", minimum=0)
  if f.task is not None:
    check_positive(f.task, "task", minimum=0)
  if not (f.task_size_mb >= 0 and math.isfinite(f.task_size_mb)):
    raise UsageError(f"--task_size_mb={f.task_size_mb}: must be a positive, "
                     "finite number of MiB (or 0: one task per file, "
                     "--num_task)")
  if f.runner and f.task is not None:
    raise UsageError(f"--task={f.task}: with --runner every task is "
                     "built in one pipeline; leave --task out")
  options = beam_jobs.check_options(f.runner, f.pipeline_options)
  # Every store first: a missing bucket is its own line, not "no file".
  for flag in ("input_glob", "sp_path", "save_dir"):
    if getattr(f, flag):
      path_checks.check_store(getattr(f, flag), flag)
  inputs = paths.glob(f.input_glob)
  if not inputs:
    raise UsageError(f"--input_glob={f.input_glob}: matches no file")
  check_input_files(inputs, f"input_glob={f.input_glob}")
  job = prepare_job(
      inputs, cfg, f.save_dir, f.sp_path, from_raw_text=f.from_raw_text,
      split=f.split, num_task=f.num_task,
      task_size_mb=f.task_size_mb or None,
      pass_ids=list(range(f.pass_id, f.pass_id + f.num_passes)),
      seed=f.seed, max_batches=f.max_batches, overwrite=f.overwrite)
  logging.info("%d input file(s) make %d task(s) (%s)", len(inputs),
               job.num_task, job.split_by)
  if options is not None:
    beam_pipeline.run(job, options)
    return
  if f.task is None:
    logging.info("building every task in this process, one after another "
                 "(--runner=DirectRunner with --pipeline_options spreads "
                 "them over this machine's cores; --task=K builds task K "
                 "alone)")
  tasks = range(job.num_task) if f.task is None else [f.task]
  for info in build_tasks(job, tasks):
    logging.info("wrote %s: %d batches, %d examples", info["filenames"][0],
                 info["num_batch"], info["num_example"])


def main(argv):
  del argv
  return run_main("create_pretrain_data",
                  lambda: build_from_flags(flags.FLAGS))


# name: (default, help[, type]); the flag's type is the given one, else the
# default's (None: a string).
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
    "perm_size": (PERM_SIZE_FLAG_DEFAULT,
                  "Permutation block size; 0 = reuse_len."),
    "input_glob": (None, "Input file glob."),
    "sp_path": (None, "SentencePiece model."),
    "save_dir": (None, "Output directory."),
    "pass_id": (0, "First pass id to write."),
    "num_passes": (1, "Passes to write (pass_id, pass_id + 1, ...; at "
                   "least 1), each with its own permutations and spans."),
    "num_task": (1, "Tasks, each taking every num_task-th input file "
                 "(without --task_size_mb)."),
    "task": (None, "Build only this task, the original's one task per "
             "process (default: every task, one after another; with "
             "--runner, every task in one pipeline).", int),
    "task_size_mb": (0.0, "Split the input into tasks of about this many "
                     "MiB, cut at document ends, grouping small files "
                     "(0: one task per file, --num_task)."),
    "seed": (0, "Random seed: same seed, same records."),
    "max_batches": (0, "Stop each pass after this many batches (0 = all)."),
    "original_ngram_count": (False, "Reproduce the original's span sizing, "
                             "which counts sub-word pieces instead of "
                             "words."),
    "overwrite": (False, "Replace a file at one of the build's names in "
                  "save_dir that xlnet-tf did not write (or that was changed "
                  "since); without it such a file stops the build."),
}


def define_flags() -> None:
  """`python -m data_utils.pretraining.create_pretrain_data`'s flags."""
  for name, (default, help_text, *kind) in _FLAGS.items():
    kind = kind[0] if kind else type(default)
    if kind is bool:
      flags.DEFINE_bool(name, default, help_text)
    elif kind is float:
      flags.DEFINE_float(name, default, help_text)
    elif kind is int:
      flags.DEFINE_integer(name, default, help_text)
    else:
      flags.DEFINE_string(name, default, help_text)
  flags.DEFINE_enum("split", "train", ["train", "dev", "test"], "Split name.")
  beam_jobs.define_flags()  # --runner: every task and pass as one pipeline
  flags.mark_flags_as_required(["input_glob", "sp_path", "save_dir"])


def main_cli() -> None:
  """The command line: `python -m data_utils.pretraining.create_pretrain_data`,
  or `xlnet-tf-pretrain-data` installed."""
  define_flags()
  run_app("create_pretrain_data", main)


if __name__ == "__main__":
  main_cli()
