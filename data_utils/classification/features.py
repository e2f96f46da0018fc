"""Classification features, exactly as the original classifier builds them:

  `A <sep> B <sep> <cls>` (or `A <sep> <cls>`), longest-first truncation,
  LEFT padding with id 0 to `max_seq_length`:
  input_ids    [L] int    token ids, pad id 0
  segment_ids  [L] int    SEG_ID_A (0: A and its <sep>), SEG_ID_B (1: B and
                          its <sep>), SEG_ID_CLS (2), SEG_ID_PAD (4: padding)
  input_mask   [L] float  1 = padding, 0 = real token
  label        []  int    class id, or float score (regression)
"""

from __future__ import annotations

from typing import Callable, List, Optional

from data_utils.classification.reader import InputExample
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)


def truncate_pair(len_a: int, len_b: int, budget: int):
  """Lengths kept by the original's longest-first truncation (pop from the
  longer, from B on ties) in closed form.

  Example:
    >>> truncate_pair(10, 3, 8), truncate_pair(5, 5, 7), truncate_pair(6, 10, 9)
    ((5, 3), (4, 3), (5, 4))
  """
  if len_a + len_b <= budget:
    return len_a, len_b
  if 2 * min(len_a, len_b) <= budget:  # the shorter one survives whole
    return ((len_a, budget - len_a) if len_a < len_b
            else (budget - len_b, len_b))
  return (budget + 1) // 2, budget // 2


def convert_example(tokens_a: List[int], tokens_b: Optional[List[int]],
                    max_seq_length: int) -> dict:
  """Token ids -> `input_ids`, `segment_ids` (int lists) and `input_mask`
  (float list, 1 = padding) of length `max_seq_length`, LEFT-padded.

  Example:
    >>> f = convert_example([11, 12], [13], 7)
    >>> f["input_ids"], f["segment_ids"]
    ([0, 11, 12, 4, 13, 4, 3], [4, 0, 0, 0, 1, 1, 2])
    >>> f["input_mask"]
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  """
  if tokens_b:
    keep_a, keep_b = truncate_pair(len(tokens_a), len(tokens_b),
                                   max_seq_length - 3)
    tokens_a, tokens_b = tokens_a[:keep_a], tokens_b[:keep_b]
  else:
    tokens_a = tokens_a[:max_seq_length - 2]
  ids = list(tokens_a) + [SEP_ID]
  segs = [SEG_ID_A] * (len(tokens_a) + 1)
  if tokens_b:
    ids += list(tokens_b) + [SEP_ID]
    segs += [SEG_ID_B] * (len(tokens_b) + 1)
  ids.append(CLS_ID)
  segs.append(SEG_ID_CLS)
  pad = max_seq_length - len(ids)
  return {"input_ids": [0] * pad + ids,
          "segment_ids": [SEG_ID_PAD] * pad + segs,
          "input_mask": [1.0] * pad + [0.0] * len(ids)}


def example_features(example: InputExample, encode: Callable[[str], List[int]],
                     max_seq_length: int, labels) -> dict:
  """Features of one example with its label id (int) or score (float)."""
  tokens_a = encode(example.text_a)
  tokens_b = encode(example.text_b) if example.text_b else None
  features = convert_example(tokens_a, tokens_b, max_seq_length)
  if labels is None:
    features["label"] = float(example.label or 0.0)
  else:
    features["label"] = labels.index(example.label) \
        if example.label is not None else 0
  return features
