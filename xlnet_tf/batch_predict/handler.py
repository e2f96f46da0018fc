"""Beam's RunInference over this project's SavedModel exports.

Beam's own TensorFlow handler loads models with `tf.keras.models.load_model`
(Keras 3 in TF 2.20), which cannot read these exports: they are
`tf.saved_model.save` modules called through their signatures. So the
handler here is a `ModelHandler` of its own, with Beam doing the rest: it
loads the export once per worker process (`tf.saved_model.load`, shared by
the process's threads) and batches with `BatchElements`, or, with
bucketing, takes the batches of `SortAndBatchElements` (each bundle sorted
by length, then cut into batches: a batch holds rows of similar length).
The kind pads each batch only to its longest row.

Why not the handler's own length buckets (`batch_length_fn`): they run on
Beam's stateful batching, whose processing-time timer the local
DirectRunner only runs on its legacy single-process runner, without
worker processes.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from data_utils.progress import Progress
from xlnet_tf.batch_predict.engine import load_export
from xlnet_tf.tasks.batch import BatchKind, Prepared

NAMESPACE = "xlnet_tf_batch_predict"


def element_length(element) -> int:
  """A keyed element's length: `(key, (fields, Prepared))`."""
  return element[1][1].length


class ExportModelHandler(ModelHandler):
  """Examples `(fields, Prepared)` -> `PredictionResult(example,
  inference)`, the inference being the kind's output for the row."""

  def __init__(self, export_path: str, kind: BatchKind, batch_size: int,
               expected_rows: Optional[int] = None,
               precision: str = "float32"):
    # Whole batches: Beam's estimator would otherwise start at one row and
    # grow with its timings (many small batches on short jobs).
    super().__init__(min_batch_size=batch_size, max_batch_size=batch_size)
    self.export_path, self.kind = export_path, kind
    self.expected_rows, self.precision = expected_rows, precision
    self._progress = None

  def load_model(self):
    return load_export(self.export_path, self.precision)

  def run_inference(self, batch: Sequence[Any], model,
                    inference_args: Optional[dict] = None
                    ) -> Iterable[PredictionResult]:
    """Each result's inference is `(output, Padding, first)`, `first`
    True for the batch's first row (the job counts batches and padding
    from the rows: Beam's counters can miss rows of a batch its timers
    flushed)."""
    del inference_args
    signature = model.signatures[self.kind.signature]
    prepared: List[Prepared] = [example[1] for example in batch]
    outputs, padding = self.kind.infer(signature,
                                       [p.payload for p in prepared])
    if self._progress is None:
      self._progress = Progress("rows predicted by this worker",
                                total=self.expected_rows, unit="rows")
    self._progress.update(len(batch))
    return [PredictionResult(example, (output, pad, i == 0))
            for i, (example, output, pad) in enumerate(
                zip(batch, outputs, padding))]

  def get_metrics_namespace(self) -> str:
    return NAMESPACE
