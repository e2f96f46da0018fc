"""Classification features, exactly as the original classifier builds them:

  `A <sep> B <sep> <cls>` (or `A <sep> <cls>`), longest-first truncation,
  LEFT padding with id 0 to `max_seq_length`:
  input_ids    [L] int    token ids, pad id 0
  segment_ids  [L] int    SEG_ID_A (0: A and its <sep>), SEG_ID_B (1: B and
                          its <sep>), SEG_ID_CLS (2), SEG_ID_PAD (4: padding)
  input_mask   [L] float  1 = padding, 0 = real token
  label        []  int    class id, or float score (regression)

Long documents (`convert_document`, `--max_segments=N > 1`): the record holds
N consecutive segments of S = max_seq_length tokens (L = N*S) that the model
reads in order with memory. The layout is the one above with max_seq_length
L, LEFT padded, so the last segment carries `<sep> <cls>` and a short
document's leading segments are all padding (fully masked). A single text
keeps its first L-2 pieces (last with `keep_end`); a pair keeps at most S-3
pieces of B (its first), so B, its <sep> and <cls> lie in the last segment,
and A fills the rest (first or, with `keep_end`, last pieces).
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


def _layout(tokens_a: List[int], tokens_b: Optional[List[int]],
            length: int) -> dict:
  # `A <sep> [B <sep>] <cls>` of texts already cut to fit, LEFT padded.
  ids = list(tokens_a) + [SEP_ID]
  segs = [SEG_ID_A] * (len(tokens_a) + 1)
  if tokens_b:
    ids += list(tokens_b) + [SEP_ID]
    segs += [SEG_ID_B] * (len(tokens_b) + 1)
  ids.append(CLS_ID)
  segs.append(SEG_ID_CLS)
  pad = length - len(ids)
  return {"input_ids": [0] * pad + ids,
          "segment_ids": [SEG_ID_PAD] * pad + segs,
          "input_mask": [1.0] * pad + [0.0] * len(ids)}


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
  return _layout(tokens_a, tokens_b, max_seq_length)


def kept_lengths(len_a: int, len_b: int, segment_length: int,
                 max_segments: int = 1):
  """(pieces of A, pieces of B) a record of `max_segments` segments of
  `segment_length` keeps (len_b 0: a single text). One segment: the
  original's truncation; more: B keeps at most S-3, A the rest of N*S-3
  (single text: N*S-2).

  Example:
    >>> kept_lengths(10, 3, 8), kept_lengths(10, 3, 5, 2)
    ((3, 2), (5, 2))
    >>> kept_lengths(9, 0, 4, 2), kept_lengths(9, 0, 4)
    ((6, 0), (2, 0))
  """
  total = segment_length * max_segments
  if not len_b:
    return min(len_a, total - 2), 0
  if max_segments == 1:
    return truncate_pair(len_a, len_b, segment_length - 3)
  keep_b = min(len_b, segment_length - 3)
  return min(len_a, total - 3 - keep_b), keep_b


def length_stats(len_a: int, len_b: int, segment_length: int,
                 max_segments: int = 1) -> dict:
  """Whether a text (pair) of `len_a` (+ `len_b`) pieces is longer than one
  segment (more than S-2 pieces, or S-3 for a pair) and whether the record
  of `max_segments` segments truncates it; 0/1 ints, summed over a split.

  Example:
    >>> length_stats(7, 0, 8, 2)
    {'longer_than_segment': 1, 'truncated': 0}
    >>> length_stats(20, 0, 8, 2)
    {'longer_than_segment': 1, 'truncated': 1}
  """
  room = segment_length - (3 if len_b else 2)
  kept = kept_lengths(len_a, len_b, segment_length, max_segments)
  return {"longer_than_segment": int(len_a + len_b > room),
          "truncated": int(kept != (len_a, len_b))}


def convert_document(tokens_a: List[int], tokens_b: Optional[List[int]],
                     segment_length: int, max_segments: int = 1,
                     keep_end: bool = False) -> dict:
  """Token ids -> the features of `max_segments` segments of
  `segment_length` (length L = N*S, LEFT padded; see the module docstring).
  One segment is `convert_example` exactly; `keep_end` (keep A's last
  pieces) needs more than one.

  Example:
    >>> convert_document([11, 12, 13, 14, 15], None, 4, 2)["input_ids"]
    [0, 11, 12, 13, 14, 15, 4, 3]
    >>> convert_document(list(range(11, 21)), None, 4, 2, True)["input_ids"]
    [15, 16, 17, 18, 19, 20, 4, 3]
    >>> f = convert_document([11, 12, 13, 14, 15, 16], [21, 22, 23], 5, 2)
    >>> f["input_ids"], f["segment_ids"]
    ([11, 12, 13, 14, 15, 4, 21, 22, 4, 3], [0, 0, 0, 0, 0, 0, 1, 1, 1, 2])
  """
  if max_segments == 1:
    if keep_end:
      raise ValueError("keep_end needs max_segments > 1")
    return convert_example(tokens_a, tokens_b, segment_length)
  keep_a, keep_b = kept_lengths(len(tokens_a), len(tokens_b or []),
                                segment_length, max_segments)
  tokens_a = tokens_a[len(tokens_a) - keep_a:] if keep_end \
      else tokens_a[:keep_a]
  return _layout(tokens_a, (tokens_b or [])[:keep_b],
                 segment_length * max_segments)


def example_features(example: InputExample, encode: Callable[[str], List[int]],
                     max_seq_length: int, labels, max_segments: int = 1,
                     keep_end: bool = False) -> dict:
  """Features of one example (`max_segments` segments of `max_seq_length`,
  see `convert_document`) with its label id (int) or score (float), and its
  `length_stats` (`longer_than_segment`, `truncated`: not written to the
  records, counted by `build_features`)."""
  tokens_a = encode(example.text_a)
  tokens_b = encode(example.text_b) if example.text_b else None
  features = convert_document(tokens_a, tokens_b, max_seq_length,
                              max_segments, keep_end)
  features.update(length_stats(len(tokens_a), len(tokens_b or []),
                               max_seq_length, max_segments))
  if labels is None:
    features["label"] = float(example.label or 0.0)
  else:
    features["label"] = labels.index(example.label) \
        if example.label is not None else 0
  return features
