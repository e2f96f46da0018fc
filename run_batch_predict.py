"""Runs an exported model over a corpus on Apache Beam: labels, entities,
embeddings or scores for millions of texts, on this machine or a cluster.

    python run_batch_predict.py --export_dir=finetuned/sst2/saved_model \
        --input='crawl/*.jsonl' --text_column=text --output_dir=preds \
        --runner=DirectRunner \
        --pipeline_options="--direct_num_workers=2 --direct_running_mode=multi_processing"

The export decides what is predicted:
  classifier / regressor   label, class_id, probabilities, logits / score
                           (`--text_b_column` for text pairs)
  token_classifier         words, their character offsets, tags, entities
  language_model           `--job=embed`: pieces with offsets and pooled
                           vectors of `--layers` (`--pooling`), piece
                           vectors with `--tfrecord`; `--job=score`: each
                           piece's left-to-right log-probability
Inputs (`--input`, comma-separated globs): text lines, TSV/CSV columns,
JSONL fields or CoNLL sentences (`--input_format`), each row keyed by
`(file, line)`. `--output_dir` gets `predictions-*-of-*.jsonl` (each row
with its file and line), `dead-letter-*-of-*.jsonl` (each row that could
not be predicted, with its reason) and `manifest.json` (every shard's rows
and sha256, the counts, the padding). See `xlnet_tf/batch_predict/`.

Any path may be in a bucket: `--input` and `--output_dir` on `gs://` or
`s3://`, `--export_dir` on `gs://` (TensorFlow loads it itself and has no
`s3://`). Each bucket is checked before any work.
"""

import json
import os
import re
import sys
from typing import Optional

from absl import flags

from data_utils import beam_jobs, path_checks, paths
from data_utils.errors import UsageError, check_positive, run_app, run_main
from data_utils.text_inputs import (FORMATS, InputSpec, check_spec,
                                    file_format, input_files)
from xlnet_tf.batch_predict.engine import PRECISIONS
from xlnet_tf.batch_predict.job import (BUCKETINGS, BatchJob, check_formats,
                                        resolve_export)
from xlnet_tf.batch_predict.run import check_output_dir, run_job, summary
from xlnet_tf.precision import (bfloat16_crash_problem,
                                 cpu_has_native_bfloat16)
from xlnet_tf.tasks.registry import batch_specs
from xlnet_tf.tasks.spec import load


def define_flags() -> None:
  """The script's flags (defined when run as a script, so that tests can
  import this module and call `job_from_flags` with any flag object)."""
  flags.DEFINE_string("export_dir", None, "An export of this project (a "
                      "fine-tuned model's export root or one version, or a "
                      "language-model export).")
  flags.DEFINE_string("input", None, "Input files: comma-separated globs.")
  flags.DEFINE_enum("input_format", "auto", list(FORMATS), "auto: .tsv, "
                    ".csv, .jsonl, .conll by name, else one text per line.")
  flags.DEFINE_string("text_column", None, "TSV/CSV column (name or 0-based "
                      "index) or JSONL field of the text.")
  flags.DEFINE_string("text_b_column", None, "The second text's column or "
                      "field (classifier pairs).")
  flags.DEFINE_string("output_dir", None, "Where the shards and the manifest "
                      "go.")
  flags.DEFINE_bool("tfrecord", False, "--job=embed: also TFRecord shards "
                    "with per-piece vectors (run_embed.py's .tfrecord layout).")
  for module in _kind_flags():
    for name in load(module).define_flags():
      flags.declare_key_flag(name)
  flags.DEFINE_integer("batch_size", 32, "Rows per model call, at most.")
  flags.DEFINE_enum("bucketing", "global", list(BUCKETINGS),
                    "global: batch rows (and a long text's windows) of "
                    "similar length across the whole input (least padding, "
                    "bounded memory); bundle: sort each Beam bundle; none: "
                    "batches in arrival order.")
  flags.DEFINE_enum("precision", "float32", list(PRECISIONS),
                    "bfloat16: run the model in bfloat16 (fast only on CPUs "
                    "with AVX512_BF16 or AMX; labels may differ on near "
                    "ties).")
  flags.DEFINE_bool("xla", False, "Run the batch shapes a worker meets "
                    "more than twice under XLA (float32; each worker "
                    "freezes the model once and compiles each shape: pays "
                    "on long jobs with long windows).")
  flags.DEFINE_integer("rows_per_shard", 50_000, "Rows per output shard.")
  flags.DEFINE_bool("overwrite", False, "Replace output-named files in "
                    "--output_dir that this job did not write.")
  beam_jobs.define_flags()


BF16_EMULATED = ("run_batch_predict: --precision=bfloat16: this CPU has no "
                 "AVX512_BF16 or AMX; bfloat16 is emulated and slower than "
                 "float32")
_WORKERS = re.compile(r"^--(?:direct_num_workers|num_workers|"
                      r"max_num_workers)=(\d+)$")


