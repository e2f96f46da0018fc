"""Infilling: the masked positions of a text filled one piece at a time
through XLNet's query stream, in a chosen order.

A row is `text <sep> <cls>` (ids with placeholders at the holes),
left-padded in batches. The unmasked text and the markers are context. The
filled pieces are targets in their fill order (the k-th filled sees the
context and the k-1 filled before it); the positions still open are all
targets of the next order (they see the context and every filled piece,
never each other). So each step is one `two_stream_pass` with the current
order, reading the open positions (`[B, P, V]` log-probabilities, P the most
open positions of a row), and a placeholder's value is never read.

Orders: "left_to_right" fills the leftmost open position; "confident" the
open position whose most probable allowed piece is the most probable.
Strategies: "greedy" takes that piece; "sample" draws it (temperature,
top-k, top-p) from a generator seeded per text, so a text's fill does not
depend on its batch. Special pieces (ids below `FIRST_ORDINARY_ID`: <unk>,
<s>, </s>, <cls>, <sep>, <pad>, <mask>, <eod>, <eop>) are never chosen.
A fill's log-probability is the model's (full vocabulary, no temperature) at
the step it was chosen.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_utils.errors import UserError
from data_utils.lm.infill import InfillText, encode, fill_text
from data_utils.tokenization import SPECIAL_SYMBOLS
from xlnet_tf.factorization import CONTEXT
from xlnet_tf.tasks.language_model.generation import check_sampling
from xlnet_tf.tasks.language_model.passes import row_pass, two_stream_pass
from xlnet_tf.tasks.language_model.model import XLNetPretrainer
from xlnet_tf.tasks.language_model.scoring import MARKERS, pad_left

FILL_ORDERS = ("left_to_right", "confident")
STRATEGIES = ("greedy", "sample")
FIRST_ORDINARY_ID = len(SPECIAL_SYMBOLS)


def check_settings(order: str, strategy: str, temperature: float = 1.0,
                   top_k: int = 0, top_p: float = 1.0) -> None:
  """UserError for a setting that cannot work (named as its flag)."""
  if order not in FILL_ORDERS:
    raise UserError(f"--order={order}: must be one of "
                    f"{', '.join(FILL_ORDERS)}")
  if strategy not in STRATEGIES:
    raise UserError(f"--strategy={strategy}: must be one of "
                    f"{', '.join(STRATEGIES)}")
  check_sampling(temperature, top_k, top_p)


def open_log_probs(lm: XLNetPretrainer, input_ids, target_order, input_mask,
                   output_positions) -> tf.Tensor:
  """`[B, P, V]` float32 log-probabilities at `output_positions [B, P]`
  (int32, -1 = none) under `target_order`."""
  out = two_stream_pass(lm, input_ids, target_order, input_mask=input_mask,
                        output_positions=output_positions)
  return tf.nn.log_softmax(out["logits"], axis=-1)


def sample_piece(log_p: np.ndarray, rng: np.random.Generator,
                 temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0) -> int:
  """One id drawn from `log_p [V]` (-inf = not allowed) after temperature,
  top-k (0 = off) and top-p (nucleus; the smallest set of most probable
  pieces whose mass reaches `top_p`).

  Example:
    >>> rng = np.random.default_rng(0)
    >>> sample_piece(np.log([0.1, 0.6, 0.3]), rng, top_k=1)
    1
    >>> sample_piece(np.log([0.1, 0.6, 0.3]), rng, top_p=0.5)
    1
  """
  log_p = np.asarray(log_p, np.float64)
  # The best at 0 before dividing: a small temperature then sends the
  # others to -inf, never every piece (a row of -inf has no distribution).
  logits = (log_p - np.max(log_p)) / temperature
  ranked = np.argsort(-logits, kind="stable")
  keep = np.isfinite(logits[ranked])
  if top_k > 0:
    keep[top_k:] = False
  probs = np.exp(logits[ranked] - logits[ranked[0]]) * keep
  probs /= probs.sum()
  if top_p < 1.0:
    # A piece stays while the mass before it is below top_p.
    before = np.cumsum(probs) - probs
    keep &= before < top_p
    probs = probs * keep
    probs /= probs.sum()
  return int(ranked[rng.choice(len(ranked), p=probs)])


class Infiller:
  """Fills holes with `lm` (an `XLNetPretrainer`, dropout off).

  `batch_size`: texts per pass. `graph`: each step's pass as one traced
  `tf.function` (dynamic shapes, traced once); False runs eagerly.
  """

  def __init__(self, lm: XLNetPretrainer, batch_size: int = 8,
               graph: bool = True):
    self._pass = row_pass(
        lambda ids, order, mask, output_positions: open_log_probs(
            lm, ids, order, mask, output_positions),
        batch_size, graph, tf.TensorSpec([None, None], tf.int32))
    self.lm, self.batch_size = lm, batch_size

  def fill_ids(self, rows: Sequence[Sequence[int]],
               holes: Sequence[Sequence[int]], order: str = "left_to_right",
               strategy: str = "greedy", temperature: float = 1.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               on_progress: Optional[Callable[[int], None]] = None
               ) -> List[dict]:
    """`rows`: id lists (any id at a hole); `holes`: per row the positions
    to fill. Returns per row `{"ids": the row filled, "positions": filled
    positions in fill order, "tokens", "log_probs" (float32, fill order)}`.
    `on_progress(n)` is called with the pieces each step filled."""
    check_settings(order, strategy, temperature, top_k, top_p)
    if len(holes) != len(rows):
      raise ValueError(f"{len(holes)} hole lists for {len(rows)} rows")
    for i, (row, row_holes) in enumerate(zip(rows, holes)):
      if len(set(row_holes)) != len(row_holes) or any(
          not 0 <= p < len(row) for p in row_holes):
        raise ValueError(f"row {i}: holes {list(row_holes)} are not "
                         f"distinct positions of its {len(row)} ids")
    results = [None] * len(rows)
    by_size = sorted(range(len(rows)), key=lambda i: -len(holes[i]))
    for start in range(0, len(by_size), self.batch_size):
      chunk = by_size[start:start + self.batch_size]
      filled = self._fill_batch(
          [rows[i] for i in chunk], [holes[i] for i in chunk],
          [seed + i for i in chunk], order, strategy,
          (temperature, top_k, top_p), on_progress or (lambda n: None))
      for i, result in zip(chunk, filled):
        results[i] = result
    return results

  def _fill_batch(self, rows, holes, seeds, order, strategy, sampling,
                  on_progress):
    full = [list(r) + list(MARKERS) for r in rows]
    ids, _, mask = pad_left(full, [[CONTEXT] * len(r) for r in full])
    pad = ids.shape[1] - np.array([len(r) for r in full])
    open_pos = [sorted(int(p) + pad[b] for p in holes[b])
                for b in range(len(rows))]
    fill_order = np.full(ids.shape, CONTEXT, np.int32)
    done = [{"positions": [], "tokens": [], "log_probs": []} for _ in rows]
    rngs = [np.random.default_rng(s) for s in seeds]
    while True:
      active = [b for b in range(len(rows)) if open_pos[b]]
      if not active:
        break
      order_now = fill_order[active].copy()
      width = max(len(open_pos[b]) for b in active)
      output_positions = np.full((len(active), width), -1, np.int32)
      for r, b in enumerate(active):
        output_positions[r, :len(open_pos[b])] = open_pos[b]
        order_now[r, open_pos[b]] = len(done[b]["positions"])
      log_p = self._pass(tf.constant(ids[active]), tf.constant(order_now),
                         tf.constant(mask[active]),
                         tf.constant(output_positions)).numpy()
      for r, b in enumerate(active):
        slot, token = self._choose(log_p[r, :len(open_pos[b])], order,
                                   strategy, sampling, rngs[b])
        position = open_pos[b].pop(slot)
        fill_order[b, position] = len(done[b]["positions"])
        ids[b, position] = token
        done[b]["positions"].append(int(position - pad[b]))
        done[b]["tokens"].append(token)
        done[b]["log_probs"].append(float(log_p[r, slot, token]))
      on_progress(len(active))
    out = []
    for b, row in enumerate(rows):
      out.append({"ids": [int(t) for t in ids[b, pad[b]:pad[b] + len(row)]],
                  "positions": done[b]["positions"],
                  "tokens": done[b]["tokens"],
                  "log_probs": np.asarray(done[b]["log_probs"], np.float32)})
    return out

  @staticmethod
  def _choose(log_p: np.ndarray, order: str, strategy: str, sampling,
              rng: np.random.Generator):
    """`(slot, token)` from the open positions' `log_p [P, V]` (left to
    right)."""
    allowed = log_p.copy()
    allowed[:, :FIRST_ORDINARY_ID] = -np.inf
    if order == "left_to_right":
      slot = 0
    else:
      slot = int(np.argmax(allowed.max(axis=1)))
    if strategy == "greedy":
      return slot, int(np.argmax(allowed[slot]))
    return slot, sample_piece(allowed[slot], rng, *sampling)


def describe(tokenizer, item: InfillText, hole_positions, result: dict
             ) -> dict:
  """The JSON-ready account of one filled text: `text`, `filled` (the text
  with its holes filled), per hole `start`, `end` (characters of `text`),
  `fill`, `pieces`, `ids`, `log_probs` and `steps` (when each piece was
  filled, 0-based), and the `sum` and `count` of all fills' log-probs."""
  step_of = {p: k for k, p in enumerate(result["positions"])}
  holes, fills = [], []
  for hole, positions in zip(item.holes, hole_positions):
    ids = [result["ids"][p] for p in positions]
    pieces = [tokenizer.id_to_piece(i) for i in ids]
    steps = [step_of[p] for p in positions]
    fills.append(pieces)
    holes.append({"start": hole.start, "end": hole.end,
                  "fill": tokenizer.decode_pieces(pieces),
                  "pieces": pieces, "ids": ids,
                  "log_probs": [float(result["log_probs"][k]) for k in steps],
                  "steps": steps})
  log_probs = [float(x) for x in result["log_probs"]]
  return {"text": item.text, "filled": fill_text(item, fills),
          "holes": holes, "sum": float(np.sum(log_probs, dtype=np.float64)),
          "count": len(log_probs)}


def infill_texts(infiller: Infiller, tokenizer, items: Sequence[InfillText],
                 **settings) -> List[dict]:
  """Encodes, fills (`settings`: those of `Infiller.fill_ids`) and
  describes texts with holes."""
  encoded = [encode(tokenizer, item) for item in items]
  results = infiller.fill_ids([ids for ids, _ in encoded],
                              [sum(holes, []) for _, holes in encoded],
                              **settings)
  return [describe(tokenizer, item, holes, result)
          for item, (_, holes), result in zip(items, encoded, results)]
