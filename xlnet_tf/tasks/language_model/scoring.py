"""Scoring texts under XLNet's permutation language model: per-piece
log-probabilities from the query stream, many targets per pass.

A row is `[context] text <sep> <cls>`, left-padded to the longest row of its
batch (`PAD_ID`, input_mask 1). The text's pieces are the targets; the
context and the two markers are context, seen by every target.

Orders:
  "l2r"  the text's k-th piece is the k-th target: it sees the context, the
         markers and the pieces before it. One `two_stream_pass` per batch
         of texts reads all of a text's targets (`[B, P]` with P its longest
         text), and their sum is a true log p(text | context, markers).
  "pll"  pseudo-log-likelihood: each piece given all the others. Exact PLL
         needs the other pieces' content never to see the scored one, so
         every piece gets a row of its own in which it is the only target
         (order 0); rows are batched `batch_size` at a time, P = 1.

`TextScorer(lm).score_ids(texts, contexts)` takes lists of id lists and
returns, per text, its ids and `log_probs` (float32 `[n]`, one per piece).
Empty texts score nothing (count 0) and cost no pass.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.errors import UserError
from data_utils.tokenization import CLS_ID, PAD_ID, SEP_ID
from xlnet_tf.factorization import CONTEXT
from xlnet_tf.tasks.language_model.passes import (log_probs_of, row_pass,
                                                  two_stream_pass)
from xlnet_tf.tasks.language_model.model import XLNetPretrainer

ORDERS = ("l2r", "pll")
MARKERS = (SEP_ID, CLS_ID)


def layout(text_ids: Sequence[int], context_ids: Sequence[int] = ()
           ) -> List[int]:
  """`[context] text <sep> <cls>` as one id list.

  Example:
    >>> layout([20, 21], [10])
    [10, 20, 21, 4, 3]
  """
  return [int(i) for i in context_ids] + [int(i) for i in text_ids] + list(
      MARKERS)


def pad_left(rows: Sequence[Sequence[int]], orders: Sequence[Sequence[int]]):
  """Left-pads id rows and their target orders to the longest row:
  `(ids [B, L] int32, order [B, L] int32, input_mask [B, L] float32)`;
  padding is `PAD_ID`, order -1 (context nobody sees), mask 1.

  Example:
    >>> ids, order, mask = pad_left([[9, 4, 3], [4, 3]], [[0, -1, -1],
    ...                                                   [-1, -1]])
    >>> ids.tolist(), order.tolist(), mask.tolist()
    ([[9, 4, 3], [5, 4, 3]], [[0, -1, -1], [-1, -1, -1]], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
  """
  length = max(len(r) for r in rows)
  ids = np.full((len(rows), length), PAD_ID, np.int32)
  order = np.full((len(rows), length), CONTEXT, np.int32)
  mask = np.ones((len(rows), length), np.float32)
  for b, (row, row_order) in enumerate(zip(rows, orders)):
    if len(row) != len(row_order):
      raise ValueError(f"row {b}: {len(row)} ids but {len(row_order)} orders")
    if row:
      ids[b, -len(row):] = row
      order[b, -len(row):] = row_order
      mask[b, -len(row):] = 0.0
  return ids, order, mask


def check_order(order: str) -> None:
  if order not in ORDERS:
    raise UserError(f"order={order!r}: must be one of {', '.join(ORDERS)}")


def target_log_probs(lm: XLNetPretrainer, input_ids, target_order,
                     input_mask) -> tf.Tensor:
  """`[B, P]` float32: log p of each target's own id, the targets sorted by
  order (ties by position; -1 positions give 0)."""
  out = two_stream_pass(lm, input_ids, target_order, input_mask=input_mask)
  output_positions = out["output_positions"]
  ids = tf.gather(tf.cast(input_ids, tf.int32),
                  tf.maximum(output_positions, 0), batch_dims=1)
  ids = tf.where(output_positions >= 0, ids, -tf.ones_like(ids))
  return log_probs_of(out["logits"], ids)


class TextScorer:
  """Scores id lists with `lm` (an `XLNetPretrainer`, dropout off).

  `batch_size`: rows per pass (texts for "l2r", pieces for "pll").
  `graph`: run each pass as one traced `tf.function` (dynamic shapes, traced
  once); False runs eagerly.
  """

  def __init__(self, lm: XLNetPretrainer, batch_size: int = 8,
               graph: bool = True):
    self._pass = row_pass(
        lambda ids, order, mask: target_log_probs(lm, ids, order, mask),
        batch_size, graph)
    self.lm, self.batch_size = lm, batch_size

  def _run(self, rows, orders) -> np.ndarray:
    ids, order, mask = pad_left(rows, orders)
    return self._pass(tf.constant(ids), tf.constant(order),
                      tf.constant(mask)).numpy()

  def score_ids(self, texts: Sequence[Sequence[int]],
                contexts: Optional[Sequence[Sequence[int]]] = None,
                order: str = "l2r",
                on_progress: Optional[Callable[[int], None]] = None
                ) -> List[dict]:
    """Per text `{"ids": [n] list, "log_probs": float32 [n]}` (piece k's
    log-probability under `order`). `on_progress(n)` is called with the
    number of pieces each pass scored."""
    check_order(order)
    if contexts is None:
      contexts = [()] * len(texts)
    if len(contexts) != len(texts):
      raise ValueError(f"{len(contexts)} contexts for {len(texts)} texts")
    results = [{"ids": [int(i) for i in t],
                "log_probs": np.zeros(len(t), np.float32)} for t in texts]
    # Longest first: a batch holds rows of similar length (less padding).
    by_length = sorted((i for i, t in enumerate(texts) if len(t)),
                       key=lambda i: -(len(texts[i]) + len(contexts[i])))
    run = self._l2r if order == "l2r" else self._pll
    run(by_length, texts, contexts, results, on_progress or (lambda n: None))
    return results

  def _l2r(self, indices, texts, contexts, results, on_progress):
    for start in range(0, len(indices), self.batch_size):
      chunk = indices[start:start + self.batch_size]
      rows, orders = [], []
      for i in chunk:
        n, c = len(texts[i]), len(contexts[i])
        rows.append(layout(texts[i], contexts[i]))
        orders.append([CONTEXT] * c + list(range(n)) + [CONTEXT] * 2)
      log_p = self._run(rows, orders)
      for b, i in enumerate(chunk):
        results[i]["log_probs"] = log_p[b, :len(texts[i])].astype(np.float32)
      on_progress(sum(len(texts[i]) for i in chunk))

  def _pll(self, indices, texts, contexts, results, on_progress):
    # One row per (text, piece): that piece the only target.
    jobs = [(i, k) for i in indices for k in range(len(texts[i]))]
    for start in range(0, len(jobs), self.batch_size):
      chunk = jobs[start:start + self.batch_size]
      rows, orders = [], []
      for i, k in chunk:
        c = len(contexts[i])
        row = layout(texts[i], contexts[i])
        row_order = [CONTEXT] * len(row)
        row_order[c + k] = 0
        rows.append(row)
        orders.append(row_order)
      log_p = self._run(rows, orders)
      for b, (i, k) in enumerate(chunk):
        results[i]["log_probs"][k] = log_p[b, 0]
      on_progress(len(chunk))


def summarize(log_probs: Sequence[float]) -> dict:
  """`sum`, `mean` (None for no pieces) and `count` of per-piece
  log-probabilities.

  Example:
    >>> summarize([-1.0, -2.0])
    {'sum': -3.0, 'mean': -1.5, 'count': 2}
    >>> summarize([])
    {'sum': 0.0, 'mean': None, 'count': 0}
  """
  values = [float(x) for x in log_probs]
  total = float(np.sum(np.asarray(values, np.float64))) if values else 0.0
  return {"sum": total, "mean": total / len(values) if values else None,
          "count": len(values)}


def score_texts(lm: XLNetPretrainer, tokenizer, texts: Sequence[str],
                contexts: Optional[Sequence[str]] = None,
                order: str = "l2r", batch_size: int = 8,
                max_seq_length: Optional[int] = None,
                on_progress: Optional[Callable[[int], None]] = None,
                graph: bool = True) -> List[dict]:
  """Tokenizes and scores raw texts (and their optional contexts).

  Returns per text `{"text", "pieces", "ids", "log_probs" (list of float),
  "sum", "mean", "count"}`. A row longer than `max_seq_length` (context,
  text and the 2 markers) is a `UserError` naming the text (1-based).
  """
  check_order(order)
  text_ids = [tokenizer.encode_ids(t) for t in texts]
  context_ids = ([tokenizer.encode_ids(c) for c in contexts]
                 if contexts is not None else None)
  if max_seq_length is not None:
    check_lengths(text_ids, context_ids, max_seq_length)
  scored = TextScorer(lm, batch_size, graph).score_ids(text_ids, context_ids, order,
                                                on_progress)
  out = []
  for text, result in zip(texts, scored):
    row = {"text": text,
           "pieces": [tokenizer.id_to_piece(i) for i in result["ids"]],
           "ids": result["ids"],
           "log_probs": [float(x) for x in result["log_probs"]]}
    row.update(summarize(result["log_probs"]))
    out.append(row)
  return out


def check_lengths(text_ids, context_ids, max_seq_length: int,
                  where: str = "text") -> None:
  """UserError for the first row longer than `max_seq_length`.

  Example:
    >>> check_lengths([[9] * 3], None, 4, where="in.txt: text")
    Traceback (most recent call last):
    ...
    data_utils.errors.UserError: in.txt: text 1: 5 pieces with the markers, more than max_seq_length 4
  """
  for i, ids in enumerate(text_ids):
    n = len(ids) + len(MARKERS) + (len(context_ids[i]) if context_ids else 0)
    if n > max_seq_length:
      what = "with the context and markers" if context_ids else \
          "with the markers"
      raise UserError(f"{where} {i + 1}: {n} pieces {what}, more than "
                      f"max_seq_length {max_seq_length}")
