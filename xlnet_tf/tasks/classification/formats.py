"""The classification and regression heads in each format this project
reads and writes: their model kinds, their SavedModels' kinds, HF's
XLNetForSequenceClassification (one architecture for both: `problem_type`
or one label tells a regressor) and the original's variable names
(`model/<kind>_<task>/logit`)."""

from __future__ import annotations

from typing import List, Tuple

from xlnet_tf.io.hf_heads import (SUMMARY_NAMES, class_fields, class_head,
                                  summary_fields, summary_head)

CLASSIFICATION, REGRESSION = "classification", "regression"
# The export kinds their SavedModels record (`export/directory.py`).
CLASSIFIER_EXPORT_KIND, REGRESSOR_EXPORT_KIND = "classifier", "regressor"
HF_ARCHITECTURE = "XLNetForSequenceClassification"
# The variable that says an original checkpoint holds the head; {} is the
# task's name.
ORIGINAL_HEADS = {CLASSIFICATION: "model/classification_{}/logit/bias",
                  REGRESSION: "model/regression_{}/logit/bias"}
HF_NAMES = SUMMARY_NAMES + (
    (r"model/(?:classification|regression)_[^/]+/logit/kernel",
     "logits_proj.weight", True),
    (r"model/(?:classification|regression)_[^/]+/logit/bias",
     "logits_proj.bias", False),
)


def hf_head(data: dict, source: str, notes: List[str]) -> Tuple[str, dict]:
  """(kind, head arguments) of an XLNetForSequenceClassification config:
  a regressor when `problem_type` says so, or one label and none."""
  head = summary_head(data, source, notes)
  classes = class_head(data, source)
  regression = (data.get("problem_type") == "regression" or
                (classes["n_class"] == 1 and data.get("problem_type") is None))
  if regression:
    del classes["n_class"]
    classes.pop("labels", None)
  head.update(classes)
  return (REGRESSION if regression else CLASSIFICATION), head


def hf_fields(head: dict) -> dict:
  """The config.json entries of a classifier's or regressor's head
  (`n_class` None: a regressor)."""
  fields = summary_fields(head)
  fields.update(class_fields(head))
  # HF treats one label with no problem_type as regression.
  fields["problem_type"] = (
      "regression" if head.get("n_class") is None else
      "single_label_classification" if fields["num_labels"] > 1 else None)
  return fields
