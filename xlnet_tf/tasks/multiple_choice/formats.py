"""The multiple-choice head in each format this project reads and writes:
its model kind, its SavedModels' kind, HF's XLNetForMultipleChoice and the
original's variable names (`logits/dense`, RACE's)."""

from __future__ import annotations

from typing import List, Tuple

from xlnet_tf.io.hf_heads import SUMMARY_NAMES, summary_fields, summary_head

KIND = "multiple_choice"
# The export kind its SavedModels record (`export/directory.py`).
EXPORT_KIND = KIND
HF_ARCHITECTURE = "XLNetForMultipleChoice"
ORIGINAL_HEAD = "logits/dense/bias"
HF_NAMES = SUMMARY_NAMES + (
    (r"logits/dense/kernel", "logits_proj.weight", True),
    (r"logits/dense/bias", "logits_proj.bias", False),
)


def hf_head(data: dict, source: str, notes: List[str]) -> Tuple[str, dict]:
  return KIND, summary_head(data, source, notes)


def hf_fields(head: dict) -> dict:
  return summary_fields(head)
