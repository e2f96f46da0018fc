"""XLNet as a language model: the one two-stream pass that scoring, generation
and infilling are built on, over a pretrained `XLNetPretrainer` (encoder +
tied LM head, the `lm` model kind every checkpoint loader builds).

A pass takes token ids `[B, L]` and a factorization order `[B, L]`
(`xlnet_tf.factorization`: -1 context, k >= 0 the k-th target) and returns
the LM logits of every target from the query stream, `[B, P, V]` float32,
for the targets sorted by order. No segment ids are used: one segment
everywhere adds the same score to every key, so leaving the segment term out
changes nothing (and is what transformers does without token_type_ids).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf.factorization import (factorization_perm_mask, query_inputs,
                                    target_mapping, target_positions)
from xlnet_tf.tasks.language_model.model import XLNetPretrainer


def lm_logits(lm: XLNetPretrainer, hidden) -> tf.Tensor:
  """`hidden [B, P, D]` (query stream) -> `[B, P, V]` float32 logits."""
  return lm.lm_head(hidden, embedding_table=lm.encoder.embedding_table)


def two_stream_pass(lm: XLNetPretrainer, input_ids, target_order,
                    input_mask=None, output_positions=None, mems=None,
                    mems_mask=None, mem_len: Optional[int] = None,
                    reuse_len: Optional[int] = None) -> dict:
  """One encoder pass with the query stream on the targets of
  `target_order`.

  Args:
    input_ids: `[B, L]` int32 (a target's own id is never seen).
    target_order: `[B, L]` int32, -1 context, k >= 0 the k-th target.
    input_mask: `[B, L]` float, 1 = padding.
    output_positions: `[B, P]` int32, the target positions whose logits are
      computed (-1 = none); default `target_positions(target_order)`
      (sorted by order).
    mems, mems_mask, mem_len, reuse_len: the encoder's memory (a decoding
      cache: n_layer `[B, M, D]`, `[B, M]` 1 = hidden).
  Returns:
    `{"logits": [B, P, V] float32, "output_positions": [B, P], "new_mems":
    list | None}`.
  """
  input_ids = tf.convert_to_tensor(input_ids)
  if output_positions is None:
    output_positions = target_positions(target_order)
  out = lm.encoder(
      input_ids, input_mask=input_mask, mems=mems, mems_mask=mems_mask,
      perm_mask=factorization_perm_mask(target_order, input_mask),
      target_mapping=target_mapping(output_positions,
                                    tf.shape(input_ids)[1]),
      input_q=query_inputs(target_order), mem_len=mem_len,
      reuse_len=reuse_len)
  return {"logits": lm_logits(lm, out["sequence_output"]),
          "output_positions": output_positions, "new_mems": out["new_mems"]}


def log_probs_of(logits, token_ids) -> tf.Tensor:
  """`log p(token)` `[B, P]` from `logits [B, P, V]` and `token_ids [B, P]`
  (ids < 0 give 0).

  Example:
    >>> logits = tf.math.log([[[0.25, 0.75], [0.5, 0.5]]])
    >>> [round(float(x), 4) for x in log_probs_of(logits, tf.constant([[1, -1]]))[0]]
    [-0.2877, 0.0]
  """
  token_ids = tf.cast(token_ids, tf.int32)
  log_p = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  picked = tf.gather(log_p, tf.maximum(token_ids, 0), batch_dims=2)
  return tf.where(token_ids >= 0, picked, tf.zeros_like(picked))


# A batch of rows: ids and target order int32, padding mask float32, `[B, T]`.
ROW_SPECS = (tf.TensorSpec([None, None], tf.int32),
             tf.TensorSpec([None, None], tf.int32),
             tf.TensorSpec([None, None], tf.float32))


def row_pass(fn, batch_size: int, graph: bool, *extra_specs):
  """`fn(ids, order, mask, *extra)` as one `tf.function` over `ROW_SPECS`
  and `extra_specs` (dynamic shapes: traced once), or `fn` itself to run
  eagerly (`graph` False); `batch_size` (rows per pass) is checked here
  for the scorer and the infiller that run such passes."""
  if batch_size < 1:
    raise ValueError(f"batch_size={batch_size}: must be at least 1")
  if not graph:
    return fn
  return tf.function(fn, input_signature=[*ROW_SPECS, *extra_specs])
