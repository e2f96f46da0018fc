"""Batched inference to numpy, what every fine-tuning workflow runs its
model with."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from data_utils.progress import Progress


def run_inference(model_fn: Callable[[dict], Dict[str, tf.Tensor]],
                  dataset: tf.data.Dataset, keep: List[str],
                  total_batches: Optional[int] = None,
                  what: str = "inference") -> Dict[str, np.ndarray]:
  """Runs `model_fn` (compiled once) over `dataset`; concatenates the
  `keep` keys of its outputs and of the batches (outputs win on clashes)."""
  step = tf.function(model_fn, autograph=False)  # see building.unconverted
  collected: Dict[str, list] = {k: [] for k in keep}
  progress = Progress(what, total=total_batches, unit="batches")
  for batch in dataset:
    out = step(batch)
    for k in keep:
      value = out[k] if k in out else batch[k]
      collected[k].append(value.numpy())
    progress.update()
  progress.finish()
  return {k: np.concatenate(v) if v else np.zeros([0]) for k, v in
          collected.items()}
