"""`TrainTask`: all the loop knows of a task (its model, loss, carried state
and the layer structure of its variables)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import tensorflow as tf
import tf_keras as keras


class TrainTask:
  """What a task gives the loop. Subclasses override `build_model` and
  `compute_loss`; the other methods have neutral defaults (no carried
  state, no token count, no layers, no loss scaling)."""

  def build_model(self) -> keras.Model:
    raise NotImplementedError

  def state_shapes(self, per_replica_batch: int) -> List[Tuple[int, ...]]:
    """Shapes of the float tensors carried from one step to the next (per
    replica); [] for none."""
    return []

  def compute_loss(self, model, features, state, training: bool
                   ) -> Tuple[tf.Tensor, list]:
    """`(scalar loss of this replica's batch, new state)`."""
    raise NotImplementedError

  def tokens_per_example(self) -> int:
    return 0

  # 'fine-tuning' or 'pretraining' (the two-stream step): the share of a
  # step XLA saves differs (`fastest.XLA_SAVES`).
  step_kind = "fine-tuning"

  def step_flops(self, per_replica_batch: int) -> float:
    """Training FLOPs of one micro-batch of `per_replica_batch` examples
    (0: unknown, and the training default keeps the graph)."""
    return 0.0

  def num_layers(self) -> int:
    """How many stacked layers the model has (0: not layered)."""
    return 0

  def layer_of(self, variable: tf.Variable) -> Optional[int]:
    """The layer `variable` belongs to (0 .. num_layers() - 1), -1 for the
    embeddings below layer 0, None for anything else (e.g. heads). Drives
    `freeze_layers` and the layer-wise learning rates."""
    return None

  def loss_scaling(self) -> bool:
    """True for a float16 model: its gradients need dynamic loss scaling."""
    return False
