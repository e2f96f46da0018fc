"""The batch-prediction pipeline (Apache Beam):

  input files -> Reshuffle -> read rows -> Reshuffle -> prepare (tokenize,
  features) -> units (a row, or each window of a long text) -> batches of
  units of similar length -> RunInference -> a row's units joined -> rows
  -> shards of JSONL (and TFRecord) in the job's folder

Batches (`--bucketing`):
  global  length buckets across the whole input (`buckets.py`): the units
          per bucket are counted first (`Count.PerElement`, `ToDict`) and
          sparse buckets merged into ranges, a side input; each unit is
          keyed by (range, group), the group a stable hash of its key
          spread by the range's size, so that no group holds more than
          about `buckets.GROUP_ROWS` units and hot buckets land on many
          workers;
          `GroupByKey` brings a group together, and it is sorted and cut
          into batches. A worker holds one group at a time, whatever the
          input's size, and the batches are the same on every runner.
  bundle  Beam's `SortAndBatchElements`: each bundle sorted by length and
          cut (a worker holds its bundle; on the DirectRunner that is its
          whole share of the input).
  none    RunInference's own `BatchElements`, in arrival order.

A row read in several units (a token classifier's windows) meets again by
its key (`GroupByKey`) and the kind joins their outputs in order; a row of
one unit goes straight on.

Rows that cannot be read or prepared leave the main path as dead rows
`(key, reason)` and are written as the `dead-letter` stream. The job's
counts travel as data, summed into the job folder's `stats.json`:
Beam's counters can miss the rows of batches its timers flushed.
  rows_read, rows_dead           read (dead ones among them), and dead
                                 when prepared
  rows_prepared, units           rows that went on, and their units
  units_predicted                units out of RunInference
  rows_formatted                 rows handed to the shard writer
  positions_real, positions_fed, batches, shapes    the padding
Each step's count is what the next should see: the driver names the step
where rows went missing, if any did (`run.lost_rows`).

The job's folder may be a key prefix in a bucket (`--output_dir` there):
every unit reads its inputs from their URLs and writes whole objects
there, so workers need no disk in common.
"""

from __future__ import annotations

import contextlib
import json
from typing import Iterator, Tuple

import apache_beam as beam
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.transforms.util import SortAndBatchElements

from data_utils import beam_jobs, paths
from data_utils.atomic import atomic_path
from data_utils.errors import UserError
from data_utils.text_inputs import DeadRow, read_rows
from xlnet_tf.batch_predict.buckets import (GROUP_ROWS, MIN_ROWS,
                                            bucket_of, cut, group_of, layout)
from xlnet_tf.batch_predict.handler import (ExportModelHandler,
                                            element_length)
from xlnet_tf.batch_predict.job import BatchJob
from xlnet_tf.batch_predict.shards import (shard_count, shard_of,
                                           write_failures, write_shard)
from xlnet_tf.tasks.batch import RowProblem

DEAD, STATS, SPLIT = "dead", "stats", "split"
STATS_FILE = "stats.json"


def _dead(key: Tuple[str, int], reason: str):
  line = json.dumps({"file": key[0], "line": key[1], "reason": reason},
                    ensure_ascii=False)
  return beam.pvalue.TaggedOutput(DEAD, (key, line, None))


class _ReadRows(beam.DoFn):
  def __init__(self, job: BatchJob):
    self.job = job

  def process(self, path: str) -> Iterator:
    rows = dead = 0
    export = self.job.export
    # Rows name their file relative to the inputs' common folder: the same
    # bytes whether the corpus lies on a disk or in a bucket.
    name = paths.name_in(path, self.job.input_root)
    for row in export.spec.batch.in_context(
        export.meta, read_rows(path, self.job.inputs)):
      rows += 1
      if isinstance(row, DeadRow):
        dead += 1
        yield _dead((name, row.line), row.reason)
      else:
        yield ((name, row.line), row.fields)
    yield beam.pvalue.TaggedOutput(STATS, {"rows_read": rows,
                                           "rows_dead": dead})


class _KindDoFn(beam.DoFn):
  """A step that needs the job's kind (built once per worker instance: it
  holds a tokenizer)."""

  def __init__(self, job: BatchJob):
    super().__init__()
    self.job = job
    self.kind = None

  def setup(self):
    self.kind = self.job.kind()


