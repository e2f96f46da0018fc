"""The language-model head in each format this project reads and writes:
its model kind, its SavedModels' kind, HF's XLNetLMHeadModel and the
original's variable names (`model/lm_loss`; its weight [V, D] is
multiplied as an embedding table, like the torch Linear weight: no
transpose, and only an untied head has one)."""

from __future__ import annotations

from typing import List, Tuple

KIND = "lm"
# The export kind its SavedModel records (`export/directory.py`).
EXPORT_KIND = "language_model"
HF_ARCHITECTURE = "XLNetLMHeadModel"
LM_WEIGHT = "model/lm_loss/weight"
LM_BIAS = "model/lm_loss/bias"
ORIGINAL_HEAD = LM_BIAS
HF_NAMES = (
    (LM_WEIGHT, "lm_loss.weight", False),
    (LM_BIAS, "lm_loss.bias", False),
)


def hf_head(data: dict, source: str, notes: List[str]) -> Tuple[str, dict]:
  del source, notes
  return KIND, {"tie_weight": bool(data.get("tie_word_embeddings", True))}


def hf_fields(head: dict) -> dict:
  return {"tie_word_embeddings": head.get("tie_weight", True)}
