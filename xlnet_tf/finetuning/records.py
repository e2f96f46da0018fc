"""The data hooks of the tasks whose features are the classifier's records
(`data_utils/classification/records.py`): classification, regression and
RACE. A subclass reads and featurizes examples, scores outputs and writes
prediction rows."""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
from absl import logging

from data_utils.classification.records import (build_features,
                                               classifier_dataset)
from data_utils.errors import UserError
from xlnet_tf.finetuning.inference import run_inference
from xlnet_tf.finetuning.driver import FinetuneWorkflow


class RecordsWorkflow(FinetuneWorkflow):
  """Subclasses set `task`, `regression`, `output_keys` (and
  `record_length` if not max_seq_length) and implement `read`, `featurize`,
  `feature_settings`, `score`, `prediction_rows`, `prediction_file`,
  `export_model`."""

  regression: bool = False
  output_keys: Sequence[str] = ("logits", "probabilities")
  # Per-example counts featurize returns; the features info sums them into
  # its `stats` (see `build_features`).
  stat_keys: Sequence[str] = ()

  # Hooks ----------------------------------------------------------------
  @property
  def record_length(self) -> int:
    return self.opts.max_seq_length

  def read(self, split: str) -> list:
    raise NotImplementedError

  def featurize(self, example) -> dict:
    raise NotImplementedError

  def feature_settings(self) -> dict:
    """Task settings that shape features (beyond length/casing/model)."""
    return {}

  def score(self, out: Dict[str, np.ndarray], examples: list) -> dict:
    """Metrics; must include "main" (higher is better)."""
    raise NotImplementedError

  def prediction_rows(self, out: Dict[str, np.ndarray],
                      examples: list) -> List[str]:
    raise NotImplementedError

  def prediction_file(self) -> str:
    return f"{self.task_name}.tsv"

  def prediction_names(self) -> List[str]:
    return [self.prediction_file()]

  # The driver's hooks ---------------------------------------------------
  def features(self, split: str, pad_to: int = 1, passes: int = 1,
               training: bool = False) -> dict:
    del training  # the records are shuffled when repeated (`passes` > 1)
    examples = self.read(split)
    if not examples:
      raise UserError(f"{self.opts.data_dir}: the {split} split of "
                      f"{self.task_name} has no example")
    # The cache is keyed by content: the parsed examples and the
    # SentencePiece model's bytes (not their paths or times), plus settings.
    settings = dict(self.feature_settings(), task=self.task_name, split=split,
                    uncased=self.opts.uncased,
                    max_seq_length=self.opts.max_seq_length)
    info = build_features(examples, self.featurize, self.record_length,
                          self.regression, self.opts.output_dir, settings,
                          pad_to_multiple=pad_to, num_passes=passes,
                          overwrite=self.opts.overwrite_data,
                          seed=self.opts.seed,
                          input_files={"spiece": self.opts.spiece_model_file},
                          stat_keys=self.stat_keys)
    info["examples"] = examples
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return classifier_dataset(
        info["path"], self.record_length, batch_size,
        regression=self.regression, is_training=training,
        shuffle_buffer=self.opts.shuffle_buffer, seed=self.opts.seed,
        skip_batches=skip, input_context=ctx)

  def outputs(self, checkpoint: str, info: dict, batch_size: int
              ) -> Dict[str, np.ndarray]:
    """Model outputs and labels of the real (non-padding) records."""
    model = self.load_model(checkpoint)
    total = -(-info["num_records"] // batch_size)
    out = run_inference(lambda b: model(b, training=False),
                        self.dataset(info, batch_size),
                        list(self.output_keys) + ["label", "is_real_example"],
                        total, what=f"{self.task_name} inference")
    real = out.pop("is_real_example") > 0
    return {k: v[real] for k, v in out.items()}

  def evaluate_checkpoint(self, checkpoint: str, info: dict) -> dict:
    return self.score(self.outputs(checkpoint, info,
                                   self.opts.eval_batch_size),
                      info["examples"])

  def write_predictions(self, checkpoint: str, info: dict) -> str:
    rows = self.prediction_rows(
        self.outputs(checkpoint, info, self.opts.predict_batch_size),
        info["examples"])
    path = self.write_prediction(self.prediction_file(),
                                 "\n".join(rows) + "\n")
    logging.info("wrote %d predictions to %s", len(rows) - 1, path)
    return path
