"""What a load reports: `LoadReport` (names in the original layout)."""

from __future__ import annotations

import dataclasses
from typing import List


@dataclasses.dataclass
class LoadReport:
  """What a load did: names in the original layout."""
  path: str
  loaded: List[str]
  unused: List[str]      # in the checkpoint, not used by the model
  missing: List[str]     # wanted by the model, not in the checkpoint
  ignored: List[str]     # optimizer slots and counters

  def summary(self) -> str:
    text = (f"{self.path}: loaded {len(self.loaded)} variables; "
            f"{len(self.missing)} missing in checkpoint; "
            f"{len(self.unused)} unused in checkpoint; "
            f"{len(self.ignored)} optimizer/bookkeeping skipped")
    if self.missing:
      text += " (missing: " + ", ".join(self.missing[:5]) + (
          ", ..." if len(self.missing) > 5 else "") + ")"
    return text
