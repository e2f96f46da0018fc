"""State a task carries from one training step to the next, per replica
(XLNet's memory), and how a checkpoint holds it.

Each replica keeps its own copy (an ON_READ variable per tensor of
`TrainTask.state_shapes`). A checkpoint cannot save those as they are (an
ON_READ variable is saved as one replica's copy, or an aggregate), so the
loop gathers every replica's copy into one plain host variable per tensor,
`[replicas, *shape]` in replica order, before each save, and a restored
run hands each replica its row back: a killed run resumes with the memory
its replicas had at the checkpoint, both `bi_data` streams included (they
are halves of the batch).
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import tensorflow as tf

# The checkpoint's name of the gathered state (`CarriedState.saved`).
CHECKPOINT_KEY = "carried_state"


class CarriedState:
  """The carried state of one run: `variables` (per replica, what the step
  reads and writes) and `saved` (every replica's, what the checkpoint
  holds)."""

  def __init__(self, strategy: tf.distribute.Strategy,
               shapes: Sequence[Tuple[int, ...]]):
    self.strategy = strategy
    with strategy.scope():
      self.variables: List[tf.Variable] = [
          tf.Variable(tf.zeros(s), trainable=False,
                      synchronization=tf.VariableSynchronization.ON_READ,
                      aggregation=tf.VariableAggregation.NONE,
                      name=f"carried_state_{i}")
          for i, s in enumerate(shapes)]
    # Outside the scope: plain host variables, saved as they are.
    replicas = strategy.num_replicas_in_sync
    self.saved: List[tf.Variable] = [
        tf.Variable(tf.zeros([replicas, *s]), trainable=False,
                    name=f"saved_state_{i}") for i, s in enumerate(shapes)]
    # Graphs, as a TPU strategy runs replicas only inside one; this run's
    # own (one tf.function shared by every run would retrace for each).
    self.gather = tf.function(self._gather)
    self.scatter = tf.function(self._scatter)

  def attach(self, checkpoint: tf.train.Checkpoint) -> None:
    """Makes `checkpoint` save and restore the gathered state."""
    if self.saved:
      setattr(checkpoint, CHECKPOINT_KEY, self.saved)

  def missing_from(self, checkpoint: str) -> str:
    """Why checkpoint prefix `checkpoint` cannot give this run its state
    ("" when it can, or when the run carries none)."""
    if not self.saved:
      return ""
    shapes = dict(tf.train.list_variables(checkpoint))
    for i, var in enumerate(self.saved):
      key = f"{CHECKPOINT_KEY}/{i}/.ATTRIBUTES/VARIABLE_VALUE"
      if key not in shapes:
        return ("holds no memory (it was written before checkpoints held "
                "it)")
      if list(shapes[key]) != var.shape.as_list():
        return (f"holds the memory of another layout ({shapes[key]}, this "
                f"run {var.shape.as_list()}: replicas, batch per replica, "
                "length, width)")
    return ""

  def _gather(self) -> None:
    """Copies every replica's state into `saved` (before a save)."""
    for saved, var in zip(self.saved, self.variables):
      per_replica = self.strategy.run(
          lambda v=var: tf.expand_dims(v.read_value(), 0))
      saved.assign(self.strategy.gather(per_replica, axis=0))

  def _scatter(self) -> None:
    """Gives each replica its row of `saved` (after a restore)."""
    def place():
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      for var, saved in zip(self.variables, self.saved):
        var.assign(tf.gather(saved, replica))
    self.strategy.run(place)
