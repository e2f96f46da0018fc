"""What both attention layers share: head projections `[D, N, H]` named as the
original (`q/kernel`, ...), dropout on probabilities and output, LayerNorm."""

from __future__ import annotations

from xlnet_tf.initializers import fresh
from xlnet_tf.layers.sublayer import Sublayer


class MultiHeadBase(Sublayer):
  """Subclasses set `KERNELS`, the projections they own, and implement call."""

  KERNELS = ("q", "k", "v", "o")

  def __init__(self, d_model: int, n_head: int, d_head: int,
               dropout: float = 0.0, dropatt: float = 0.0,
               kernel_initializer="glorot_uniform", fast_kernels: bool = True,
               **kwargs):
    super().__init__(d_model, dropout, kernel_initializer, fast_kernels,
                     **kwargs)
    self.n_head = n_head
    self.d_head = d_head
    self.dropatt_rate = dropatt
    self.scale = 1.0 / (d_head ** 0.5)
    self.attn_dropout = self.seeded_dropout(dropatt)
    self.output_dropout = self.seeded_dropout(dropout)

  def build(self, input_shape=None):
    shape = [self.d_model, self.n_head, self.d_head]
    for name in self.KERNELS:
      setattr(self, f"{name}_kernel", self.add_weight(
          f"{name}/kernel", shape=shape,
          initializer=fresh(self.kernel_initializer)))
    super().build(input_shape)

  def original_weights(self) -> dict:
    """Relative original names -> variables."""
    weights = {f"{n}/kernel": getattr(self, f"{n}_kernel")
               for n in self.KERNELS}
    weights.update(self.layer_norm.original_weights())
    return weights

  def get_config(self):
    config = super().get_config()
    config.update(n_head=self.n_head, d_head=self.d_head,
                  dropatt=self.dropatt_rate)
    return config
