"""The optimizer: Model Garden's AdamW and schedules, plus real per-layer
learning rates.

Schedule (the original's): linear warm-up from 0 to `learning_rate` over
`warmup_steps`, then linear ('poly') or cosine ('cos') decay to
`learning_rate * min_lr_ratio` at `train_steps`. Weight decay skips
LayerNorm weights and biases (the original's exclude list).

Layer-wise decay: layer l of n gets `learning_rate * rate^(n - 1 - l)`. The
original multiplied the layer's *gradients* by that factor, which Adam's
normalisation mostly undoes (its issue #184); here the factor scales the
layer's whole update, which is what a per-layer learning rate means.
Variables outside the layers (embeddings, attention biases, heads) keep the
full rate, as in the original. Which layer a variable is in, the task says
(`TrainTask.layer_of`); the optimizer gets the factors by variable name.
"""

from __future__ import annotations

import re
from typing import Dict, Optional

import tensorflow as tf
from official.modeling import optimization
from official.modeling.optimization import legacy_adamw

# What a distribution strategy adds to a variable's name: the output index
# (`:0`) and, on replicas other than the first, `/replica_<i>`.
_DECORATION = re.compile(r"(/replica_\d+)?(:\d+)?$")


def variable_key(name: str) -> str:
  """A variable's name without what the strategy adds, so that every
  replica's copy finds the same factor.

  Example:
    >>> variable_key("m/layer_1/kernel/replica_1:0"), variable_key("m/b:0")
    ('m/layer_1/kernel', 'm/b')
  """
  return _DECORATION.sub("", name)


def layer_lr_factor(layer: Optional[int], n_layer: int, rate: float) -> float:
  """The learning-rate factor of a variable in layer `layer` (None or -1:
  outside the layers): `rate^(n_layer - 1 - layer)`, else 1.

  Example:
    >>> [layer_lr_factor(l, 2, 0.5) for l in (0, 1, -1, None)]
    [0.5, 1.0, 1.0, 1.0]
  """
  if layer is None or layer < 0 or rate == 1.0:
    return 1.0
  return rate ** (n_layer - 1 - layer)


class LayerwiseAdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """AdamW whose update of a variable is scaled by its factor in
  `layer_factors` (by `variable_key`; 1 when absent), weight decay included,
  i.e. a per-layer learning rate."""

  def __init__(self, *args, layer_factors: Optional[Dict[str, float]] = None,
               **kwargs):
    super().__init__(*args, **kwargs)
    self.layer_factors = dict(layer_factors or {})

  def _resource_apply_dense(self, grad, var, apply_state=None):
    factor = self.layer_factors.get(variable_key(var.name), 1.0)
    if factor == 1.0:
      return super()._resource_apply_dense(grad, var, apply_state)
    before = var.read_value()
    with tf.control_dependencies([before]):
      update = super()._resource_apply_dense(grad, var, apply_state)
    with tf.control_dependencies([update]):
      return var.assign(before + factor * (var.read_value() - before))

  def get_config(self):
    config = super().get_config()
    config.update(layer_factors=self.layer_factors)
    return config


def make_optimizer(opts, layer_factors: Optional[Dict[str, float]] = None):
  """The optimizer for `TrainOptions` (see the module docstring);
  `layer_factors`: learning-rate factors by `variable_key`."""
  decay_steps = max(opts.train_steps - opts.warmup_steps, 1)
  end_lr = opts.learning_rate * opts.min_lr_ratio
  if opts.decay_method == "cos":
    lr_config = {"type": "cosine", "cosine": {
        "initial_learning_rate": opts.learning_rate,
        "decay_steps": decay_steps, "alpha": opts.min_lr_ratio,
        "offset": opts.warmup_steps}}
  else:
    lr_config = {"type": "polynomial", "polynomial": {
        "initial_learning_rate": opts.learning_rate,
        "decay_steps": decay_steps, "end_learning_rate": end_lr,
        "power": 1.0, "offset": opts.warmup_steps}}
  config = optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {}},
      "learning_rate": lr_config,
      "warmup": ({"type": "linear", "linear": {
          "warmup_steps": opts.warmup_steps, "warmup_learning_rate": 0.0}}
                 if opts.warmup_steps else {}),
  })
  learning_rate = optimization.OptimizerFactory(config).build_learning_rate()
  return LayerwiseAdamWeightDecay(
      learning_rate=learning_rate, epsilon=opts.adam_epsilon,
      weight_decay_rate=opts.weight_decay,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
      gradient_clip_norm=0.0,  # clipped in the train step, after all-reduce
      layer_factors=layer_factors)
