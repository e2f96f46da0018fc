"""Text classification / regression on the shared fine-tuning workflow."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import numpy as np

from data_utils import classifier_data as cd
from xlnet_tf import metrics
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.workflows.finetune import FinetuneOptions, FinetuneWorkflow

# File names the GLUE server expects.
GLUE_SUBMISSION = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC",
                   "sts-b": "STS-B", "qqp": "QQP", "mnli": "MNLI-m",
                   "mnli-mm": "MNLI-mm", "qnli": "QNLI", "rte": "RTE",
                   "wnli": "WNLI"}


@dataclasses.dataclass(frozen=True)
class ClassifierOptions(FinetuneOptions):
  is_regression: bool = False
  cls_scope: Optional[str] = None
  predict_threshold: float = 0.0
  generic: Optional[cd.GenericSpec] = None


class ClassifierWorkflow(FinetuneWorkflow):

  def __init__(self, opts: ClassifierOptions):
    super().__init__(opts)
    self.labels = cd.labels_of(self.task_name, opts.generic)
    self.regression = opts.is_regression or self.labels is None
    if not self.regression and not self.labels:
      raise cd.TaskDataError(f"task {self.task_name}: no label list (pass "
                             "--label_list or --is_regression)")
    self.output_keys = ("score",) if self.regression else (
        "logits", "probabilities")
    self.task = ClassifierTask(
        opts.config, opts.run, 1 if self.regression else len(self.labels),
        opts.cls_scope or self.task_name, self.regression, opts.summary_type,
        opts.use_summ_proj, opts.max_seq_length)

  def read(self, split):
    return cd.read_examples(self.task_name, self.opts.data_dir, split,
                            self.opts.generic)

  def featurize(self, example):
    return cd.example_features(example, self.tokenizer.encode_ids,
                               self.opts.max_seq_length,
                               None if self.regression else self.labels)

  def feature_settings(self):
    return {"labels": None if self.regression else list(self.labels),
            "generic": dataclasses.asdict(self.opts.generic)
            if self.opts.generic else None}

  def score(self, out: Dict[str, np.ndarray], examples) -> dict:
    if self.regression:
      return metrics.regression_metrics(out["label"], out["score"])
    result = metrics.classification_metrics(self.task_name, out["label"],
                                            out["logits"].argmax(-1))
    result["majority_baseline"] = metrics.majority_baseline(out["label"])
    return result

  def prediction_rows(self, out, examples) -> List[str]:
    rows = ["index\tprediction"]
    for k, example in enumerate(examples):
      if self.regression:
        value = f"{float(out['score'][k]):.3f}"
      else:
        probs = out["probabilities"][k]
        if self.opts.predict_threshold and len(self.labels) == 2:
          cls = int(probs[1] > self.opts.predict_threshold)
        else:
          cls = int(probs.argmax())
        value = self.labels[cls]
      rows.append(f"{example.guid}\t{value}")
    return rows

  def prediction_file(self) -> str:
    return f"{GLUE_SUBMISSION.get(self.task_name, self.task_name)}.tsv"

  def export_model(self, model, export_dir):
    from xlnet_tf.export import export_classifier
    return export_classifier(
        model, export_dir, self.opts.max_seq_length, self.regression,
        labels=None if self.regression else self.labels,
        sp_model_path=self.opts.spiece_model_file, lower=self.opts.uncased)


def run(opts: ClassifierOptions) -> dict:
  return ClassifierWorkflow(opts).run()
