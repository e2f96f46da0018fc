"""The span-extraction head in each format this project reads and writes:
its model kind, its SavedModels' kind, HF's XLNetForQuestionAnswering and
the original's variable names (`start_logits`, `end_logits`,
`answer_class`: the same names in HF, kernel -> weight transposed,
gamma/beta -> weight/bias)."""

from __future__ import annotations

from typing import List, Tuple

KIND = "squad"
# The export kind its SavedModels record (`export/directory.py`).
EXPORT_KIND = KIND
HF_ARCHITECTURE = "XLNetForQuestionAnswering"
ORIGINAL_HEAD = "start_logits/dense/bias"
HF_NAMES = (
    (r"(start_logits|end_logits|answer_class)/(dense(?:_\d)?)/kernel",
     r"\1.\2.weight", True),
    (r"(start_logits|end_logits|answer_class)/(dense(?:_\d)?)/bias",
     r"\1.\2.bias", False),
    (r"end_logits/LayerNorm/gamma", "end_logits.LayerNorm.weight", False),
    (r"end_logits/LayerNorm/beta", "end_logits.LayerNorm.bias", False),
)


def hf_head(data: dict, source: str, notes: List[str]) -> Tuple[str, dict]:
  del source, notes
  return KIND, {"start_n_top": data.get("start_n_top", 5),
                "end_n_top": data.get("end_n_top", 5)}


def hf_fields(head: dict) -> dict:
  return {"start_n_top": head.get("start_n_top", 5),
          "end_n_top": head.get("end_n_top", 5)}
