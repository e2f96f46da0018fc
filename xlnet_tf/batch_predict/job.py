"""A batch-prediction job: which export, which inputs, what to write; all
of it checked before any work (one-line `UsageError`s naming the flag).

The export is a directory this project wrote:
  - a fine-tuned model's export root (`<export_dir>/` with `features/`,
    `text/`, ... versions): the newest version of `features` is read (plain
    TensorFlow ops: workers need no tensorflow_text);
  - one version directory (`<export_dir>/features/<step>`, or `text/...`);
  - a language-model export (`run_generate.py --export_dir`), whose
    raw-text signatures hold tensorflow_text's ops: the worker that loads it
    registers them (`handler.py`).
Its marker's `batch` entry says how it was made (its SentencePiece model,
copied into `assets.extra/`, lower-casing, lengths, labels, signature,
what the kind adds: a token classifier's document context); an export
without one (made before batch prediction), or without what its kind needs
(`BatchKind.meta_problem`), is refused, and so is one whose SavedModel does
not load (`integrity.py`). So is an input file the export's kind does not
read (`check_formats`: CoNLL sentences only for a token classifier).

The export may be in a bucket TensorFlow reads itself (`gs://`): it loads
the SavedModel there, and the checks here read through `data_utils.paths`
(the SentencePiece model too). An `s3://` export is refused in one line
(`path_checks.tf_path`: TensorFlow 2.20 has no s3 filesystem).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

from data_utils import path_checks, paths
from data_utils.errors import UsageError
from data_utils.fingerprint import file_sha256
from data_utils.text_inputs import InputSpec, file_format
from xlnet_tf.export.directory import EXPORT_MARKER, read_export_marker
from xlnet_tf.batch_predict.buckets import GROUP_ROWS
from xlnet_tf.batch_predict.integrity import check_saved_model
from xlnet_tf.export.layout import LAYOUT
from xlnet_tf.tasks.batch import BatchKind
from xlnet_tf.tasks.registry import batch_specs
from xlnet_tf.tasks.spec import TaskSpec


@dataclasses.dataclass(frozen=True)
class Export:
  path: str           # the SavedModel directory
  kind: str           # the marker's export kind
  spec: TaskSpec
  meta: dict          # the marker's `batch` entry
  spiece_model: str   # the SentencePiece model inside the export


def _newest_version(root: str, where: str) -> str:
  features = paths.join(root, "features")
  steps = sorted(int(n) for n in paths.listdir(features) if n.isdigit()) \
      if paths.isdir(features) else []
  if not steps:
    raise UsageError(f"{where}: an export root without a features version")
  return paths.join(features, str(steps[-1]))


def _marker(directory: str) -> Optional[dict]:
  """The export marker in `directory`, read as `read_export_marker` reads
  it (a bucket's from a download into local scratch)."""
  if not paths.is_remote(directory):
    return read_export_marker(directory)
  source = paths.join(directory, EXPORT_MARKER)
  with paths.scratch_dir() as scratch:
    try:
      paths.download(source, paths.join(scratch, EXPORT_MARKER))
    except (OSError, ValueError):
      return None
    return read_export_marker(scratch)


def batch_kinds() -> Tuple[str, ...]:
  """The export kinds batch prediction takes (their specs name a batch
  kind)."""
  return tuple(dict.fromkeys(s.export_kind for s in batch_specs()))


def resolve_export(export_dir: str) -> Export:
  """The export at `export_dir` (see the module docstring), or a one-line
  UsageError naming `--export_dir`."""
  where = f"--export_dir={export_dir}"
  # TensorFlow loads the model itself: only a scheme it has (gs://).
  path_checks.tf_path(export_dir, "export_dir")
  path_checks.check_store(export_dir, "export_dir")
  if not paths.isdir(export_dir):
    raise UsageError(f"{where}: " + ("a file, not an export's folder"
                                     if paths.exists(export_dir)
                                     else "no such directory"))
  marker = _marker(export_dir)
  if marker is None:
    raise UsageError(f"{where}: not an xlnet-tf export (no readable "
                     f"{EXPORT_MARKER})")
  path = export_dir
  if marker.get("layout") == LAYOUT:
    path = _newest_version(export_dir, where)
    where = f"--export_dir={export_dir} (version {path})"
    marker = _marker(path)
    if marker is None:
      raise UsageError(f"{where}: no readable {EXPORT_MARKER}")
  kind = str(marker.get("kind"))
  spec = next((s for s in batch_specs() if s.export_kind == kind), None)
  if spec is None:
    raise UsageError(f"{where}: a {kind} export; batch prediction takes "
                     f"{', '.join(batch_kinds())} exports")
  meta = marker.get("batch")
  if not isinstance(meta, dict):
    raise UsageError(f"{where}: made without its SentencePiece model "
                     "(exported before batch prediction, or without "
                     "--spiece_model_file); export it again")
  if not paths.isfile(paths.join(path, "saved_model.pb")):
    raise UsageError(f"{where}: no saved_model.pb")
  spiece = paths.join(path, meta.get("spiece_model", ""))
  if not paths.isfile(spiece) or file_sha256(spiece) != meta.get(
      "spiece_model_sha256"):
    raise UsageError(f"{where}: its SentencePiece model {spiece} is missing "
                     "or not the one it was exported with")
  problem = spec.batch.meta_problem(meta)
  if problem:
    raise UsageError(f"{where}: {problem}")
  check_saved_model(path, marker.get("signatures", []), where)
  return Export(paths.absolute(path), kind, spec, meta,
                paths.absolute(spiece))


def check_formats(export: Export, files: Sequence[str],
                  spec: InputSpec) -> None:
  """UsageError unless the export's kind reads every input file in the
  format it is read in: CoNLL sentences need a token classifier (a text
  classifier would find no text in them)."""
  if export.spec.batch.conll:
    return
  for path in files:
    if file_format(path, spec.input_format) != "conll":
      continue
    what = ("--input_format=conll: CoNLL sentences are"
            if spec.input_format == "conll" else
            f"--input={path}: a .conll file is read as CoNLL sentences, which "
            "are")
    readers = [s.export_kind for s in batch_specs() if s.batch.conll]
    raise UsageError(f"{what} read only by a {' or '.join(readers)} export "
                     f"(this is a {export.kind} export); give "
                     "--input_format=lines, tsv, csv or jsonl")


# How rows are batched (`pipeline.py`): global length buckets, Beam's
# per-bundle sort, or arrival order.
BUCKETINGS = ("global", "bundle", "none")


@dataclasses.dataclass(frozen=True)
class BatchJob:
  """Everything a worker needs, checked: the export, the input files and
  how to read them, the kind's own options, and how to batch and write.
  `expected_rows` (None: unknown) and `workers` only feed the progress
  lines' ETA."""
  export: Export
  patterns: str
  files: Tuple[str, ...]
  inputs: InputSpec
  options: dict
  output_dir: str
  rows_per_shard: int = 50_000
  tfrecord: bool = False
  batch_size: int = 32
  bucketing: str = "global"
  overwrite: bool = False
  expected_rows: Optional[int] = None
  workers: int = 1
  precision: str = "float32"
  # float32 shapes called more than `engine.XLA_AFTER` times run under XLA.
  xla: bool = False
  # Units per global-bucketing group, about (`buckets.GROUP_ROWS`): what a
  # worker holds at once.
  group_rows: int = GROUP_ROWS

  def kind(self) -> BatchKind:
    return self.export.spec.batch_kind(self.export.meta, self.options,
                                       self.export.spiece_model)

  @property
  def input_root(self) -> str:
    """The input files' common folder: rows and the manifest name inputs
    relative to it (`paths.name_in`)."""
    return paths.common_folder(self.files)

  @property
  def source(self) -> str:
    """What the outputs are made from (the output ledger's `source`): a
    re-run of the same export over the same inputs replaces them."""
    patterns = ",".join(paths.absolute(p.strip())
                        for p in self.patterns.split(",") if p.strip())
    return f"{self.export.path}?input={patterns}"

  def positions_per_batch(self) -> int:
    """A batch's bound in positions: `batch_size` rows of one window (a
    text read in several windows counts as several rows)."""
    return self.batch_size * int(self.export.meta["max_seq_length"])
