"""Batch prediction with a language-model export, two jobs:

  embed  a text's pieces with their character offsets (`text_pieces`) ->
         `embed_ids`: the states of the chosen layers and the poolings, as
         `run_embed.py` computes them (`window_features` layout; a text
         longer than the window S is read in segments with a memory of S;
         a batch is padded to its longest row, or to whole windows for an
         export whose meta lacks `partial_first_window`).
         A row: `pieces`, `ids`, `starts`, `ends`, `layers` and `pooled`
         {pooling: [K][D]}; the per-piece vectors go to the TFRecord
         shards (`example`, the layout of `run_embed.py`'s .tfrecord).
  score  a text's ids -> `score_ids`: each piece's log-probability left
         to right, as `run_score.py --order=l2r` (`[text] <sep> <cls>`).
         A row: `pieces`, `ids`, `log_probs`, `sum`, `mean`, `count`. A
         text longer than the export's window (pieces + 2 markers > S) is
         a dead row: the export reads one window.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from data_utils.lm.embedding_files import (embedding_example, text_pieces,
                                           window_features)
from xlnet_tf.factorization import CONTEXT
from xlnet_tf.tasks.batch import BatchKind, Padding, Prepared, RowProblem
from xlnet_tf.tasks.language_model.scoring import (MARKERS, layout, pad_left,
                                                   summarize)


def embed_length(counts: List[int], window: int, full_windows: bool,
                 partial_first_window: bool = False) -> int:
  """The padded length of a batch of texts with `counts` pieces: the
  longest row (pieces + 2 markers); past one window, whole windows of
  `window` unless the export reads a partial first window
  (`partial_first_window`, its marker's meta); within one window, the
  whole window for `full_windows` (the `mean` pooling averages the S
  positions of the window, padding included; past one window the last
  window is whole either way).

  Example:
    >>> embed_length([3, 5], 16, False), embed_length([3], 16, True)
    (7, 16)
    >>> embed_length([20], 16, False), embed_length([20], 16, True, True)
    (32, 22)
  """
  longest = max(counts) + len(MARKERS)
  if longest > window:
    if partial_first_window:
      return longest
    return -(-longest // window) * window
  return window if full_windows else longest


class LanguageModelBatch(BatchKind):
  """Its options (`batch_flags.options`): `job`, and for embed `layers`,
  `poolings`, `piece_vectors` (False: outputs hold no per-piece vectors,
  `None`, and TFRecords none either)."""

  @classmethod
  def bfloat16_problem(cls, meta: dict) -> Optional[str]:
    del meta
    return ("a language model's export reads long texts in a loop of "
            "windows that the bfloat16 rewrite does not reach; use float32")

  @property
  def job(self) -> str:
    return self.options["job"]

  @property
  def signature(self) -> str:
    return "embed_ids" if self.job == "embed" else "score_ids"

  def prepare(self, fields: dict) -> Prepared:
    text = fields["text"]
    if self.job == "embed":
      pieces = text_pieces(self.tokenizer, text)
      return Prepared(len(pieces.ids) + len(MARKERS), pieces._asdict())
    ids = self.tokenizer.encode_ids(text)
    window = self.meta["max_seq_length"]
    if len(ids) + len(MARKERS) > window:
      raise RowProblem(f"{len(ids) + len(MARKERS)} pieces with the markers, "
                       f"more than the export's window of {window} (it reads "
                       "one window)")
    return Prepared(len(ids) + len(MARKERS), {"ids": ids})

  def infer(self, signature, payloads: List[dict]
            ) -> Tuple[List[dict], List[Padding]]:
    if self.job == "embed":
      return self._embed(signature, payloads)
    return self._score(signature, payloads)

  def _embed(self, signature, payloads):
    counts = [len(p["ids"]) for p in payloads]
    poolings = self.options["poolings"]
    # An export made before `partial_first_window` refuses a length past
    # the window that is no multiple of it: whole windows for those.
    length = embed_length(counts, self.meta["max_seq_length"],
                          "mean" in poolings,
                          bool(self.meta.get("partial_first_window")))
    f = window_features([p["ids"] for p in payloads], length)
    out = signature(layers=tf.constant(self.options["layers"], tf.int32),
                    **{k: tf.constant(v) for k, v in f.items()})
    states = out["states"].numpy()
    pooled = {k: out[k].numpy() for k in poolings}
    keep = self.options.get("piece_vectors", True)
    rows = []
    for b, n in enumerate(counts):
      start = length - n - len(MARKERS)
      rows.append({"vectors": np.transpose(states[b, :, start:start + n],
                                           [1, 0, 2]) if keep else None,
                   "pooled": {k: v[b] for k, v in pooled.items()}})
    return rows, [Padding(n + len(MARKERS), length) for n in counts]

  def _score(self, signature, payloads):
    rows, orders = [], []
    for p in payloads:
      rows.append(layout(p["ids"]))
      orders.append(list(range(len(p["ids"]))) + [CONTEXT] * len(MARKERS))
    ids, order, mask = pad_left(rows, orders)
    log_probs = signature(input_ids=tf.constant(ids),
                          target_order=tf.constant(order),
                          input_mask=tf.constant(mask))["log_probs"].numpy()
    out = [{"log_probs": log_probs[b, :len(p["ids"])].astype(np.float32)}
           for b, p in enumerate(payloads)]
    return out, [Padding(len(r), ids.shape[1]) for r in rows]

  def row(self, fields: dict, payload: dict, output: dict) -> dict:
    del fields
    pieces = [self.tokenizer.id_to_piece(i) for i in payload["ids"]] \
        if self.job == "score" else payload["pieces"]
    row = {"pieces": list(pieces), "ids": [int(i) for i in payload["ids"]]}
    if self.job == "score":
      row["log_probs"] = [float(x) for x in output["log_probs"]]
      row.update(summarize(output["log_probs"]))
      return row
    row.update(starts=list(payload["starts"]), ends=list(payload["ends"]),
               layers=list(self.options["layers"]),
               pooled={k: np.asarray(v, np.float32).tolist()
                       for k, v in output["pooled"].items()})
    return row

  def example(self, key, fields: dict, payload: dict, output: dict) -> bytes:
    meta = {"index": int(key[1]), "text": fields["text"],
            "pieces": payload["pieces"], "ids": payload["ids"],
            "starts": payload["starts"], "ends": payload["ends"],
            "layers": list(self.options["layers"])}
    vectors = output["vectors"]
    width = next(iter(output["pooled"].values())).shape[-1] \
        if vectors is None else vectors.shape[-1]
    return embedding_example(meta, width, vectors,
                             output["pooled"], list(output["pooled"]),
                             file=key[0])
