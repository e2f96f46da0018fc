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
full rate, as in the original.
"""

from __future__ import annotations

import re
import tensorflow as tf
from official.modeling import optimization
from official.modeling.optimization import legacy_adamw

_LAYER = re.compile(r"(?:^|/)transformer/layer_(\d+)/")


def layer_lr_factor(name: str, n_layer: int, rate: float) -> float:
  """The learning-rate factor of a variable: `rate^(n_layer - 1 - l)` inside
  `transformer/layer_l/`, else 1.

  Example:
    >>> [layer_lr_factor(n, 2, 0.5) for n in (
    ...     "transformer/layer_0/ff/layer_1/kernel:0",
    ...     "transformer/layer_1/ff/layer_1/kernel/replica_1:0",
    ...     "transformer/word_embedding/lookup_table:0")]
    [0.5, 1.0, 1.0]
  """
  match = _LAYER.search(name)
  if not match or rate == 1.0:
    return 1.0
  return rate ** (n_layer - 1 - int(match.group(1)))


class LayerwiseAdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """AdamW whose update of a layer's variables is scaled by the layer's
  factor (weight decay included), i.e. a per-layer learning rate."""

  def __init__(self, *args, layer_decay_rate: float = 1.0, n_layer: int = 0,
               **kwargs):
    super().__init__(*args, **kwargs)
    self.layer_decay_rate = layer_decay_rate
    self.n_layer = n_layer

  def _resource_apply_dense(self, grad, var, apply_state=None):
    factor = layer_lr_factor(var.name, self.n_layer, self.layer_decay_rate)
    if factor == 1.0:
      return super()._resource_apply_dense(grad, var, apply_state)
    before = var.read_value()
    with tf.control_dependencies([before]):
      update = super()._resource_apply_dense(grad, var, apply_state)
    with tf.control_dependencies([update]):
      return var.assign(before + factor * (var.read_value() - before))

  def get_config(self):
    config = super().get_config()
    config.update(layer_decay_rate=self.layer_decay_rate, n_layer=self.n_layer)
    return config


def make_optimizer(opts, n_layer: int = 0):
  """The optimizer for `TrainOptions` (see the module docstring)."""
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
      layer_decay_rate=opts.lr_layer_decay_rate, n_layer=n_layer)
