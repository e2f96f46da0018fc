"""How to train: `TrainOptions` (the original's training flags) and their
validation; the strategies the loop knows by name."""

from __future__ import annotations

import dataclasses
from typing import Optional

from data_utils.errors import UsageError, check_positive
from data_utils.path_checks import tf_path

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")



@dataclasses.dataclass(frozen=True)
class TrainOptions:
  """How to train (the original's training flags)."""
  model_dir: str
  train_steps: int
  learning_rate: float = 1e-4
  warmup_steps: int = 0
  min_lr_ratio: float = 0.001
  weight_decay: float = 0.0
  adam_epsilon: float = 1e-8
  clip: float = 1.0
  iterations: int = 100          # steps per host loop and per log line
  save_steps: Optional[int] = None
  max_save: int = 5
  strategy: str = "default"
  tpu: Optional[str] = None
  init_checkpoint: Optional[str] = None
  decay_method: str = "poly"     # 'poly' (linear) or 'cos'
  lr_layer_decay_rate: float = 1.0
  grad_accum_steps: int = 1      # micro-batches per optimizer step
  # XLA for the forward/backward pass; None: the faster here (`fastest`).
  jit_compile: Optional[bool] = None
  freeze_layers: int = 0         # keep embeddings + the lowest n layers fixed
  seed: int = 0                  # weight init, dropout (see Trainer)

  def validate(self) -> None:
    """One-line `UsageError` naming the flag of a value that cannot work."""
    # TF writes model_dir and reads init_checkpoint itself: a scheme it has
    # no filesystem for (s3://) is refused here, before any work.
    for flag in ("model_dir", "init_checkpoint"):
      if getattr(self, flag):
        tf_path(getattr(self, flag), flag)
    check_positive(self.train_steps, "train_steps")
    check_positive(self.iterations, "iterations")
    if self.save_steps is not None:
      check_positive(self.save_steps, "save_steps")
    check_positive(self.max_save, "max_save")
    if not 0 <= self.warmup_steps <= self.train_steps:
      raise UsageError(f"--warmup_steps={self.warmup_steps}: must be in "
                       f"[0, --train_steps={self.train_steps}]")
    check_positive(self.grad_accum_steps, "grad_accum_steps")
    check_positive(self.freeze_layers, "freeze_layers", 0)
    if not 0 <= self.seed < 2 ** 32:  # what numpy's seeding accepts
      raise UsageError(f"--seed={self.seed}: must be in [0, {2 ** 32 - 1}]")
    if self.decay_method not in ("poly", "cos"):
      raise UsageError(f"--decay_method={self.decay_method}: must be 'poly' "
                       "or 'cos'")
    if not 0 < self.lr_layer_decay_rate <= 1:
      raise UsageError(f"--lr_layer_decay_rate={self.lr_layer_decay_rate}: "
                       "must be in (0, 1]")
    if self.strategy not in STRATEGIES:
      raise UsageError(f"--strategy={self.strategy}: must be one of "
                       f"{', '.join(STRATEGIES)}")
