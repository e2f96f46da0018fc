"""Beam's RunInference over this project's SavedModel exports.

Beam's own TensorFlow handler loads models with `tf.keras.models.load_model`
(Keras 3 in TF 2.20), which cannot read these exports: they are
`tf.saved_model.save` modules called through their signatures. So the
handler here is a `ModelHandler` of its own, with Beam doing the rest: it
loads the export once per worker process (`engine.load_export`, shared by
the process's threads) and runs batches of units (a row, or one window of
a long text) that the pipeline made (`pipeline.py`: global length buckets,
or each bundle sorted), or that it batches itself with `BatchElements`
(`--bucketing=none`). The kind pads each batch only to its longest unit.

Why not the handler's own length buckets (`batch_length_fn`): they run on
Beam's stateful batching, whose processing-time timer the local
DirectRunner only runs on its legacy single-process runner, without
worker processes; and they bucket per worker, not across the input.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from data_utils.progress import Progress
from xlnet_tf.batch_predict.engine import XLA_AFTER, load_export
from xlnet_tf.tasks.batch import BatchKind, Prepared

NAMESPACE = "xlnet_tf_batch_predict"


def element_length(element) -> int:
  """A keyed unit's length: `(key, (fields, Prepared))`."""
  return element[1][1].length


class ExportModelHandler(ModelHandler):
  """Examples `(fields, Prepared unit)` -> `PredictionResult(example,
  inference)`, the inference being the kind's output for the unit."""

  def __init__(self, export_path: str, kind: BatchKind, batch_size: int,
               expected_rows: Optional[int] = None,
               precision: str = "float32", xla: bool = False):
    # Whole batches: Beam's estimator would otherwise start at one row and
    # grow with its timings (many small batches on short jobs).
    super().__init__(min_batch_size=batch_size, max_batch_size=batch_size)
    self.export_path, self.kind = export_path, kind
    self.expected_rows, self.precision = expected_rows, precision
    self.xla = xla
    self._progress = None

  def load_model(self):
    return load_export(self.export_path, self.precision,
                       XLA_AFTER if self.xla else None)

  def run_inference(self, batch: Sequence[Any], model,
                    inference_args: Optional[dict] = None
                    ) -> Iterable[PredictionResult]:
    """Each result's inference is `(output, Padding, rows)`, `rows` the
    batch's size for its first unit and 0 for the others (the job counts
    batches and padding from the units: Beam's counters can miss those of
    a batch its timers flushed)."""
    del inference_args
    signature = model.signatures[self.kind.signature]
    prepared: List[Prepared] = [example[1] for example in batch]
    outputs, padding = self.kind.infer(signature,
                                       [p.payload for p in prepared])
    if self._progress is None:
      self._progress = Progress("rows predicted by this worker",
                                total=self.expected_rows, unit="rows")
    # A row counts with its first unit (the one carrying its fields), so
    # the rate and ETA are in rows, as the total is.
    self._progress.update(sum(1 for example in batch
                              if example[0] is not None))
    return [PredictionResult(example, (output, pad,
                                       len(batch) if i == 0 else 0))
            for i, (example, output, pad) in enumerate(
                zip(batch, outputs, padding))]

  def get_metrics_namespace(self) -> str:
    return NAMESPACE
