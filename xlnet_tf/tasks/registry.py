"""Every task's `TaskSpec`, registered once (each task package's
`spec.py`), and the look-ups the tables of tasks use. Adding a task is
adding its package and one line here.

  >>> [spec.name for spec in TASKS]
  ['classification', 'regression', 'multiple_choice', 'squad', 'token_classification', 'lm']
  >>> task_spec("squad").hf_architecture
  'XLNetForQuestionAnswering'
"""

from __future__ import annotations

from typing import Dict, Tuple

from data_utils.deprecation import warn_renamed

from xlnet_tf.tasks.classification import spec as classification
from xlnet_tf.tasks.language_model import spec as language_model
from xlnet_tf.tasks.multiple_choice import spec as multiple_choice
from xlnet_tf.tasks.spec import TaskSpec
from xlnet_tf.tasks.squad import spec as squad
from xlnet_tf.tasks.token_classification import spec as token_classification

TASKS: Tuple[TaskSpec, ...] = (*classification.SPECS, *multiple_choice.SPECS,
                               *squad.SPECS, *token_classification.SPECS,
                               *language_model.SPECS)
_BY_NAME: Dict[str, TaskSpec] = {s.name: s for s in TASKS}
_ALIASES: Dict[str, TaskSpec] = {a: s for s in TASKS for a in s.aliases}
# The kinds of SavedModel the project writes (`export/directory.py`'s markers).
EXPORT_KINDS = tuple(dict.fromkeys(s.export_kind for s in TASKS
                                   if s.export_kind))


def task_names() -> Tuple[str, ...]:
  return tuple(_BY_NAME)


def task_spec(name: str) -> TaskSpec:
  """The spec named `name` (or an older alias, which warns once); a
  ValueError names the known ones."""
  if name in _BY_NAME:
    return _BY_NAME[name]
  if name in _ALIASES:
    spec = _ALIASES[name]
    warn_renamed(f"model kind {name!r}", repr(spec.name))
    return spec
  raise ValueError(f"unknown model {name!r}; use one of "
                   f"{', '.join(task_names())}")


def spec_of(obj) -> TaskSpec:
  """The spec of a task model object (the first whose class it is an
  instance of); a ValueError for anything else."""
  for spec in TASKS:
    if isinstance(obj, spec.model_class):
      return spec
  raise ValueError(f"{type(obj).__name__} is not a task model of "
                   f"{', '.join(task_names())}")


def specs_of_architecture(architecture: str) -> Tuple[TaskSpec, ...]:
  """The specs whose weights transformers holds as `architecture`."""
  return tuple(s for s in TASKS if s.hf_architecture == architecture)
