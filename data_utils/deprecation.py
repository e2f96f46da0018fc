"""Renamed public names: the old one keeps working and warns once per
process (one `DeprecationWarning` per old name, however often it is used).

Here rather than in `xlnet_tf` because `data_utils` sits below it: both
packages' renamed keywords go through these two functions.
"""

from __future__ import annotations

import warnings

_WARNED = set()  # the old names already warned about in this process


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
  """One `DeprecationWarning` per process for the old name `old` (e.g.
  `"XLNetModel.call(output_rows=)"`), naming its replacement `new`.
  `stacklevel` 3 points at the caller of the function that calls this."""
  if old in _WARNED:
    return
  _WARNED.add(old)
  warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning,
                stacklevel=stacklevel)


def renamed_keyword(where: str, old: str, new: str, old_value, new_value,
                    default=None):
  """The value of keyword `new`, or of its old name `old` when that one was
  given (not None; warns once). Both given (the new one not its `default`,
  compared by identity: None, False, ...) is a TypeError.

  Example:
    >>> renamed_keyword("f", "rows", "positions", None, [3])
    [3]
    >>> renamed_keyword("f", "rows", "positions", [1], [3])
    Traceback (most recent call last):
    ...
    TypeError: f: rows= (deprecated) and positions= both given; use positions=
  """
  if old_value is None:
    return new_value
  if new_value is not default:
    raise TypeError(f"{where}: {old}= (deprecated) and {new}= both given; "
                    f"use {new}=")
  warn_renamed(f"{where}({old}=)", f"{new}=", stacklevel=4)
  return old_value