def _kind_flags():
  """The modules of the flags only some batch kinds take
  (`TaskSpec.batch_flags`), each once."""
  return tuple(dict.fromkeys(s.batch_flags for s in batch_specs()
                             if s.batch_flags))


def _options(f, export) -> dict:
  """The export's batch kind's options from its flags; another kind's flags
  given are refused (one-line UsageError)."""
  options = {}
  for module in _kind_flags():
    if module == export.spec.batch_flags:
      options = load(module).options(f, export.kind, export.meta)
    else:
      load(module).refuse(f, export.kind)
  if f.text_b_column and not export.spec.batch.pairs:
    pairs = [s.export_kind for s in batch_specs() if s.batch.pairs]
    raise UsageError(f"--text_b_column: only for a {' or '.join(pairs)} "
                     f"export (this is a {export.kind} export)")
  return options


def _expected_rows(files, spec: InputSpec) -> Optional[int]:
  """About how many rows (lines, less headers) for the ETA; None for
  CoNLL (sentences), and for files in a bucket (counting would download
  the whole corpus to the driver)."""
  total = 0
  for path in files:
    kind = file_format(path, spec.input_format)
    if kind == "conll" or paths.is_remote(path):
      return None
    with open(path, "rb") as g:
      total += sum(block.count(b"\n") for block in iter(
          lambda: g.read(1 << 20), b"")) - (kind in ("tsv", "csv"))
  return max(total, 0)


def _check_apart(output_dir: str, export_dir: str) -> None:
  """Outputs never go into the export: its folder is the model's (copied,
  served, checked file by file), and shards there would travel with it."""
  if paths.is_remote(output_dir) or paths.is_remote(export_dir):
    out, export = paths.absolute(output_dir), paths.absolute(export_dir)
    inside = out == export or out.startswith(export + "/")
  else:
    out, export = os.path.realpath(output_dir), os.path.realpath(export_dir)
    inside = os.path.commonpath([out, export]) == export
  if inside:
    raise UsageError(f"--output_dir={output_dir}: inside --export_dir="
                     f"{export_dir}; write the predictions to another folder")


def _check_stores(f) -> None:
  """Every path flag's store first, in flag order, before the export's
  weights are read: a one-line UsageError for an s3:// export (TensorFlow
  reads it), a missing bucket, no credentials or a dead endpoint."""
  path_checks.tf_path(f.export_dir, "export_dir")
  given = [("export_dir", f.export_dir)] + [
      ("input", p.strip()) for p in f.input.split(",") if p.strip()] + [
          ("output_dir", f.output_dir)]
  for flag, value in given:
    path_checks.check_store(value, flag)


def job_from_flags(f):
  """`(job, Beam's arguments)`, every flag checked (one-line UsageError),
  in the order a user reads them, before any work."""
  beam_args = beam_jobs.check_options(f.runner or "DirectRunner",
                                      f.pipeline_options)
  for name in ("export_dir", "input", "output_dir"):
    if not getattr(f, name):
      raise UsageError(f"--{name} is required")
  check_positive(f.batch_size, "batch_size")
  check_positive(f.rows_per_shard, "rows_per_shard")
  _check_stores(f)
  export = resolve_export(f.export_dir)
  _check_apart(f.output_dir, f.export_dir)
  files = input_files(f.input)
  spec = InputSpec(f.input_format, f.text_column, f.text_b_column)
  check_spec(spec, files[0])
  check_formats(export, files, spec)
  options = _options(f, export)
  if f.precision == "bfloat16":
    problem = (bfloat16_crash_problem()
               or export.spec.batch.bfloat16_problem(export.meta))
    if problem:
      raise UsageError(f"--precision=bfloat16: {problem}")
    if f.xla:
      raise UsageError("--xla: XLA runs float32 only; drop it or "
                       "--precision=bfloat16")
  workers = [int(m.group(1)) for m in map(_WORKERS.match, beam_args) if m]
  job = BatchJob(export, f.input, tuple(files), spec, options,
                 paths.absolute(f.output_dir), f.rows_per_shard, f.tfrecord,
                 f.batch_size, f.bucketing, f.overwrite,
                 _expected_rows(files, spec), max(workers, default=1),
                 f.precision, f.xla)
  check_output_dir(job)
  if f.precision == "bfloat16" and cpu_has_native_bfloat16() is False:
    # The job still runs (its answers can be compared with float32's).
    print(BF16_EMULATED, file=sys.stderr, flush=True)
  return job, beam_args


def _run():
  job, beam_args = job_from_flags(flags.FLAGS)
  manifest = run_job(job, beam_args)
  print(json.dumps(summary(manifest, flags.FLAGS.output_dir)))


def main(argv):
  del argv
  return run_main("run_batch_predict", _run)


def main_cli() -> None:
  """The command line: `python run_batch_predict.py`,
  or `xlnet-tf-batch-predict` installed."""
  define_flags()
  run_app("run_batch_predict", main)


if __name__ == "__main__":
  main_cli()
