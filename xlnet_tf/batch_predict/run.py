"""Running a batch job from the driver: the output folder checked before any
work, the pipeline run into a temp folder of the job's own, and its files
moved into `--output_dir` with the manifest and the output ledger.

In `--output_dir`, the job only ever writes the names `shards.OUTPUT_NAME`
matches. One of those already there is replaced only when the folder's
ledger (`data_utils/outputs.py`) lists it with its current bytes as the
output of the same export over the same inputs, or with `--overwrite`;
else the job stops before any work. Shards of an earlier run of the same
job that this run does not write again (fewer shards) are removed. Any
other file in the folder is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Dict, List

import apache_beam as beam
from absl import logging
from apache_beam.options.pipeline_options import PipelineOptions

from data_utils import beam_jobs
from data_utils.atomic import temp_dir, write_json
from data_utils.errors import UsageError, UserError
from data_utils.outputs import (check_outputs, file_sha256, own_unchanged,
                                record_outputs)
from xlnet_tf.batch_predict import pipeline as batch_pipeline
from xlnet_tf.batch_predict.handler import NAMESPACE
from xlnet_tf.batch_predict.job import BatchJob
from xlnet_tf.batch_predict.shards import (MANIFEST, OUTPUT_NAME, STREAMS,
                                           complete_shards)

MANIFEST_FORMAT = "xlnet-tf/batch-predict/v1"


def _ours(job: BatchJob) -> List[str]:
  """The names in --output_dir this job may write or replace."""
  if not os.path.isdir(job.output_dir):
    return []
  return sorted(n for n in os.listdir(job.output_dir) if OUTPUT_NAME.match(n))


def check_output_dir(job: BatchJob) -> None:
  """One-line UsageError (before any work) unless every output-named file
  in --output_dir may be replaced (see the module docstring)."""
  if os.path.exists(job.output_dir) and not os.path.isdir(job.output_dir):
    raise UsageError(f"--output_dir={job.output_dir}: is a file")
  names = _ours(job) or [MANIFEST]
  check_outputs([os.path.join(job.output_dir, n) for n in names],
                "output_dir", job.overwrite, job.source, job.files)


def run_job(job: BatchJob, beam_args: List[str]) -> Dict:
  """Runs `job` on Beam (`beam_args`: `--runner=...` and its options) and
  returns its manifest."""
  return run_jobs([job], beam_args)[0]


def run_jobs(jobs: List[BatchJob], beam_args: List[str]) -> List[Dict]:
  """Runs `jobs` as one Beam pipeline (each into its own --output_dir, all
  checked first); returns their manifests."""
  outputs = [job.output_dir for job in jobs]
  if len(set(outputs)) != len(outputs):
    raise UsageError("--output_dir: two jobs of one pipeline write to the "
                     "same folder")
  for job in jobs:
    check_output_dir(job)
  with contextlib.ExitStack() as stack:
    job_dirs = []
    for job in jobs:
      os.makedirs(job.output_dir, exist_ok=True)
      job_dirs.append(stack.enter_context(temp_dir(job.output_dir)))
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    for i, (job, job_dir) in enumerate(zip(jobs, job_dirs)):
      _ = pipeline | f"Job {i}" >> batch_pipeline.BatchPredict(job, job_dir)
    beam_jobs.run(pipeline, NAMESPACE, UserError)
    manifests = []
    for job, job_dir in zip(jobs, job_dirs):
      with open(os.path.join(job_dir, batch_pipeline.STATS_FILE),
                encoding="utf-8") as f:
        stats = json.load(f)
      shards = complete_shards(job_dir, job.tfrecord)
      manifests.append(_manifest(job, stats, shards))
      _move_into_place(job, job_dir, shards, manifests[-1])
  return manifests


def _manifest(job: BatchJob, stats: Dict[str, int],
              shards: Dict[str, List[dict]]) -> Dict:
  rows = {s: sum(x["rows"] for x in shards[s] if x["name"].endswith(
      ".jsonl")) for s in STREAMS}
  read = stats.get("rows_read", 0)
  if rows["predictions"] + rows["dead-letter"] != read:
    raise RuntimeError(f"{read} rows read, but {rows['predictions']} "
                       f"predicted and {rows['dead-letter']} dead letters "
                       "written")
  fed = stats.get("positions_fed", 0)
  real = stats.get("positions_real", 0)
  return {"format": MANIFEST_FORMAT,
          "export": job.export.path, "export_kind": job.export.kind,
          "input": job.patterns, "files": len(job.files),
          "options": job.options,
          "counts": {"rows_read": read, "predicted": rows["predictions"],
                     "dead_letters": rows["dead-letter"]},
          "padding": {"positions_real": real, "positions_fed": fed,
                      "fraction": (fed - real) / fed if fed else 0.0,
                      "batches": stats.get("batches", 0),
                      "bucketing": job.bucketing},
          "shards": shards["predictions"],
          "dead_letter_shards": shards["dead-letter"]}


def _move_into_place(job: BatchJob, job_dir: str,
                     shards: Dict[str, List[dict]], manifest: Dict) -> None:
  """The new files replace the old (checked again now), stale shards of
  this job go, the manifest is written last-but-one and the ledger last."""
  out = job.output_dir
  new = {x["name"]: x["sha256"] for s in STREAMS for x in shards[s]}
  before = _ours(job)
  check_outputs([os.path.join(out, n) for n in list(new) + [MANIFEST]],
                "output_dir", job.overwrite, job.source, job.files)
  for name in new:
    os.replace(os.path.join(job_dir, name), os.path.join(out, name))
  stale = [n for n in before if n not in new and n != MANIFEST
           and (own_unchanged(out, n) or job.overwrite)]
  for name in stale:
    os.remove(os.path.join(out, name))
  write_json(os.path.join(out, MANIFEST), manifest)
  new[MANIFEST] = file_sha256(os.path.join(out, MANIFEST))
  record_outputs(out, new, job.source, forget=stale)
  logging.info("batch prediction: %s", json.dumps(manifest["counts"]))


def summary(manifest: Dict, output_dir: str) -> Dict:
  """The one-line report the script prints."""
  return dict(manifest["counts"], padding=round(
      manifest["padding"]["fraction"], 4), output_dir=output_dir,
      shards=len(manifest["shards"]),
      dead_letter_shards=len(manifest["dead_letter_shards"]))
