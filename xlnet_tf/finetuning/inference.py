"""Pieces every fine-tuning workflow uses: checkpoints to evaluate, batched
inference to numpy."""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from data_utils.progress import Progress


def training_checkpoints(model_dir: str) -> List[str]:
  """Checkpoint prefixes written by the training loop, oldest first."""
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    return []
  paths = [p for p in state.all_model_checkpoint_paths
           if tf.io.gfile.exists(p + ".index")]
  return sorted(paths, key=lambda p: int(re.search(r"(\d+)$", p).group(1))
                if re.search(r"(\d+)$", p) else 0)


def run_inference(model_fn: Callable[[dict], Dict[str, tf.Tensor]],
                  dataset: tf.data.Dataset, keep: List[str],
                  total_batches: Optional[int] = None,
                  what: str = "inference") -> Dict[str, np.ndarray]:
  """Runs `model_fn` (compiled once) over `dataset`; concatenates the
  `keep` keys of its outputs and of the batches (outputs win on clashes)."""
  step = tf.function(model_fn)
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
