"""`TaskSpec`: a task's identity, written once in its package
(`tasks/<task>/spec.py`) and read by every table of tasks: model kinds
(`pretrained.build_model`, the convert CLI's `--model`), the HuggingFace
format (`io/hf_config.py`, `io/hf_names.py`), the original's checkpoints
(`convert.py`), SavedModel kinds (`export/directory.py`'s markers), batch
prediction (`run_batch_predict.py`) and the entry scripts (`registry.py`
lists them all).

A spec is light: what it names in its package's heavy modules (the model
class, the workflow, the batch kind) it names as "module:attribute"
strings, imported when first read, so that the registry imports every spec
without loading any task.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Callable, Optional, Tuple

# An HF weight-name rule of a head: (original name pattern, HF name
# template, transpose). `re.fullmatch` of the pattern, `match.expand` of
# the template; Dense kernels are [in, out] in TF and [out, in] in torch.
NameRule = Tuple[str, str, bool]


def load(where: str):
  """The object `where` ("module:attribute", or "module") names, imported on
  first use.

  >>> load("xlnet_tf.tasks.spec:load") is load
  True
  """
  module, _, attribute = where.partition(":")
  found = importlib.import_module(module)
  return getattr(found, attribute) if attribute else found


class _Loaded:
  """A spec's attribute that reads as the object its "module:attribute"
  field names (None: the field is None)."""

  def __init__(self, field: str):
    self.field = field

  def __get__(self, spec, owner=None):
    if spec is None:
      return self
    where = getattr(spec, self.field)
    return load(where) if where else None


def workflow_fields(module: str, options: str, workflow: str) -> dict:
  """The `TaskSpec` fields of a fine-tuning workflow: `module`'s options
  class `options`, workflow class `workflow` and its `run`."""
  return dict(options_at=f"{module}:{options}",
              workflow_at=f"{module}:{workflow}", run_at=f"{module}:run")


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """name: the model kind (`build_model("classification", ...)`,
  `convert --model=classification`). model_at: the task model
  ("module:Class"), built as `model_class(XLNetModel(config, options),
  **head)`.

  HF format: hf_architecture, transformers' class of its weights (kinds may
  share one); hf_head(data, source, notes) -> (kind, head arguments), the
  head of an HF config.json of that architecture (one-line ConfigError for
  what cannot be represented; notes get what maps with a caveat);
  hf_fields(head) -> the config.json entries of a head (`head_config()`
  plus `labels`; CheckpointError for what HF cannot hold); hf_names: the
  head's weight names (`NameRule`s, the encoder's are `io/hf_names.py`'s).

  Original checkpoints: original_head, the variable whose presence says a
  checkpoint holds this head, with `{}` for the task name of a scoped head
  (`model/classification_{}/logit/bias`).

  export_kind: what its SavedModels' marker records (None: no SavedModel).
  options_at, workflow_at, run_at: its script's options object, workflow
  class and `run(options)` (None: the task has no fine-tuning workflow).
  batch_at: its batch-prediction kind (`tasks/batch.py`'s `BatchKind`;
  None: `run_batch_predict.py` does not take its exports); batch_flags: the
  module of the flags only that kind takes (`define_flags()` -> their names,
  `options(flags, kind, meta)` -> the kind's options, `refuse(flags, kind)`
  for another kind's export; None: it takes none)."""
  name: str
  model_at: str
  hf_architecture: str
  hf_head: Callable[[dict, str, list], Tuple[str, dict]]
  hf_fields: Callable[[dict], dict]
  hf_names: Tuple[NameRule, ...]
  original_head: str
  export_kind: Optional[str] = None
  options_at: Optional[str] = None
  workflow_at: Optional[str] = None
  run_at: Optional[str] = None
  batch_at: Optional[str] = None
  batch_flags: Optional[str] = None

  # The objects the `*_at` fields name, imported when first read.
  model_class = _Loaded("model_at")
  options = _Loaded("options_at")
  workflow = _Loaded("workflow_at")
  run = _Loaded("run_at")
  batch = _Loaded("batch_at")  # the batch kind's class (`BatchKind`)

  @classmethod
  def of_formats(cls, formats, model_at: str, **fields) -> "TaskSpec":
    """The spec of a task package's `formats` module (its KIND,
    HF_ARCHITECTURE, hf_head, hf_fields, HF_NAMES, ORIGINAL_HEAD and
    EXPORT_KIND) and `fields`."""
    return cls(formats.KIND, model_at, formats.HF_ARCHITECTURE,
               formats.hf_head, formats.hf_fields, formats.HF_NAMES,
               formats.ORIGINAL_HEAD, formats.EXPORT_KIND, **fields)

  def batch_kind(self, meta: dict, options: dict, spiece_model: str):
    """The batch kind of an export of this task, named by its export kind."""
    return self.batch(meta, options, spiece_model, name=self.export_kind)

  @property
  def scoped(self) -> bool:
    """Whether its head's original names carry the task's name."""
    return "{}" in self.original_head

  def is_class_of(self, obj) -> bool:
    """Whether `obj` is an instance of `model_class`, read from its
    classes' names (no task module is imported to tell)."""
    return self.model_at in {f"{k.__module__}:{k.__qualname__}"
                             for k in type(obj).__mro__}

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