class _Prepare(_KindDoFn):
  def process(self, element) -> Iterator:
    key, fields = element
    try:
      yield key, (fields, self.kind.prepare(fields))
    except RowProblem as e:
      yield _dead(key, str(e))
      yield beam.pvalue.TaggedOutput(STATS, {"rows_dead": 1})


class _Units(_KindDoFn):
  """`(key, (fields, Prepared row))` -> its units `((key, i, n), (fields
  or None, Prepared unit))`, the fields with the first unit only."""

  def process(self, element) -> Iterator:
    key, (fields, prepared) = element
    units = self.kind.units(prepared)
    yield beam.pvalue.TaggedOutput(STATS, {"rows_prepared": 1,
                                           "units": len(units)})
    for i, unit in enumerate(units):
      yield (key, i, len(units)), (fields if i == 0 else None, unit)


class _Outputs(beam.DoFn):
  """Predicted units -> `(key, fields, payloads, outputs)` of one-unit
  rows; the units of other rows go out as SPLIT `(key, (i, fields,
  payload, output))`. Each unit's positions (and its batch's shape, once
  per batch) go out as STATS."""

  def process(self, element) -> Iterator:
    (key, i, n), result = element
    fields, unit = result.example
    output, padding, rows = result.inference
    stats = {"units_predicted": 1, "positions_real": padding.real,
             "positions_fed": padding.fed}
    if rows:
      stats.update(batches=1, shapes={f"{rows}x{padding.fed}": 1})
    yield beam.pvalue.TaggedOutput(STATS, stats)
    if n == 1:
      yield key, fields, [unit.payload], [output]
    else:
      yield beam.pvalue.TaggedOutput(SPLIT, (key, (i, fields, unit.payload,
                                                   output)))


def _joined(element):
  """A split row's units, met again, in order: `(key, fields, payloads,
  outputs)`."""
  key, units = element
  units = sorted(units, key=lambda u: u[0])
  return (key, units[0][1], [u[2] for u in units], [u[3] for u in units])


class _Format(_KindDoFn):
  def process(self, element) -> Iterator:
    key, fields, payloads, outputs = element
    payload, output = self.kind.join(payloads, outputs)
    row = {"file": key[0], "line": key[1]}
    row.update(self.kind.row(fields, payload, output))
    example = (self.kind.example(key, fields, payload, output)
               if self.job.tfrecord else None)
    yield key, json.dumps(row, ensure_ascii=False), example
    yield beam.pvalue.TaggedOutput(STATS, {"rows_formatted": 1})


class GlobalBatches(beam.PTransform):
  """Keyed units -> batches (lists) of units of similar length across the
  whole input (see the module docstring)."""

  def __init__(self, batch_size: int, max_positions: int,
               min_rows: int = MIN_ROWS, group_rows: int = GROUP_ROWS):
    super().__init__()
    self.batch_size, self.max_positions = batch_size, max_positions
    self.min_rows, self.group_rows = min_rows, group_rows

  def expand(self, units):
    ranges = (units
              | "Bucket" >> beam.Map(lambda u: bucket_of(element_length(u)))
              | "Count buckets" >> beam.combiners.Count.PerElement()
              | "All counts" >> beam.combiners.ToDict()
              | "Ranges" >> beam.Map(layout, self.min_rows,
                                     self.group_rows))
    return (units
            | "Key groups" >> beam.Map(_group_key,
                                       beam.pvalue.AsSingleton(ranges))
            | "Group" >> beam.GroupByKey()
            | "Cut batches" >> beam.FlatMap(
                lambda group, b, p: cut(list(group[1]), element_length,
                                        lambda u: u[0], b, p),
                self.batch_size, self.max_positions))


def _group_key(unit, ranges):
  first, spread = ranges[bucket_of(element_length(unit))]
  return (first, group_of(unit[0], spread)), unit


@contextlib.contextmanager
def _one_line(output_dir: str):
  """In a worker: a failed write reaches the driver as its one line."""
  try:
    with write_failures(output_dir):
      yield
  except UserError as e:
    raise beam_jobs.marked(e) from None


class _WriteShard(beam.DoFn):
  def __init__(self, job: BatchJob, job_dir: str, stream: str,
               tfrecord: bool):
    self.output_dir = job.output_dir
    self.job_dir, self.stream, self.tfrecord = job_dir, stream, tfrecord

  def process(self, element, shards: int) -> Iterator[str]:
    index, rows = element
    with _one_line(self.output_dir):
      names = write_shard(self.job_dir, self.stream, index, shards, rows,
                          self.tfrecord)
    yield from names


