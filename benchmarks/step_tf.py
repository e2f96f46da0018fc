"""What the TensorFlow adapters (`step_ours`, `step_garden`) share: thread
settings, the synthetic batch of a mode and the compiled train or forward
step, so the two projects are timed on the same inputs and the same step
around their models."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bench_common import MODES


def set_threads(n: int, inter: int = 0) -> None:
  """`n` threads inside ops and `inter` (else `n`) between them, before
  TensorFlow runs any op (the settings are the process's)."""
  tf.config.threading.set_intra_op_parallelism_threads(n)
  tf.config.threading.set_inter_op_parallelism_threads(inter or n)


def inputs(mode: str, n_token: int, rng: np.random.Generator):
  """Token ids `[B, L]` int32, segment ids (first half 0, second half 1)
  and an input mask of zeros (1 = padding, none here) for `mode`."""
  m = MODES[mode]
  b, l = m["batch"], m["seq"]
  ids = tf.constant(rng.integers(10, n_token, (b, l)), tf.int32)
  seg = tf.constant(np.r_[np.zeros(l // 2), np.ones(l - l // 2)][None]
                    .repeat(b, 0), tf.int32)
  mask = tf.zeros([b, l], tf.float32)
  return ids, seg, mask


def permutation(rng: np.random.Generator):
  """The pretraining mode's permutation mask `[B, L, L]` (random 0/1) and
  target mapping `[B, P, L]` (the same P sorted positions in every row)."""
  m = MODES["pretrain"]
  b, l, p = m["batch"], m["seq"], m["num_predict"]
  pos = np.sort(rng.choice(l, p, replace=False))
  perm_mask = tf.constant(rng.integers(0, 2, (b, l, l)), tf.float32)
  return perm_mask, tf.one_hot(np.tile(pos, (b, 1)), l)


def compiled(fn, xla: bool):
  """`fn` as a `tf.function` (XLA if asked) that waits for its result."""
  run = tf.function(fn, jit_compile=xla)
  return lambda: run().numpy()


def train_step(loss_fn, model, optimizer, xla: bool, dense_gradients=None,
               xla_update: bool = True):
  """One training step as the projects' trainers take it: gradients of
  `loss_fn()` over `model.trainable_variables`, made dense by
  `dense_gradients(grads, variables)` if given (else as they come, the
  embedding's as IndexedSlices), clipped to global norm 1, applied. With
  `xla` and not `xla_update`, XLA compiles the forward/backward pass only
  and the clipping and update run outside it, as this project's `Trainer`
  does under `jit_compile`."""
  variables = model.trainable_variables

  def gradients():
    with tf.GradientTape() as tape:
      loss = loss_fn()
    grads = tape.gradient(loss, variables)
    if dense_gradients is not None:
      grads = dense_gradients(grads, variables)
    return loss, grads
  if xla and not xla_update:
    gradients = tf.function(gradients, jit_compile=True)

  def step():
    loss, grads = gradients()
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, variables))
    return loss
  return compiled(step, xla and xla_update)
