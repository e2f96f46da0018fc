"""RACE features: where the multiple-choice layout is built.

As the original `run_race.py`: for each of the `N_CHOICE` options one row
`context <sep> qa <sep> <cls>`, where qa is the question with its "_"
replaced by the option (cloze) or "question option" (`reader.qa_text`);
qa keeps its LAST `max_qa_length` tokens; the context is cut to fit
`max_seq_length`; LEFT padding and segment ids as the classifier
(SEG_ID_A 0 context and its <sep>, SEG_ID_B 1 qa and its <sep>, SEG_ID_CLS
2, SEG_ID_PAD 4). The rows are concatenated, choice-major:
  input_ids    [N_CHOICE * L] int    row c is [c * L, (c + 1) * L)
  input_mask   [N_CHOICE * L] float  1 = padding
  segment_ids  [N_CHOICE * L] int
  label        []             int    index of the right option
and written as classifier records (`data_utils/classification/records.py`,
record length `N_CHOICE * max_seq_length`); the multiple-choice model cuts
them back into `N_CHOICE` rows of `L`.

The original builds the rows from one shared context list when the context
is not cut, so each later option also carries the earlier options' tokens
(its issue #204). Each row starts from a fresh copy here;
`original_context_aliasing=True` reproduces the original.
"""

from __future__ import annotations

from typing import Callable, List

from data_utils.race.reader import RaceExample
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)


def race_features(example: RaceExample, encode: Callable[[str], List[int]],
                  max_seq_length: int, max_qa_length: int,
                  original_context_aliasing: bool = False) -> dict:
  """The `N_CHOICE` rows, concatenated (see the module docstring)."""
  context = encode(example.context)
  ids, mask, segs = [], [], []
  for qa in example.qa_list:
    tokens_qa = encode(qa)[-max_qa_length:]
    budget = max_seq_length - 3 - len(tokens_qa)
    if len(context) > budget:
      tokens = context[:budget]
    elif original_context_aliasing:
      tokens = context   # the original's shared list: appends leak forward
    else:
      tokens = list(context)
    row_segs = [SEG_ID_A] * len(tokens) + [SEG_ID_A]
    tokens.append(SEP_ID)
    tokens.extend(tokens_qa)
    row_segs += [SEG_ID_B] * len(tokens_qa) + [SEG_ID_B, SEG_ID_CLS]
    tokens.extend([SEP_ID, CLS_ID])
    pad = max_seq_length - len(tokens)
    ids += [0] * pad + tokens
    mask += [1.0] * pad + [0.0] * len(tokens)
    segs += [SEG_ID_PAD] * pad + row_segs
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segs,
          "label": example.label}
