"""How much arithmetic an XLNet step is: the estimate the training default
(`training.fastest`) and the benchmarks' fractions of peak both use."""

from __future__ import annotations

from xlnet_tf.config import XLNetConfig


def training_flops(config: XLNetConfig, tokens: int, klen: int) -> float:
  """Training FLOPs (forward 1x, backward 2x) of `tokens` query positions
  attending over `klen` positions each (`seq_len + mem_len`): the layers'
  matmuls (q, k, v, r, o and the FFN: 2 FLOPs a weight a token) and the
  attention products (content scores over `klen`, position scores over
  `2 * klen`, the weighted sum over `klen`), without the embeddings.

  Example:
    >>> base = XLNetConfig(n_layer=12, d_model=768, n_head=12, d_head=64,
    ...                    d_inner=3072, n_token=32000)
    >>> round(training_flops(base, 8 * 128, 128) / 1e9)   # fine-tune, b8 s128
    594
  """
  d, heads = config.d_model, config.n_head * config.d_head
  weights = 5 * d * heads + 2 * d * config.d_inner
  attention = 2 * heads * (klen + 2 * klen + klen)
  return 3 * config.n_layer * tokens * (2 * weights + attention)
