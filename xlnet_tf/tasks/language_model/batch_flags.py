"""The flags only a language-model export's batch job takes
(`run_batch_predict.py` defines them through `TaskSpec.batch_flags`):
`--job` (embed or score), and for embed `--layers` and `--pooling`; the
job's `--tfrecord` shards are the embed job's piece vectors."""

from __future__ import annotations

from typing import Tuple

from absl import flags

from data_utils.errors import UsageError
from xlnet_tf.tasks.language_model.choices import (SIGNATURE_POOLINGS,
                                                   flag_choices)

JOBS = ("embed", "score")


def define_flags() -> Tuple[str, ...]:
  """Defines the flags; returns their names."""
  flags.DEFINE_enum("job", None, list(JOBS), "With a language-model export: "
                    "embed or score.")
  flags.DEFINE_list("layers", ["-1"], "--job=embed: layers (0 the "
                    "embeddings, -1 the last).")
  flags.DEFINE_list("pooling", ["masked_mean"], "--job=embed: any of "
                    f"{', '.join(SIGNATURE_POOLINGS)}.")
  return ("job", "layers", "pooling")


def options(f, kind: str, meta: dict) -> dict:
  """The batch kind's options from the flags `f` (one-line UsageError), for
  an export of `kind` whose marker's `batch` entry is `meta`."""
  if f.job is None:
    raise UsageError(f"--job: a {kind} export needs --job="
                     f"{' or --job='.join(JOBS)}")
  if f.job == "score":
    chosen = {"job": "score"}
  else:
    layers, poolings = flag_choices(f.layers, f.pooling, int(meta["n_layer"]),
                                    SIGNATURE_POOLINGS)
    # Per-piece vectors ([n, K, D] a row) go only to the TFRecord shards:
    # without them, the batch outputs do not carry them through the job.
    chosen = {"job": "embed", "layers": list(layers),
              "poolings": list(poolings), "piece_vectors": bool(f.tfrecord)}
  if f.tfrecord and f.job != "embed":
    raise UsageError("--tfrecord: only with --job=embed")
  return chosen


def refuse(f, kind: str) -> None:
  """A one-line UsageError for these flags given with another kind's export
  (`kind`)."""
  if f.job is not None:
    raise UsageError(f"--job={f.job}: only for a language-model export "
                     f"(this is a {kind} export)")
  if f.tfrecord:
    raise UsageError("--tfrecord: only with --job=embed")
