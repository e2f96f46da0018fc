"""What every task's batch-prediction kind shares (`tasks/<task>/batch.py`,
run by `xlnet_tf/batch_predict`).

A kind turns one input row into model features (`prepare`, in Python, on
the worker) and those into the units the model reads (`units`: the row, or
a long text's windows), runs a batch of units through its export's
signature (`infer`), joins a row's outputs (`join`) and turns them into one
JSON-able row (`row`). Features are LEFT
padded, as every signature of this project takes them: a row travels
without its padding (`trimmed`) and a batch is padded to its longest row
(`left_padded`), so signatures that take any length (`serve_features`,
`embed_ids`, `score_ids`) see the padding the batch needs and no more.

`prepare` returns `Prepared(length, payload)`: `length` is the row's real
length in positions (what batches are sorted by), `payload` what `infer`
and `row` read (plain Python and numpy values: it crosses workers). A row
that cannot be predicted raises `RowProblem(reason)`: it goes to the
dead-letter file, and the job goes on.
"""

from __future__ import annotations

import functools
from typing import (Any, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np

from data_utils.tokenization import SEG_ID_PAD, SentencePieceTokenizer

FEATURES = ("input_ids", "segment_ids", "input_mask")


class RowProblem(ValueError):
  """Why one input row cannot be predicted (one line)."""


class Prepared(NamedTuple):
  length: int
  payload: Any


class Padding(NamedTuple):
  """Positions one row fed to the model: `real` ones and all (`fed`, its
  real ones plus the padding its batch gave it)."""
  real: int
  fed: int


@functools.lru_cache(maxsize=4)
def tokenizer_of(model_path: str, lower: bool) -> SentencePieceTokenizer:
  """One tokenizer per worker process and model file."""
  return SentencePieceTokenizer(model_path, lower=lower)


def trimmed(features: Dict[str, Sequence]) -> Dict[str, np.ndarray]:
  """A row's LEFT-padded features `[L]` without their padding: compact
  arrays (int32 ids, float32 mask) of its real positions (input_mask 0),
  which are the last ones.

  Example:
    >>> f = trimmed({"input_ids": [0, 0, 7, 4, 3], "segment_ids": [4, 4, 0, 0, 2],
    ...              "input_mask": [1.0, 1.0, 0.0, 0.0, 0.0]})
    >>> f["input_ids"].tolist(), real_length(f)
    ([7, 4, 3], 3)
  """
  real = int(np.sum(np.asarray(features["input_mask"]) < 0.5))
  return {k: np.asarray(features[k][len(features[k]) - real:],
                        np.float32 if k == "input_mask" else np.int32)
          for k in FEATURES}


def real_length(features: Dict[str, np.ndarray]) -> int:
  """A `trimmed` row's positions."""
  return len(features["input_ids"])


_PAD = {"input_ids": 0, "segment_ids": SEG_ID_PAD, "input_mask": 1.0}


def left_padded(rows: Sequence[Dict[str, np.ndarray]], length: int,
                pad: Optional[Dict[str, Any]] = None
                ) -> Dict[str, np.ndarray]:
  """`trimmed` rows -> `[B, length]` arrays, each row LEFT padded as the
  model's features are (id 0, segment SEG_ID_PAD, mask 1); `pad` gives the
  padding value of other keys.

  Example:
    >>> f = trimmed({"input_ids": [0, 7, 3], "segment_ids": [4, 0, 2],
    ...              "input_mask": [1.0, 0.0, 0.0]})
    >>> left_padded([f], 4)["segment_ids"].tolist()
    [[4, 4, 0, 2]]
  """
  values = dict(_PAD, **(pad or {}))
  out = {}
  for key, value in values.items():
    if key not in rows[0]:
      continue
    first = np.asarray(rows[0][key])
    array = np.full([len(rows), length], value, first.dtype)
    for b, row in enumerate(rows):
      n = len(row[key])
      array[b, length - n:] = row[key]
    out[key] = array
  return out


def numpy_outputs(outputs: Dict[str, Any]) -> Dict[str, np.ndarray]:
  return {k: v.numpy() for k, v in outputs.items()}


class BatchKind:
  """The interface of a task's batch kind (see the module docstring).

  `meta` is the export marker's `batch` entry (model facts: its
  SentencePiece model, lower-casing, max_seq_length, labels, signature),
  `options` the job's own choices for this kind (e.g. layers), `name` the
  export kind it reads (`TaskSpec.batch_kind`)."""

  # Whether rows may hold a second text (`text_b`: classifier pairs).
  pairs = False
  # Whether CoNLL sentences (`fields["words"]`) are rows it reads.
  conll = False

  @classmethod
  def meta_problem(cls, meta: dict) -> Optional[str]:
    """Why an export's `batch` entry cannot be read by this kind (one
    line), or None."""
    del meta
    return None

  @classmethod
  def bfloat16_problem(cls, meta: dict) -> Optional[str]:
    """Why an export cannot run in bfloat16 (one line), or None. The
    engine rewrites the matmuls of a signature's graph; a model that reads
    long texts in a loop of windows keeps them in the loop's own function,
    out of the rewrite's reach."""
    del meta
    return None

  @classmethod
  def in_context(cls, meta: dict, rows: Iterable) -> Iterable:
    """One file's rows (`Row`s and `DeadRow`s, in file order, as the read
    step yields them) with whatever a row needs from the rows around it
    (the read step is the one place that sees a file's rows in order)."""
    del meta
    return rows

  def __init__(self, meta: dict, options: dict, spiece_model: str, *,
               name: str):
    self.meta, self.options, self.spiece_model = meta, options, spiece_model
    self.name = name

  @property
  def tokenizer(self) -> SentencePieceTokenizer:
    return tokenizer_of(self.spiece_model, bool(self.meta.get("lower")))

  @property
  def signature(self) -> str:
    return self.meta["signature"]

  def prepare(self, fields: dict) -> Prepared:
    raise NotImplementedError

  def units(self, prepared: Prepared) -> List[Prepared]:
    """What the model reads of one row, as units batched apart from each
    other (`Prepared(length, unit)`): by default the row itself; a kind
    that reads a long text's windows independently gives each window, so
    that it is batched with other windows of its length."""
    return [prepared]

  def infer(self, signature, payloads: List[Any]
            ) -> Tuple[List[Any], List[Padding]]:
    """One batch of units through `signature` (a loaded SavedModel
    signature): per unit payload, in order, its output and its
    `Padding`."""
    raise NotImplementedError

  def join(self, payloads: List[Any], outputs: List[Any]
           ) -> Tuple[Any, Any]:
    """A row's `(payload, output)` for `row` from its units' payloads and
    outputs, in the order `units` gave them."""
    return payloads[0], outputs[0]

  def row(self, fields: dict, payload: Any, output: Any) -> dict:
    raise NotImplementedError

  def example(self, key: Tuple[str, int], fields: dict, payload: Any,
              output: Any) -> bytes:
    """A tf.train.Example of the row, for kinds that write TFRecords."""
    raise NotImplementedError(f"a {self.name} export writes no TFRecords")
