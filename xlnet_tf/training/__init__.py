"""The training loop, which knows no task, model or checkpoint format:

  options   TrainOptions (the training flags) and their validation
  task      TrainTask: the hooks a task implements for the loop
  strategy  split_cpu, make_strategy
  files     checkpoint numbering and listing, interrupted-save temps, run side files,
            evaluation scalars for TensorBoard
  fastest   the speed settings chosen per machine (XLA or the graph)
  loop      Trainer (and dense_gradients)
"""

from xlnet_tf.training.files import (checkpoint_number,
                                     remove_checkpoint_temps,
                                     training_checkpoints,
                                     write_eval_scalars, write_run_files)
from xlnet_tf.training.loop import Trainer, dense_gradients
from xlnet_tf.training.options import STRATEGIES, TrainOptions
from xlnet_tf.training.strategy import make_strategy, num_workers, split_cpu
from xlnet_tf.training.task import TrainTask

__all__ = [
    "STRATEGIES", "TrainOptions", "TrainTask", "Trainer", "checkpoint_number",
    "dense_gradients", "make_strategy", "num_workers",
    "remove_checkpoint_temps",
    "split_cpu", "training_checkpoints", "write_eval_scalars",
    "write_run_files",
]
