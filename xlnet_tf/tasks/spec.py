"""`TaskSpec`: a task's identity, written once in its package
(`tasks/<task>/spec.py`) and read by every table of tasks: model kinds
(`pretrained.build_model`, the convert CLI's `--model`), HuggingFace
architectures (`pretrained`), SavedModel kinds (`export/directory.py`'s markers) and
the entry scripts (`registry.py` lists them all).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """name: the model kind (`build_model("classification", ...)`,
  `convert --model=classification`); aliases: older names still accepted
  (each warns once). model_class: the task model, built as
  `model_class(XLNetModel(config, options), **head)`. hf_architecture:
  transformers' class of its weights. export_kind: what its SavedModels'
  marker records (None: no SavedModel); export: the function that writes
  one. options, workflow, run: its script's options object, workflow class
  and `run(options)` (None: the task has no fine-tuning workflow). script:
  its entry script(s). batch: its batch-prediction kind
  (`tasks/batch.py`'s `BatchKind`; None: `run_batch_predict.py` does not
  take its exports)."""
  name: str
  model_class: type
  hf_architecture: str
  export_kind: Optional[str] = None
  export: Optional[Callable] = None
  options: Optional[type] = None
  workflow: Optional[type] = None
  run: Optional[Callable] = None
  scripts: Tuple[str, ...] = ()
  aliases: Tuple[str, ...] = ()
  batch: Optional[type] = None

  def head_arguments(self, head: dict) -> dict:
    """The entries of `head` that `model_class` takes (None: its default).

    >>> from xlnet_tf.tasks.language_model.spec import SPEC
    >>> SPEC.head_arguments({"tie_weight": False, "n_class": 3})
    {'tie_weight': False}
    """
    takes = _constructor_arguments(self.model_class)
    return {k: v for k, v in head.items() if k in takes and v is not None}

  def build(self, network, **head):
    """A fresh task model around `network` (an `XLNetModel`); `head` may
    hold other kinds' arguments too (ignored)."""
    return self.model_class(network, **self.head_arguments(head))


def _constructor_arguments(cls) -> set:
  """The named arguments `cls(network, ...)` takes: its own `__init__`'s
  and, while one passes `**kwargs` on, its project base classes' (Keras'
  own are left out)."""
  names = set()
  for klass in cls.__mro__:
    init = klass.__dict__.get("__init__")
    if init is None:
      continue
    if not klass.__module__.startswith("xlnet_tf."):
      break
    params = inspect.signature(init).parameters.values()
    names |= {p.name for p in params if p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self", "network"}
    if not any(p.kind == p.VAR_KEYWORD for p in params):
      break
  return names
