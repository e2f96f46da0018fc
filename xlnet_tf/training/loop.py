"""The one training loop every entry script uses.

It owns: the distribution strategy, the optimizer (`optimizer.py`;
global-norm clipping after the cross-replica all-reduce), state carried from
step to step per replica (XLNet's memory), TensorBoard summaries (loss,
learning rate, gradient norm, tokens/s), checkpoints every `save_steps` and
exact resumption of step, optimizer state, carried state, input position
and dropout masks (seeded by the step, `xlnet_tf.seeds`), dynamic loss
scaling for float16 models, and multi-worker runs where only the chief
writes. It seeds the weights and dropout from `TrainOptions.seed`, stops at
a step whose loss is not finite (saving nothing of it), and turns a full
disk while saving into one line (the last complete checkpoint stays usable;
what an interrupted save left is removed on the next run).

A task supplies the model, its loss, its carried state and its layers
(`TrainTask`); loading `init_checkpoint` is handed in (`init_fn`); the input
comes from a function of the `tf.distribute.InputContext` and the number of
per-replica batches to skip (the resume position). The loop imports nothing
of a task, a model or a checkpoint format.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Dict, List, Optional

import tensorflow as tf
import tf_keras as keras
from absl import logging

from data_utils import paths
from data_utils.errors import UserError, is_disk_full
from data_utils.progress import format_seconds
from xlnet_tf.building import build_once
from xlnet_tf.checkpoint_files import find_damage
from xlnet_tf.precision import cpu_has_native_bfloat16
from xlnet_tf.seeds import dropout_seeds, step_seed, sub_seed
from xlnet_tf.training.carried_state import CarriedState
from xlnet_tf.training.optimizer import (layer_lr_factor, make_optimizer,
                                         variable_key)
from xlnet_tf.training.fastest import RunSize, resolve_jit_compile
from xlnet_tf.training.files import (checkpoint_number,
                                     remove_checkpoint_temps)
from xlnet_tf.training.options import TrainOptions
from xlnet_tf.training.strategy import make_strategy
from xlnet_tf.training.task import TrainTask

# `init_fn(model, path)`: loads the checkpoint at `path` into `model`.
InitFn = Callable[[keras.Model, str], object]


def dense_gradients(grads, variables) -> List[tf.Tensor]:
  """Every gradient as a dense tensor, zeros where a variable got none.

  The word embedding's gradient arrives as `tf.IndexedSlices` (rows of a
  gather). Summed over micro-batches and replicas it must be dense anyway,
  and applied dense it takes Adam's fused kernel: Keras' sparse Adam path
  decays both slots with separate full-size ops and copies the table on
  every read once it has been scatter-updated, several times slower.

  Example:
    >>> v = tf.Variable(tf.zeros([3, 2]))
    >>> rows = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([1]), [3, 2])
    >>> [g.numpy().tolist() for g in dense_gradients([rows, None], [v, v])]
    [[[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]]
  """
  return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
          for g, v in zip(grads, variables)]


class Trainer:
  """Builds the model under the strategy, restores or initialises, trains.

  `opts.seed` seeds Python, NumPy and TensorFlow before the model is built
  (the weight initialisers follow from it), and the dropout: every mask of
  a step is drawn statelessly from `seeds.step_seed(opts.seed, step,
  replica)` (folded with the micro-batch, then the draw), a pure function
  of the checkpointed step. So one command run twice (float32, one device)
  gives the same losses, and so does a run killed and resumed from a
  checkpoint. The input order has its own seed (the task's dataset
  function), and resumes by skipping the batches already consumed.

  A step whose loss is not finite stops training with a `UserError` naming
  the step; that state is never saved (the last checkpoint stays the newest).

  `init_fn(model, path)` loads `opts.init_checkpoint` when model_dir holds
  no checkpoint to resume from (e.g. `xlnet_tf.io.load_checkpoint`).
  """

  def __init__(self, task: TrainTask, opts: TrainOptions,
               strategy: Optional[tf.distribute.Strategy] = None,
               init_fn: Optional[InitFn] = None):
    opts.validate()
    if opts.init_checkpoint and init_fn is None:
      raise ValueError("TrainOptions.init_checkpoint needs an init_fn to load "
                       "it (e.g. xlnet_tf.io.load_checkpoint)")
    self.task = task
    self.opts = opts
    self.init_fn = init_fn
    self.strategy = strategy or make_strategy(opts.strategy, opts.tpu)
    self.replicas = self.strategy.num_replicas_in_sync
    # Before any variable or layer exists: initialisers draw from the global
    # seed, and each Keras layer takes its own seed from it when created.
    keras.utils.set_random_seed(opts.seed)
    with self.strategy.scope():
      # Built here: variables created outside the scope are not mirrored.
      self.model = task.build_model()
      build_once(self.model)
      self.optimizer = make_optimizer(opts, self._layer_factors())
      # float16 gradients underflow without it; dynamic loss scaling also
      # skips a step whose gradients overflow and lowers the scale.
      self.loss_scaled = task.loss_scaling()
      if self.loss_scaled:
        self.optimizer = keras.mixed_precision.LossScaleOptimizer(
            self.optimizer)
      self.checkpoint = tf.train.Checkpoint(model=self.model,
                                            optimizer=self.optimizer)
      self.loss_metric = keras.metrics.Mean("loss")
      self.grad_norm_metric = keras.metrics.Mean("grad_norm")
    if (any(getattr(layer, "compute_dtype", None) == "bfloat16"
            for layer in self.model.submodules)
        and opts.strategy != "tpu"
        and not tf.config.list_physical_devices("GPU")
        and cpu_has_native_bfloat16() is False):
      logging.warning(
          "use_bfloat16 on a CPU without AVX512_BF16/AMX: bfloat16 matmuls "
          "are emulated here and slower than float32")
    # Multi-worker: every worker takes part in saving (variables may need
    # collectives to read), but only the chief writes to model_dir; the
    # others write to a scratch directory that is removed after each save.
    self.is_chief = getattr(self.strategy.extended, "should_checkpoint", True)
    save_dir = opts.model_dir if self.is_chief else paths.join(
        opts.model_dir, f".worker_{self.strategy.cluster_resolver.task_id}")
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, save_dir, max_to_keep=opts.max_save,
        step_counter=self.optimizer.iterations)
    self.carried = CarriedState(self.strategy, [])
    self.dropout_draws: Optional[tf.Variable] = None

  @property
  def step(self) -> int:
    return int(self.optimizer.iterations.numpy())

  def _layer_factors(self) -> Dict[str, float]:
    """Learning-rate factors of the variables of layers below the top one
    (`lr_layer_decay_rate`, by `variable_key`)."""
    n, rate = self.task.num_layers(), self.opts.lr_layer_decay_rate
    factors = {variable_key(v.name): layer_lr_factor(self.task.layer_of(v),
                                                     n, rate)
               for v in self.model.trainable_variables}
    return {k: f for k, f in factors.items() if f != 1.0}

  def restore_or_initialize(self) -> int:
    """Resumes from the newest checkpoint in model_dir (its carried state
    too, once `_make_state` has run), else loads `init_checkpoint` through
    `init_fn`. Returns the step to start from."""
    latest = tf.train.latest_checkpoint(self.opts.model_dir)
    if latest:
      checkpoint = self.checkpoint
      try:
        without = self.carried.missing_from(latest)
        if without:
          logging.info("%s %s: the memory starts empty", latest, without)
          checkpoint = tf.train.Checkpoint(model=self.model,
                                           optimizer=self.optimizer)
        status = checkpoint.restore(latest)
      except (tf.errors.OpError, IndexError):
        find_damage(latest)  # a damaged file: one line naming it and the tensor
        raise
      status.assert_existing_objects_matched()
      if self.carried.saved and not without:
        self.carried.scatter()
      logging.info("resumed from %s at step %d", latest, self.step)
    elif self.opts.init_checkpoint:
      self.init_fn(self.model, self.opts.init_checkpoint)
    return self.step

  def _choose_compute(self, per_replica_batch: int) -> None:
    """XLA or the graph for the forward/backward pass (`fastest`), by the
    size of this run; the cross-replica all-reduce and the update stay
    outside XLA."""
    opts = self.opts
    size = RunSize(
        self.task.step_flops(per_replica_batch) * opts.grad_accum_steps,
        self.task.num_layers(), opts.train_steps, self.task.step_kind)
    self.jit_compile, why = resolve_jit_compile(
        opts.jit_compile, opts.strategy,
        bool(tf.config.list_physical_devices("GPU")), self.replicas, size)
    logging.info("forward/backward pass: %s", why)
    self._compute = tf.function(self._gradients, jit_compile=True) \
        if self.jit_compile else self._gradients

  def _make_state(self, per_replica_batch: int) -> None:
    self.carried = CarriedState(self.strategy,
                                self.task.state_shapes(per_replica_batch))
    self.carried.attach(self.checkpoint)
    with self.strategy.scope():
      # Counts a micro-batch's dropout seed draws (`seeds.dropout_seeds`),
      # per replica. Not checkpointed: zeroed for every micro-batch.
      self.dropout_draws = tf.Variable(
          0, trainable=False, name="dropout_draws",
          synchronization=tf.VariableSynchronization.ON_READ,
          aggregation=tf.VariableAggregation.NONE)

  def _gradients(self, features, state, seed):
    """Loss, new state and gradients of one micro-batch on this replica;
    its dropout draws from `seed` (int32 `[2]`)."""
    with dropout_seeds(seed, self.dropout_draws), tf.GradientTape() as tape:
      loss, new_state = self.task.compute_loss(self.model, features, state,
                                               training=True)
      scaled = loss / (self.replicas * self.opts.grad_accum_steps)
      if self.loss_scaled:
        scaled = self.optimizer.get_scaled_loss(scaled)
    variables = self.trained_variables
    grads = tape.gradient(scaled, variables)
    if self.loss_scaled:
      grads = self.optimizer.get_unscaled_gradients(grads)
    return loss, new_state, dense_gradients(grads, variables)

  @property
  def trained_variables(self) -> List[tf.Variable]:
    """Trainable variables minus the frozen ones: the embeddings and the
    lowest `freeze_layers` layers (`TrainTask.layer_of`). They get no
    gradients and no optimizer slots: memory is saved as well as compute."""
    n = self.opts.freeze_layers
    if not n:
      return self.model.trainable_variables

    def frozen(variable) -> bool:
      layer = self.task.layer_of(variable)
      return layer is not None and layer < n
    return [v for v in self.model.trainable_variables if not frozen(v)]

  def _train_step(self, micro_batches):
    """One optimizer step over `grad_accum_steps` micro-batches: gradients
    summed (so k batches of n equal one batch of k * n), all-reduced over
    replicas, clipped by global norm, applied once."""
    state = [v.read_value() for v in self.carried.variables] or None
    ctx = tf.distribute.get_replica_context()
    # The step before this update: what a resumed run restores.
    seed = step_seed(self.opts.seed, self.optimizer.iterations,
                     ctx.replica_id_in_sync_group)
    grads, losses = None, []
    for i, features in enumerate(micro_batches):
      loss, state, micro = self._compute(features, state, sub_seed(seed, i))
      grads = micro if grads is None else [a + b for a, b in zip(grads, micro)]
      losses.append(loss)
    loss = tf.add_n(losses) / len(losses)
    new_state = state
    variables = self.trained_variables
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    if self.opts.clip > 0:
      grads, norm = tf.clip_by_global_norm(grads, self.opts.clip)
    else:
      norm = tf.linalg.global_norm(grads)
    self.optimizer.apply_gradients(zip(grads, variables),
                                   experimental_aggregate_gradients=False)
    for var, value in zip(self.carried.variables, new_state or []):
      var.assign(tf.cast(value, var.dtype))
    self.loss_metric.update_state(loss)
    self.grad_norm_metric.update_state(norm)
    # This replica's mean loss (not the loss-scaled one: float16 loss scaling
    # skips overflowing gradients by itself, a non-finite loss it cannot).
    return tf.cast(loss, tf.float32)

  def train(self, dataset_fn: Callable[[tf.distribute.InputContext, int],
                                       tf.data.Dataset],
            per_replica_batch: int,
            on_save: Optional[Callable[[int], None]] = None) -> Dict:
    """Runs until `train_steps`; returns the last logged metrics.

    `dataset_fn(input_context, skip_batches)` returns this input pipeline's
    per-replica batches; `skip_batches` counts this pipeline's batches
    already consumed (resume).
    """
    opts = self.opts
    if self.is_chief:
      for path in remove_checkpoint_temps(opts.model_dir):
        logging.info("removed %s (left by an interrupted checkpoint save)",
                     path)
    self._make_state(per_replica_batch)
    start = self.restore_or_initialize()
    if start >= opts.train_steps:
      logging.info("already at step %d >= train_steps %d", start,
                   opts.train_steps)
      return {}
    self._choose_compute(per_replica_batch)

    def input_fn(ctx):
      per_pipeline = ctx.num_replicas_in_sync // ctx.num_input_pipelines
      return dataset_fn(ctx, start * per_pipeline * opts.grad_accum_steps)
    iterator = iter(self.strategy.distribute_datasets_from_function(input_fn))

    accum = opts.grad_accum_steps

    @tf.function
    def loop(n_steps):
      """Runs up to `n_steps` steps; returns `(steps run, the loss of the
      last one)`, stopping right after a step whose loss is not finite."""
      done = tf.constant(0)
      loss = tf.constant(0.0)
      for _ in tf.range(n_steps):
        batches = [next(iterator) for _ in range(accum)]
        losses = self.strategy.run(self._train_step, args=(batches,))
        loss = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, losses,
                                    axis=None)
        done += 1
        if not tf.math.is_finite(loss):
          break
      return done, loss

    writer = (tf.summary.create_file_writer(paths.join(opts.model_dir,
                                                       "train"))
              if self.is_chief else tf.summary.create_noop_writer())
    tokens_per_step = (self.task.tokens_per_example() * per_replica_batch *
                       self.replicas * opts.grad_accum_steps)
    step, logs = start, {}
    began = time.monotonic()
    last_save = start
    while step < opts.train_steps:
      n = min(opts.iterations, opts.train_steps - step)
      if opts.save_steps:
        n = min(n, opts.save_steps - step % opts.save_steps)
      t0 = time.monotonic()
      done, last_loss = loop(tf.constant(n))
      elapsed = time.monotonic() - t0
      last_loss = float(last_loss)
      if not math.isfinite(last_loss):
        writer.flush()
        raise UserError(self._stopped_message(step + int(done), last_loss))
      step = self.step
      lr = self.optimizer.learning_rate
      lr = float(lr(self.optimizer.iterations - 1) if callable(lr) else lr)
      logs = {"loss": float(self.loss_metric.result()),
              "grad_norm": float(self.grad_norm_metric.result()),
              "learning_rate": lr,
              "steps_per_sec": n / elapsed,
              "tokens_per_sec": n * tokens_per_step / elapsed}
      self.loss_metric.reset_state()
      self.grad_norm_metric.reset_state()
      with writer.as_default(step=step):
        for key, value in logs.items():
          tf.summary.scalar(key, value)
      rate = (step - start) / max(time.monotonic() - began, 1e-9)
      logging.info(
          "step %d/%d loss %.4f lr %.3g grad_norm %.3f | %.2f steps/s, "
          "%.0f tokens/s, ETA %s", step, opts.train_steps, logs["loss"], lr,
          logs["grad_norm"], logs["steps_per_sec"], logs["tokens_per_sec"],
          format_seconds((opts.train_steps - step) / max(rate, 1e-9)))
      if (opts.save_steps and step % opts.save_steps == 0) or (
          step >= opts.train_steps):
        if step != last_save:
          # The summaries up to a checkpoint are on disk with it: a killed
          # run resumed from it logs every step once.
          writer.flush()
          path = self._save(step)
          last_save = step
          if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)
          else:
            logging.info("saved %s", path)
            if on_save is not None:
              on_save(step)
    writer.flush()
    return logs

  def _last_checkpoint_note(self) -> str:
    latest = self.manager.latest_checkpoint if self.is_chief else \
        tf.train.latest_checkpoint(self.opts.model_dir)
    if latest is None:
      return f"no checkpoint was saved in {self.opts.model_dir} before it"
    return (f"the last good checkpoint, step {checkpoint_number(latest)}, is "
            f"kept in {self.opts.model_dir}")

  def _stopped_message(self, bad_step: int, loss: float) -> str:
    return (f"training stopped at step {bad_step}: loss is {loss} "
            f"({self._last_checkpoint_note()})")

  def _save(self, step: int) -> str:
    """Saves the checkpoint of `step`; a full disk is a one-line
    `UserError` naming model_dir, and the partial save is removed."""
    if self.carried.saved:
      self.carried.gather()
    try:
      return self.manager.save(checkpoint_number=step)
    except (OSError, tf.errors.OpError) as e:
      if not is_disk_full(e):
        raise
      remove_checkpoint_temps(self.manager.directory)
      raise UserError(
          f"{self.manager.directory}: no space left on device while saving "
          f"the checkpoint of step {step} ({self._last_checkpoint_note()})"
      ) from None
