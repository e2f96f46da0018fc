"""Every task and pass of a record build as one Apache Beam pipeline.

    ranges ─ Reshuffle ─ tokenize ──────────┐ (side input: range -> ids file)
    (task, pass) ─ Reshuffle ─ build ◄──────┘ ─ count ─ write corpus_info

The units are `builder`'s, the same the plain CLI runs, so the records,
record-infos and `corpus_info.json` are the same bytes whatever the runner,
the number of workers, the order work completes in, and any retry: each
unit is a function of the job alone and writes to a temp name, then
renames. A (task, pass) already built is kept. The input files and
`save_dir` must be visible to every worker (one disk locally; a shared file
system on a cluster).

Counters (`xlnet_tf.pretrain_data`): lines, pieces, examples, files; each
pass also logs its own progress (rate, ETA) where the worker logs.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import List, Optional, Tuple

from absl import logging

from data_utils.errors import UsageError, UserError
from data_utils.pretraining import builder
from data_utils.pretraining.builder import BuildJob
from data_utils.pretraining.examples import DataError
from data_utils.pretraining.task_split import InputRange

COUNTERS = "xlnet_tf.pretrain_data"
# A test hook: "<marker path>:<task>:<pass>" makes that unit fail once,
# half-way through writing its records, as a worker that dies would.
FAIL_ONCE_ENV = "XLNET_TF_TEST_FAIL_ONCE"
# A unit's one-line error travels to the driver inside Beam's exception
# text between these marks.
_MARK = "<<xlnet-tf-error>>"
_MARKED = re.compile(re.escape(_MARK) + "(.*?)" + re.escape(_MARK))


def check_options(runner: str, pipeline_options: Optional[str]) -> List[str]:
  """Beam's argument list for `--runner` and `--pipeline_options`, checked
  before any work (one-line UsageError)."""
  try:
    args = shlex.split(pipeline_options or "")
  except ValueError as e:
    raise UsageError(f"--pipeline_options={pipeline_options!r}: {e}") \
        from None
  if any(a == "--runner" or a.startswith("--runner=") for a in args):
    raise UsageError("--pipeline_options: give the runner as --runner, "
                     "not inside the pipeline options")
  try:
    from apache_beam.runners.runner import create_runner  # heavy: on use
    create_runner(runner)
  except ImportError as e:
    raise UsageError(f"--runner={runner}: needs a Beam extra that is not "
                     f"installed ({e}); e.g. pip install "
                     "'apache-beam[gcp]' for Dataflow") from None
  except ValueError as e:
    raise UsageError(f"--runner={runner}: {' '.join(str(e).split())}") \
        from None
  return [f"--runner={runner}"] + args


def _counter(name: str):
  from apache_beam.metrics import Metrics
  return Metrics.counter(COUNTERS, name)


def _count(name: str, n: int) -> None:
  if n:
    _counter(name).inc(n)


def _marked(e: UserError) -> RuntimeError:
  return RuntimeError(f"{_MARK}{e}{_MARK}")


def tokenize_unit(r: Tuple[str, int, int], job: BuildJob
                  ) -> Tuple[Tuple[str, int, int], Tuple[str, str]]:
  """`(range, (sha256, ids file))` of one input range."""
  try:
    return tuple(r), builder.range_ids(job, InputRange(*r), _count)
  except UserError as e:
    raise _marked(e) from None


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
  except UserError as e:
    raise _marked(e) from None
  if not built:
    _counter("files_kept").inc()
  return info


def write_corpus_info_unit(num_units: int, job: BuildJob) -> str:
  del num_units  # only orders this after every unit
  return builder.write_corpus_info(job)


def run(job: BuildJob, beam_args: List[str]) -> dict:
  """Runs the build; returns the counters (`{name: value}`). A unit's
  one-line error (bad input) is raised here as a DataError naming its file
  and line; units finished before it keep their files."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions

  os.makedirs(job.cache_dir, exist_ok=True)
  os.makedirs(job.tfrecord_dir, exist_ok=True)
  ranges = [r.to_list() for r in job.unique_ranges()]
  units = [(t, p) for t in range(job.num_task) for p in job.pass_ids]
  logging.info("Beam build: %d input range(s), %d task(s) x %d pass(es)",
               len(ranges), job.num_task, len(job.pass_ids))
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
  try:
    result = pipeline.run()
    result.wait_until_finish()
  except Exception as e:  # Beam wraps a worker's error in its own
    found = _MARKED.search(str(e))
    if found:
      raise DataError(found.group(1)) from None
    raise
  counters = {}
  for c in result.metrics().query()["counters"]:
    if c.key.metric.namespace == COUNTERS:
      value = c.committed if c.committed is not None else c.attempted
      counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + value
  logging.info("Beam build done: %s", ", ".join(
      f"{k} {v}" for k, v in sorted(counters.items())))
  return counters
