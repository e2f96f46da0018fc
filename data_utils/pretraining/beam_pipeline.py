"""Every task and pass of a record build as one Apache Beam pipeline.

    ranges ─ Reshuffle ─ tokenize ──────────┐ (side input: range -> ids file)
    (task, pass) ─ Reshuffle ─ build ◄──────┘ ─ count ─ write corpus_info

The units are `builder`'s, the same the plain CLI runs, so the records,
record-infos and `corpus_info.json` are the same bytes whatever the runner,
the number of workers, the order work completes in, and any retry: each
unit is a function of the job alone and writes to a temp name, then
renames. A (task, pass) already built is kept. The driver checks what the
job will write before the pipeline starts (one build per save_dir, the
output ledger: `save_dir.py`); each build unit records its files in the
ledger under its lock, and the last step records `corpus_info.json`.
Workers share nothing but the inputs and `save_dir`, which may be buckets
(`gs://`, `s3://`; on a cluster with no shared disk they must be): the ids
cache is under `save_dir`, and each unit keeps its pass stream in its own
local temp folder, removed when the unit ends.

Counters (`xlnet_tf.pretrain_data`): lines, pieces, examples, files; each
pass also logs its own progress (rate, ETA) where the worker logs.
"""

from __future__ import annotations

import os
from typing import List, Tuple

from absl import logging

from data_utils import beam_jobs, paths
from data_utils.errors import UserError
from data_utils.pretraining import builder, save_dir
from data_utils.pretraining.builder import BuildJob
from data_utils.pretraining.examples import DataError
from data_utils.pretraining.task_split import InputRange

COUNTERS = "xlnet_tf.pretrain_data"
# A test hook: "<marker path>:<task>:<pass>" makes that unit fail once,
# half-way through writing its records, as a worker that dies would.
FAIL_ONCE_ENV = "XLNET_TF_TEST_FAIL_ONCE"
_count = beam_jobs.count(COUNTERS)


def tokenize_unit(r: Tuple[str, int, int], job: BuildJob
                  ) -> Tuple[Tuple[str, int, int], Tuple[str, str]]:
  """`(range, (sha256, ids file))` of one input range."""
  try:
    return tuple(r), builder.range_ids(job, InputRange(*r), _count)
  except (UserError, OSError) as e:
    raise beam_jobs.marked(e) from None


def _fail_once_hook(task: int, pass_id: int):
  """The test hook's counter callback for this unit, or `_count`."""
  spec = os.environ.get(FAIL_ONCE_ENV, "")
  marker, _, unit = spec.rpartition(":")
  marker, _, want_task = marker.rpartition(":")
  if not spec or (want_task, unit) != (str(task), str(pass_id)) or \
      os.path.exists(marker):
    return _count

  def count(name: str, n: int) -> None:
    _count(name, n)
    if name == "examples" and not os.path.exists(marker):
      open(marker, "w").close()
      raise RuntimeError(f"{FAIL_ONCE_ENV}: unit ({task}, {pass_id}) fails "
                         "once, mid-write")
  return count


def build_unit(unit: Tuple[int, int], job: BuildJob, ids: dict) -> dict:
  """One (task, pass); `ids` maps every range to its `tokenize_unit`."""
  task, pass_id = unit
  inputs = [ids[tuple(r.to_list())] for r in job.tasks[task]]
  try:
    info, built = builder.build_task_pass(job, task, pass_id, inputs,
                                          _fail_once_hook(task, pass_id))
  except (UserError, OSError) as e:
    raise beam_jobs.marked(e) from None
  _count("files_kept", 0 if built else 1)
  return info


def write_corpus_info_unit(num_units: int, job: BuildJob) -> str:
  del num_units  # only orders this after every unit
  return builder.write_corpus_info(job)


def run(job: BuildJob, beam_args: List[str]) -> dict:
  """Runs the build; returns the counters (`{name: value}`). What it will
  write is checked first, in the driver (`builder.check_job`). A unit's
  one-line error (bad input) is raised here as a DataError naming its file
  and line; units finished before it keep their files (and their ledger
  entries: each unit records its own, `save_dir.py`)."""
  import apache_beam as beam  # heavy: on use
  from apache_beam.options.pipeline_options import PipelineOptions

  ranges = [r.to_list() for r in job.unique_ranges()]
  units = [(t, p) for t in range(job.num_task) for p in job.pass_ids]
  with save_dir.made_dirs(job.save_dir), builder.claimed(job):
    builder.check_job(job, range(job.num_task), with_corpus_info=True)
    logging.info("Beam build: %d input range(s), %d task(s) x %d pass(es)",
                 len(ranges), job.num_task, len(job.pass_ids))
    paths.makedirs(job.cache_dir)
    paths.makedirs(job.tfrecord_dir)
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    ids = (pipeline
           | "Ranges" >> beam.Create(ranges)
           | "SpreadRanges" >> beam.Reshuffle()
           | "Tokenize" >> beam.Map(tokenize_unit, job))
    _ = (pipeline
         | "Units" >> beam.Create(units)
         | "SpreadUnits" >> beam.Reshuffle()
         | "Build" >> beam.Map(build_unit, job, beam.pvalue.AsDict(ids))
         | "CountUnits" >> beam.combiners.Count.Globally()
         | "CorpusInfo" >> beam.Map(write_corpus_info_unit, job))
    counters = beam_jobs.run(pipeline, COUNTERS, DataError)
  logging.info("Beam build done: %s", ", ".join(
      f"{k} {v}" for k, v in sorted(counters.items())))
  return counters