def _write(rows, stream: str, job: BatchJob, job_dir: str, tfrecord: bool):
  """Rows `(key, json_line, example)` -> the stream's shards."""
  shards = (rows | f"Count {stream}" >> beam.combiners.Count.Globally()
            | f"Shards {stream}" >> beam.Map(shard_count,
                                             job.rows_per_shard))
  shards = beam.pvalue.AsSingleton(shards)
  return (rows
          | f"Key {stream}" >> beam.Map(lambda r, n: (shard_of(r[0], n), r),
                                        shards)
          | f"Group {stream}" >> beam.GroupByKey()
          | f"Write {stream}" >> beam.ParDo(
              _WriteShard(job, job_dir, stream, tfrecord), shards))


class BatchPredict(beam.PTransform):
  """The whole job as one transform of the pipeline's root (several jobs
  can share a pipeline, each under its own label); its files land in
  `job_dir`."""

  def __init__(self, job: BatchJob, job_dir: str):
    super().__init__()
    self.job, self.job_dir = job, job_dir

  def expand(self, root):
    job, job_dir = self.job, self.job_dir
    handler = KeyedModelHandler(ExportModelHandler(
        job.export.path, job.kind(), job.batch_size,
        expected_rows=(-(-job.expected_rows // job.workers)
                       if job.expected_rows else None),
        precision=job.precision, xla=job.xla))
    read = (root
            | "Files" >> beam.Create(list(job.files))
            | "Spread files" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadRows(job)).with_outputs(
                DEAD, STATS, main="rows"))
    prepared = (read.rows
                | "Spread rows" >> beam.Reshuffle()
                | "Prepare" >> beam.ParDo(_Prepare(job)).with_outputs(
                    DEAD, STATS, main="ok"))
    made = prepared.ok | "Units" >> beam.ParDo(_Units(job)).with_outputs(
        STATS, main="units")
    units = made.units
    if job.bucketing == "global":
      units = units | "Batch by length" >> GlobalBatches(
          job.batch_size, job.positions_per_batch(),
          group_rows=job.group_rows)
      handler = handler.with_no_batching()
    elif job.bucketing == "bundle":
      units = (units
               | "Sort bundles" >> SortAndBatchElements(
                   min_batch_size=1, max_batch_size=job.batch_size,
                   max_batch_weight=job.positions_per_batch(),
                   element_size_fn=element_length))
      handler = handler.with_no_batching()
    predicted = (units
                 | "RunInference" >> RunInference(handler)
                 | "Outputs" >> beam.ParDo(_Outputs()).with_outputs(
                     STATS, SPLIT, main="whole"))
    joined = (predicted[SPLIT]
              | "Meet by row" >> beam.GroupByKey()
              | "Join units" >> beam.Map(_joined))
    rows = ((predicted.whole, joined) | "All rows" >> beam.Flatten()
            | "Rows" >> beam.ParDo(_Format(job)).with_outputs(STATS,
                                                               main="rows"))
    dead = (read[DEAD], prepared[DEAD]) | "Dead rows" >> beam.Flatten()
    _write(rows.rows, "predictions", job, job_dir, job.tfrecord)
    _write(dead, "dead-letter", job, job_dir, False)
    stats = (read, prepared, made, predicted, rows)
    return (tuple(step[STATS] for step in stats) | "Stats" >> beam.Flatten()
            | "Sum stats" >> beam.CombineGlobally(_SumStats())
            | "Write stats" >> beam.Map(_write_stats, job_dir,
                                        job.output_dir))


class _SumStats(beam.CombineFn):
  def create_accumulator(self):
    return {}

  def add_input(self, total, stats):
    for k, v in stats.items():
      if isinstance(v, dict):  # counts by name (batch shapes)
        total[k] = self.add_input(total.get(k, {}), v)
      else:
        total[k] = total.get(k, 0) + v
    return total

  def merge_accumulators(self, totals):
    out = {}
    for total in totals:
      out = self.add_input(out, total)
    return out

  def extract_output(self, total):
    return total


def _write_stats(stats: dict, job_dir: str, output_dir: str) -> None:
  with _one_line(output_dir):
    with atomic_path(paths.join(job_dir, STATS_FILE)) as tmp:
      with open(tmp, "w", encoding="utf-8") as f:
        json.dump(stats, f, sort_keys=True)
