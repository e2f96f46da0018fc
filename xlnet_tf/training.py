"""The one training loop every entry script uses.

It owns: the distribution strategy, the optimizer (`optimization.py`;
global-norm clipping after the cross-replica all-reduce), state carried from step to step per
replica (XLNet's memory), TensorBoard summaries (loss, learning rate,
gradient norm, tokens/s), checkpoints every `save_steps` and exact
resumption of step, optimizer state and input position, dynamic loss scaling
for float16 models, and multi-worker runs where only the chief writes.

A task supplies the model, its loss and its carried state (`TrainTask`); the
input comes from a function of the `tf.distribute.InputContext` and the number
of per-replica batches to skip (the resume position).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf
import tf_keras as keras
from absl import logging

from data_utils.errors import UsageError
from data_utils.progress import format_seconds
from xlnet_tf.building import build_once
from xlnet_tf.initializers import cpu_has_native_bfloat16
from xlnet_tf.optimization import make_optimizer

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
  jit_compile: bool = False      # XLA for the forward/backward pass
  freeze_layers: int = 0         # keep embeddings + the lowest n layers fixed

  def validate(self) -> None:
    if self.train_steps <= 0:
      raise UsageError(f"train_steps must be positive, got {self.train_steps}")
    if self.iterations <= 0:
      raise UsageError(f"iterations must be positive, got {self.iterations}")
    if self.save_steps is not None and self.save_steps <= 0:
      raise UsageError(f"save_steps must be positive, got {self.save_steps}")
    if not 0 <= self.warmup_steps <= self.train_steps:
      raise UsageError(f"warmup_steps ({self.warmup_steps}) must be in "
                       f"[0, train_steps={self.train_steps}]")
    if self.grad_accum_steps < 1:
      raise UsageError(f"grad_accum_steps must be >= 1, got "
                       f"{self.grad_accum_steps}")
    if self.decay_method not in ("poly", "cos"):
      raise UsageError(f"decay_method must be 'poly' or 'cos', got "
                       f"{self.decay_method!r}")
    if not 0 < self.lr_layer_decay_rate <= 1:
      raise UsageError(f"lr_layer_decay_rate must be in (0, 1], got "
                       f"{self.lr_layer_decay_rate}")
    if self.strategy not in STRATEGIES:
      raise UsageError(f"strategy must be one of {STRATEGIES}, got "
                       f"{self.strategy!r}")


class TrainTask:
  """What a task gives the loop. Subclasses override the three methods."""

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


def dense_gradients(grads, variables) -> List[tf.Tensor]:
  """Every gradient as a dense tensor, zeros where a variable got none.

  The word embedding's gradient arrives as `tf.IndexedSlices` (rows of a
  gather). Summed over micro-batches and replicas it must be dense anyway,
  and applied dense it takes Adam's fused kernel: Keras' sparse Adam path
  decays both slots with separate full-size ops and copies the table on
  every read once it has been scatter-updated (~0.15 s per XLNet-Base step
  on a 2-core CPU, against ~0.04 s dense).

  Example:
    >>> v = tf.Variable(tf.zeros([3, 2]))
    >>> rows = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([1]), [3, 2])
    >>> [g.numpy().tolist() for g in dense_gradients([rows, None], [v, v])]
    [[[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]]
  """
  return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
          for g, v in zip(grads, variables)]


def split_cpu(num_devices: int) -> None:
  """Splits the CPU into `num_devices` logical devices (to run
  `mirrored` without accelerators); must run before TensorFlow starts."""
  if num_devices:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


def make_strategy(name: str, tpu: Optional[str] = None
                  ) -> tf.distribute.Strategy:
  """'default' (one device), 'mirrored' (all local devices), 'multi_worker'
  (TF_CONFIG cluster), 'tpu' (address in `tpu`, or the local TPU)."""
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    # On a TPU VM the local TPU is found without a name; elsewhere the
    # resolver needs --tpu (a name or grpc:// address).
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu or "")
    except ValueError as e:
      raise UsageError(f"--strategy=tpu: no TPU found ({e}); pass --tpu=NAME "
                       "or run on a TPU VM") from None
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise UsageError(f"strategy must be one of {STRATEGIES}, got {name!r}")


class Trainer:
  """Builds the model under the strategy, restores or initialises, trains."""

  def __init__(self, task: TrainTask, opts: TrainOptions,
               strategy: Optional[tf.distribute.Strategy] = None):
    opts.validate()
    self.task = task
    self.opts = opts
    self.strategy = strategy or make_strategy(opts.strategy, opts.tpu)
    self.replicas = self.strategy.num_replicas_in_sync
    # XLA compiles the forward/backward pass; the cross-replica all-reduce
    # and the update stay outside it.
    self._compute = tf.function(self._gradients, jit_compile=True) \
        if opts.jit_compile else self._gradients
    with self.strategy.scope():
      # Built here: variables created outside the scope are not mirrored.
      self.model = task.build_model()
      build_once(self.model)
      self.optimizer = make_optimizer(
          opts, n_layer=getattr(getattr(self.model, "config", None),
                                "n_layer", 0))
      # float16 gradients underflow without it; dynamic loss scaling also
      # skips a step whose gradients overflow and lowers the scale.
      model_options = getattr(self.model, "options", None)
      self.loss_scaled = getattr(model_options, "use_float16", False)
      if self.loss_scaled:
        self.optimizer = keras.mixed_precision.LossScaleOptimizer(
            self.optimizer)
      self.checkpoint = tf.train.Checkpoint(model=self.model,
                                            optimizer=self.optimizer)
      self.loss_metric = keras.metrics.Mean("loss")
      self.grad_norm_metric = keras.metrics.Mean("grad_norm")
    if (getattr(model_options, "use_bfloat16", False)
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
    save_dir = opts.model_dir if self.is_chief else os.path.join(
        opts.model_dir, f".worker_{self.strategy.cluster_resolver.task_id}")
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, save_dir, max_to_keep=opts.max_save,
        step_counter=self.optimizer.iterations)
    self.state_vars: List[tf.Variable] = []

  @property
  def step(self) -> int:
    return int(self.optimizer.iterations.numpy())

  def restore_or_initialize(self) -> int:
    """Resumes from the newest checkpoint in model_dir, else loads
    `init_checkpoint` (either layout). Returns the step to start from."""
    from xlnet_tf.checkpoint import load_checkpoint
    latest = tf.train.latest_checkpoint(self.opts.model_dir)
    if latest:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
      logging.info("resumed from %s at step %d", latest, self.step)
    elif self.opts.init_checkpoint:  # logs its own report
      load_checkpoint(self.model, self.opts.init_checkpoint)
    return self.step

  def _make_state(self, per_replica_batch: int) -> None:
    shapes = self.task.state_shapes(per_replica_batch)
    with self.strategy.scope():
      # Per-replica copies (ON_READ): each replica keeps its own memory.
      self.state_vars = [
          tf.Variable(tf.zeros(s), trainable=False,
                      synchronization=tf.VariableSynchronization.ON_READ,
                      aggregation=tf.VariableAggregation.NONE,
                      name=f"carried_state_{i}")
          for i, s in enumerate(shapes)]

  def _gradients(self, features, state):
    """Loss, new state and gradients of one micro-batch on this replica."""
    with tf.GradientTape() as tape:
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
    """Trainable variables minus the frozen ones (no gradients, no optimizer
    slots: `freeze_layers` saves memory as well as compute)."""
    n = self.opts.freeze_layers
    if not n:
      return self.model.trainable_variables
    frozen = re.compile(r"(^|/)transformer/(word_embedding|mask_emb|layer_(" +
                        "|".join(str(i) for i in range(n)) + r"))/")
    return [v for v in self.model.trainable_variables
            if not frozen.search(v.name)]

  def _train_step(self, micro_batches):
    """One optimizer step over `grad_accum_steps` micro-batches: gradients
    summed (so k batches of n equal one batch of k * n), all-reduced over
    replicas, clipped by global norm, applied once."""
    state = [v.read_value() for v in self.state_vars] or None
    grads, losses = None, []
    for features in micro_batches:
      loss, state, micro = self._compute(features, state)
      grads = micro if grads is None else [a + b for a, b in zip(grads, micro)]
      losses.append(loss)
    loss = tf.add_n(losses) / len(losses)
    new_state = state
    variables = self.trained_variables
    ctx = tf.distribute.get_replica_context()
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    if self.opts.clip > 0:
      grads, norm = tf.clip_by_global_norm(grads, self.opts.clip)
    else:
      norm = tf.linalg.global_norm(grads)
    self.optimizer.apply_gradients(zip(grads, variables),
                                   experimental_aggregate_gradients=False)
    for var, value in zip(self.state_vars, new_state or []):
      var.assign(tf.cast(value, var.dtype))
    self.loss_metric.update_state(loss)
    self.grad_norm_metric.update_state(norm)

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
    start = self.restore_or_initialize()
    if start >= opts.train_steps:
      logging.info("already at step %d >= train_steps %d", start,
                   opts.train_steps)
      return {}
    self._make_state(per_replica_batch)

    def input_fn(ctx):
      per_pipeline = ctx.num_replicas_in_sync // ctx.num_input_pipelines
      return dataset_fn(ctx, start * per_pipeline * opts.grad_accum_steps)
    iterator = iter(self.strategy.distribute_datasets_from_function(input_fn))

    accum = opts.grad_accum_steps

    @tf.function
    def loop(n_steps):
      for _ in tf.range(n_steps):
        batches = [next(iterator) for _ in range(accum)]
        self.strategy.run(self._train_step, args=(batches,))

    writer = (tf.summary.create_file_writer(os.path.join(opts.model_dir,
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
      loop(tf.constant(n))
      elapsed = time.monotonic() - t0
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
          path = self.manager.save(checkpoint_number=step)
          last_save = step
          if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)
          else:
            logging.info("saved %s", path)
            if on_save is not None:
              on_save(step)
    writer.flush()
    return logs


def write_run_files(model_dir: str, files: Dict[str, dict]) -> None:
  """Writes JSON side files (configs, options) into model_dir, atomically."""
  from xlnet_tf.config import write_json_atomic
  os.makedirs(model_dir, exist_ok=True)
  for name, data in files.items():
    write_json_atomic(os.path.join(model_dir, name), data)


def read_json(path: str) -> dict:
  with open(path) as f:
    return json.load(f)
