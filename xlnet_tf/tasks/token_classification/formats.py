"""The token-classification head in each format this project reads and
writes: its model kind, its SavedModels' kind, HF's
XLNetForTokenClassification (one Linear, `classifier`, on every position;
no summary) and the original's variable names
(`model/token_classification_<task>/logit`)."""

from __future__ import annotations

from typing import List, Tuple

from xlnet_tf.io.hf_heads import class_fields, class_head

KIND = "token_classification"
# The export kind its SavedModels record (`export/directory.py`).
EXPORT_KIND = "token_classifier"
HF_ARCHITECTURE = "XLNetForTokenClassification"
ORIGINAL_HEAD = "model/token_classification_{}/logit/bias"
HF_NAMES = (
    (r"model/token_classification_[^/]+/logit/kernel", "classifier.weight",
     True),
    (r"model/token_classification_[^/]+/logit/bias", "classifier.bias",
     False),
)


def hf_head(data: dict, source: str, notes: List[str]) -> Tuple[str, dict]:
  del notes
  return KIND, class_head(data, source)


def hf_fields(head: dict) -> dict:
  return class_fields(head)
