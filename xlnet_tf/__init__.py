"""xlnet-tf: XLNet for TensorFlow 2 / Keras 2 (tf_keras), faithful to the
original TF1 code (zihangdai/xlnet).

Public API:
  XLNetConfig, RunOptions            config.py
  XLNetModel                         encoder.py
  SequenceSummary                    tasks/pooling.py
  XLNetClassifier, XLNetRegressor, XLNetForQuestionAnswering,
  XLNetForMultipleChoice, XLNetForTokenClassification,
  XLNetPretrainer                                    tasks/ (one module each)
  load_original_checkpoint, save_original_checkpoint, load_checkpoint
                                     io/
"""

import importlib

import data_utils  # noqa: F401 (first: it keeps Keras 3 out, see there)
import tf_keras as keras

from xlnet_tf.io import (CheckpointError, LoadReport, load_checkpoint,
                         load_native_checkpoint, load_original_checkpoint,
                         save_native_checkpoint, save_original_checkpoint)
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.version import __version__

# The task models, imported when first read (PEP 562): `import xlnet_tf`
# loads no task, and a worker loads only the task it runs.
_TASK_NAMES = ("SequenceSummary", "XLNetClassifier", "XLNetForMultipleChoice",
               "XLNetForQuestionAnswering", "XLNetForTokenClassification",
               "XLNetPretrainer", "XLNetRegressor")

__all__ = [
    "CheckpointError", "ConfigError", "LoadReport", "RunOptions",
    "SequenceSummary", "XLNetClassifier", "XLNetConfig",
    "XLNetForMultipleChoice", "XLNetForQuestionAnswering",
    "XLNetForTokenClassification", "XLNetModel", "XLNetPretrainer",
    "XLNetRegressor", "load_checkpoint",
    "load_native_checkpoint", "load_original_checkpoint",
    "save_native_checkpoint", "save_original_checkpoint",
]


def __getattr__(name: str):
  if name not in _TASK_NAMES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return getattr(importlib.import_module("xlnet_tf.tasks"), name)


def __dir__():
  return sorted(set(globals()) | set(_TASK_NAMES))


def _stand_in(name: str) -> type:
  """What Keras' registry holds for the lazily imported class `name` until
  its module loads (the class then registers itself over it): deserializing
  one imports the class and builds that, so a saved task model loads after
  a bare `import xlnet_tf`, as it did when every task was imported."""

  def from_config(cls, config):
    del cls
    return __getattr__(name).from_config(config)

  return type(name, (), {"from_config": classmethod(from_config)})


for _name in _TASK_NAMES:  # every one registered as "xlnet_tf>ClassName"
  keras.saving.get_custom_objects().setdefault(f"xlnet_tf>{_name}",
                                               _stand_in(_name))
