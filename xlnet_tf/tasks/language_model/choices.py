"""What a user picks of a language model's states, checked in one place
for `Embedder`, `run_embed.py` and batch prediction (`batch_flags.py`):
layers by index and poolings by name (see `embeddings.py`)."""

from __future__ import annotations

import re
from typing import Iterable, Sequence, Tuple, Union

from data_utils.errors import UsageError

POOLINGS = ("last", "first", "mean", "attn", "masked_mean")
# What the `embed_text` / `embed_ids` signatures pool (attn needs a trained
# summary).
SIGNATURE_POOLINGS = ("last", "first", "mean", "masked_mean")


def layer_indices(layers: Sequence[Union[int, str]], n_layer: int
                  ) -> Tuple[int, ...]:
  """Layer indices in [0, n_layer] of `layers` (integers, or their text as
  a flag gives them; negative ones count from the end: -1 is n_layer);
  ValueError (one line) for any other, or for none.

  Example:
    >>> layer_indices([-1, 0, "-2"], 12)
    (12, 0, 11)
  """
  out = []
  for layer in layers:
    text = str(layer).strip()
    if not (re.fullmatch(r"-?\d+", text) and
            -(n_layer + 1) <= int(text) <= n_layer):
      raise ValueError(f"layer {layer}: the model has layers 0 (embeddings) "
                       f"to {n_layer} (-1 = {n_layer})")
    out.append(int(text) % (n_layer + 1))
  if not out:
    raise ValueError("no layer chosen")
  return tuple(out)


def pooling_names(names: Iterable[str], known: Sequence[str] = POOLINGS
                  ) -> Tuple[str, ...]:
  """`names` once each, in order; ValueError (one line) for one not in
  `known`.

  Example:
    >>> pooling_names(["last", "mean", "last"])
    ('last', 'mean')
  """
  chosen = tuple(dict.fromkeys(names))
  for name in chosen:
    if name not in known:
      raise ValueError(f"unknown pooling {name!r}; use {', '.join(known)}")
  return chosen


def flag_choices(layers: Sequence[str], pooling: Sequence[str], n_layer: int,
                 known: Sequence[str] = POOLINGS
                 ) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
  """The `--layers` and `--pooling` flags' values checked: (layer indices,
  poolings); a one-line UsageError names the flag and its value.

  Example:
    >>> flag_choices(["-1"], ["mean", "mean"], 2)
    ((2,), ('mean',))
    >>> flag_choices(["3"], ["mean"], 2)
    Traceback (most recent call last):
    ...
    data_utils.errors.UsageError: --layers=3: layer 3: the model has layers 0 (embeddings) to 2 (-1 = 2)
  """
  try:
    indices = layer_indices(layers, n_layer)
  except ValueError as e:
    raise UsageError(f"--layers={','.join(layers)}: {e}") from None
  try:
    names = pooling_names(pooling, known)
  except ValueError as e:
    raise UsageError(f"--pooling={','.join(pooling)}: {e}") from None
  return indices, names
