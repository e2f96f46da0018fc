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

Publishing (`publish`) is safe against a failure at any point (a full
disk, any OS error): the manifest is written beside the new shards in the
temp folder; the files the new ones replace, and the stale shards, are
set aside into it; then the ledger records the new names with their new
bytes (the commit); then the new files are renamed into place, the
manifest last. A failure before the commit puts what was set aside back
(the folder is as it was); after it, each name holds its new bytes or is
missing, and the ledger lists it either way, so the same command run
again replaces it. Either way the failure is one line.

In a bucket (`--output_dir` a `gs://` or `s3://` URL) there is no rename,
so the same steps map to copies: the job's temp folder is a key prefix
under `--output_dir` (`atomic.temp_dir`), where each worker uploads its
finished shards; setting a file aside is a server-side copy into that
prefix and a delete, and putting it back a copy; placing a file is a
server-side copy to its final name, so each object appears whole, the
manifest last. The ledger is one object per file (`outputs.py`), written
after the set-aside and before the placing: an output name is then absent
or holds the bytes its entry lists, so the same command run again replaces
it. (The entries are written one by one, so a failure among them is
already the "some are missing" line.) An object whose entry already lists
it with the new bytes (a finished unit of an earlier run of the same job)
is kept as it is, not copied again (never the manifest). The prefixes of
killed runs go at the next run (`atomic.remove_stale_temps`: on a disk
from the same host, the prefix being named by the driver's host and
process; in a bucket from any host, once the driver's lease has expired).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Dict, List, Optional, Set, Tuple

import apache_beam as beam
from absl import logging
from apache_beam.options.pipeline_options import PipelineOptions

from data_utils import beam_jobs, path_checks, paths
from data_utils.atomic import temp_dir, write_json
from data_utils.errors import UsageError, UserError
from data_utils.fingerprint import file_sha256
from data_utils.outputs import (check_outputs, own_unchanged,
                                read_ledger, record_outputs)
from xlnet_tf.batch_predict import pipeline as batch_pipeline
from xlnet_tf.batch_predict.handler import NAMESPACE
from xlnet_tf.batch_predict.job import BatchJob
from xlnet_tf.batch_predict.shards import (MANIFEST, OUTPUT_NAME, STREAMS,
                                           complete_shards, write_failures)

# v2: inputs named relative to their common folder, the export by the
# sha256 of its saved_model.pb (no locations: a bucket run has the bytes of
# a local one).
MANIFEST_FORMAT = "xlnet-tf/batch-predict/v2"


def _ours(job: BatchJob) -> List[str]:
  """The names in --output_dir this job may write or replace."""
  if not paths.isdir(job.output_dir):
    return []
  return sorted(n for n in paths.listdir(job.output_dir)
                if OUTPUT_NAME.match(n))


def check_output_dir(job: BatchJob) -> None:
  """One-line UsageError (before any work) unless every output-named file
  in --output_dir may be replaced (see the module docstring)."""
  path_checks.check_store(job.output_dir, "output_dir")
  if paths.exists(job.output_dir) and not paths.isdir(job.output_dir):
    raise UsageError(f"--output_dir={job.output_dir}: is a file")
  names = _ours(job) or [MANIFEST]
  check_outputs([paths.join(job.output_dir, n) for n in names],
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
      with write_failures(job.output_dir):
        paths.makedirs(job.output_dir)
        job_dirs.append(stack.enter_context(temp_dir(job.output_dir)))
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    for i, (job, job_dir) in enumerate(zip(jobs, job_dirs)):
      _ = pipeline | f"Job {i}" >> batch_pipeline.BatchPredict(job, job_dir)
    beam_jobs.run(pipeline, NAMESPACE, UserError)
    return [publish(job, job_dir) for job, job_dir in zip(jobs, job_dirs)]


def publish(job: BatchJob, job_dir: str) -> Dict:
  """Moves the files the pipeline wrote in `job_dir` (the job's temp
  folder in --output_dir) into place with the manifest and the ledger (see
  the module docstring); returns the manifest."""
  out = job.output_dir
  with write_failures(out):
    with paths.open_file(paths.join(job_dir, batch_pipeline.STATS_FILE),
                         encoding="utf-8") as f:
      stats = json.load(f)
    shards = complete_shards(job_dir, job.tfrecord)
    manifest = _manifest(job, stats, shards)
    write_json(paths.join(job_dir, MANIFEST), manifest)
    new = {x["name"]: x["sha256"] for s in STREAMS for x in shards[s]}
    new[MANIFEST] = file_sha256(paths.join(job_dir, MANIFEST))
    # Checked again now: the folder may have changed while the job ran.
    check_outputs([paths.join(out, n) for n in new], "output_dir",
                  job.overwrite, job.source, job.files)
    if paths.is_remote(out):
      kept = _kept(job, new)
      forget = _set_aside(job, job_dir, new, kept)
    else:
      _commit(job, job_dir, new)
  with write_failures(out, placing=True):
    if paths.is_remote(out):
      record_outputs(out, new, job.source, forget=forget)
      for name in new:  # the manifest last: its presence says all are there
        if name not in kept:
          paths.copy(paths.join(job_dir, name), paths.join(out, name))
    else:
      for name in new:  # the manifest last: its presence says all are there
        os.replace(os.path.join(job_dir, name), os.path.join(out, name))
  logging.info("batch prediction: %s", json.dumps(manifest["counts"]))
  return manifest


def _stale_and_gone(job: BatchJob, new: Dict[str, str]
                    ) -> Tuple[List[str], List[str]]:
  """This job's stale shards (of an earlier run, not written again) and
  the output names the ledger lists that are not there."""
  out = job.output_dir
  stale = [n for n in _ours(job) if n not in new and paths.isfile(
      paths.join(out, n)) and (own_unchanged(out, n) or job.overwrite)]
  remote = paths.is_remote(out)
  # Names a failed run recorded but never placed (they are harmless, and
  # dropped here so that the ledger lists only what is there or coming).
  gone = [n for n in read_ledger(out) if OUTPUT_NAME.match(n)
          and n not in new and not (paths.exists if remote else
                                    os.path.lexists)(paths.join(out, n))]
  return stale, gone


def _commit(job: BatchJob, job_dir: str, new: Dict[str, str]) -> None:
  """Sets aside (into `job_dir`) the files the `new` ones ({name: sha256})
  replace and this job's stale shards, then records the new names in the
  ledger and forgets the stale ones and those of ours that are gone. A
  failure before the ledger is written puts back what was set aside."""
  out = job.output_dir
  stale, gone = _stale_and_gone(job, new)
  replaced = [n for n in new if os.path.lexists(os.path.join(out, n))]
  aside = os.path.join(job_dir, "replaced")
  os.mkdir(aside)
  moved: List[str] = []
  try:
    for name in replaced + stale:
      os.replace(os.path.join(out, name), os.path.join(aside, name))
      moved.append(name)
    record_outputs(out, new, job.source, forget=stale + gone)
  except BaseException:
    for name in reversed(moved):
      try:
        os.replace(os.path.join(aside, name), os.path.join(out, name))
      except OSError as e:  # the first failure is the one to report
        logging.error("could not put %s back: %s", name, e)
    raise


def _kept(job: BatchJob, new: Dict[str, str]) -> Set[str]:
  """In a bucket: the new names already there with their new bytes, as
  the ledger lists them (finished units of an earlier run of this job);
  never the manifest, which goes last."""
  out, ledger = job.output_dir, read_ledger(job.output_dir)
  return {n for n, sha256 in new.items() if n != MANIFEST
          and ledger.get(n, {}).get("sha256") == sha256
          and paths.isfile(paths.join(out, n))
          and file_sha256(paths.join(out, n)) == sha256}


def _set_aside(job: BatchJob, job_dir: str, new: Dict[str, str],
               kept: Set[str]) -> List[str]:
  """In a bucket: copies the objects the `new` ones replace (but `kept`)
  and this job's stale shards into `job_dir` and deletes them, putting
  them back if that fails; returns the names the ledger is to forget."""
  out = job.output_dir
  stale, gone = _stale_and_gone(job, new)
  replaced = [n for n in new if n not in kept and paths.exists(
      paths.join(out, n))]
  aside = paths.join(job_dir, "replaced")
  moved: List[str] = []
  try:
    for name in replaced + stale:
      paths.copy(paths.join(out, name), paths.join(aside, name))
      paths.remove(paths.join(out, name))
      moved.append(name)
  except BaseException:
    for name in reversed(moved):
      try:
        paths.copy(paths.join(aside, name), paths.join(out, name))
      except OSError as e:  # the first failure is the one to report
        logging.error("could not put %s back: %s", name, e)
    raise
  return stale + gone


def _manifest(job: BatchJob, stats: Dict[str, int],
              shards: Dict[str, List[dict]]) -> Dict:
  rows = {s: sum(x["rows"] for x in shards[s] if x["name"].endswith(
      ".jsonl")) for s in STREAMS}
  read = stats.get("rows_read", 0)
  lost = lost_rows(stats, rows["predictions"], rows["dead-letter"])
  if lost:
    raise RuntimeError(f"{lost}; nothing was published")
  fed = stats.get("positions_fed", 0)
  real = stats.get("positions_real", 0)
  return {"format": MANIFEST_FORMAT,
          "export_sha256": file_sha256(paths.join(job.export.path,
                                                  "saved_model.pb")),
          "export_kind": job.export.kind,
          "input": ",".join(paths.name_in(paths.absolute(p.strip()),
                                         job.input_root)
                            for p in job.patterns.split(",") if p.strip()),
          "files": len(job.files),
          "options": job.options,
          "counts": {"rows_read": read, "predicted": rows["predictions"],
                     "dead_letters": rows["dead-letter"]},
          "padding": {"positions_real": real, "positions_fed": fed,
                      "fraction": (fed - real) / fed if fed else 0.0,
                      "batches": stats.get("batches", 0),
                      "bucketing": job.bucketing,
                      "shapes": _shapes(stats.get("shapes", {}))},
          "shards": shards["predictions"],
          "dead_letter_shards": shards["dead-letter"]}


def lost_rows(stats: Dict[str, int], predicted: int, dead: int
              ) -> Optional[str]:
  """None if every row read is in the shards (`predicted` and `dead`
  letters written), else what went missing and at which step of the
  pipeline, from each step's count in `stats` (`pipeline.py`).

  Example:
    >>> stats = {"rows_read": 5, "rows_dead": 1, "rows_prepared": 4,
    ...          "units": 6, "units_predicted": 6, "rows_formatted": 4}
    >>> lost_rows(stats, 4, 1) is None
    True
    >>> lost_rows(dict(stats, units_predicted=5), 3, 1)
    '5 rows read, but 3 predicted and 1 dead letters written: lost in \
the batching and RunInference (6 units made, 5 predicted)'
  """
  read = stats.get("rows_read", 0)
  if predicted + dead == read:
    return None
  count = lambda name: stats.get(name, 0)  # noqa: E731
  steps = [
      ("reading and preparing", count("rows_prepared") + count("rows_dead"),
       read, f"{read} rows read, {count('rows_prepared')} prepared and "
       f"{count('rows_dead')} dead"),
      ("the batching and RunInference", count("units"),
       count("units_predicted"), f"{count('units')} units made, "
       f"{count('units_predicted')} predicted"),
      ("joining a row's units", count("rows_prepared"),
       count("rows_formatted"), f"{count('rows_prepared')} rows prepared, "
       f"{count('rows_formatted')} joined"),
      ("writing the prediction shards", count("rows_formatted"), predicted,
       f"{count('rows_formatted')} rows formatted, {predicted} written"),
      ("writing the dead-letter shards", count("rows_dead"), dead,
       f"{count('rows_dead')} dead, {dead} written")]
  where = next((f"lost in {step} ({told})"
                for step, before, after, told in steps if before != after),
               "every step's count agrees, so the counts themselves are "
               "short")
  return (f"{read} rows read, but {predicted} predicted and {dead} dead "
          f"letters written: {where}")


def _shapes(counts: Dict[str, int]) -> List[List[int]]:
  """The batches fed to the model, `[rows, length, count]` sorted, from
  the stats' counts by "ROWSxLENGTH".

  Example:
    >>> _shapes({"32x16": 3, "4x512": 1, "32x9": 2})
    [[4, 512, 1], [32, 9, 2], [32, 16, 3]]
  """
  return sorted([*map(int, shape.split("x")), n]
                for shape, n in counts.items())


def summary(manifest: Dict, output_dir: str) -> Dict:
  """The one-line report the script prints."""
  return dict(manifest["counts"], padding=round(
      manifest["padding"]["fraction"], 4), output_dir=output_dir,
      shards=len(manifest["shards"]),
      dead_letter_shards=len(manifest["dead_letter_shards"]))
