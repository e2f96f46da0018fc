"""Every task's `TaskSpec`, registered once (each task package's
`spec.py`), and the look-ups the tables of tasks use. Adding a task is
adding its package and one line in PACKAGES. The specs are light (see
`spec.py`): importing this module loads no task.

  >>> [spec.name for spec in TASKS]
  ['classification', 'regression', 'multiple_choice', 'squad', 'token_classification', 'lm']
  >>> task_spec("squad").hf_architecture
  'XLNetForQuestionAnswering'
  >>> [s.name for s in specs_of_architecture("XLNetForSequenceClassification")]
  ['classification', 'regression']
"""

from __future__ import annotations

import importlib
from typing import Dict, Tuple

from xlnet_tf.tasks.spec import TaskSpec

# One line per task: its package under xlnet_tf/tasks/, whose spec.py holds
# its SPECS (light: loading them loads no task).
PACKAGES = ("classification", "multiple_choice", "squad",
            "token_classification", "language_model")
TASKS: Tuple[TaskSpec, ...] = tuple(
    spec for package in PACKAGES
    for spec in importlib.import_module(f"xlnet_tf.tasks.{package}.spec").SPECS)
_BY_NAME: Dict[str, TaskSpec] = {s.name: s for s in TASKS}


def task_names() -> Tuple[str, ...]:
  return tuple(_BY_NAME)


def task_spec(name: str) -> TaskSpec:
  """The spec named `name`; a ValueError names the known ones."""
  if name in _BY_NAME:
    return _BY_NAME[name]
  raise ValueError(f"unknown model {name!r}; use one of "
                   f"{', '.join(task_names())}")


def spec_of(obj) -> TaskSpec:
  """The spec of a task model object (the first whose class it is an
  instance of); a ValueError for anything else."""
  for spec in TASKS:
    if spec.is_class_of(obj):
      return spec
  raise ValueError(f"{type(obj).__name__} is not a task model of "
                   f"{', '.join(task_names())}")


def specs_of_architecture(architecture: str) -> Tuple[TaskSpec, ...]:
  """The specs whose weights transformers holds as `architecture` (the
  first one's `hf_head` decides which of them a config.json is)."""
  return tuple(s for s in TASKS if s.hf_architecture == architecture)


def batch_specs() -> Tuple[TaskSpec, ...]:
  """The specs whose exports batch prediction takes."""
  return tuple(s for s in TASKS if s.batch_at)
