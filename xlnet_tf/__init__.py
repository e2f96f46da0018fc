"""xlnet-tf: XLNet for TensorFlow 2 / Keras 2 (tf_keras), faithful to the
original TF1 code (zihangdai/xlnet).

Public API:
  XLNetConfig, RunOptions            config.py
  XLNetModel                         encoder.py
  SequenceSummary                    heads/summary.py
  XLNetClassifier, XLNetRegressor, XLNetForQuestionAnswering,
  XLNetForMultipleChoice, XLNetPretrainer            models/
  load_original_checkpoint, save_original_checkpoint, load_checkpoint
                                     checkpoint.py
"""

from xlnet_tf.checkpoint import (CheckpointError, LoadReport, load_checkpoint,
                                 load_native_checkpoint,
                                 load_original_checkpoint,
                                 save_native_checkpoint,
                                 save_original_checkpoint)
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.heads import SequenceSummary
from xlnet_tf.models import (XLNetClassifier, XLNetForMultipleChoice,
                             XLNetForQuestionAnswering, XLNetPretrainer,
                             XLNetRegressor)

__version__ = "0.1.0"

__all__ = [
    "CheckpointError", "ConfigError", "LoadReport", "RunOptions",
    "SequenceSummary", "XLNetClassifier", "XLNetConfig",
    "XLNetForMultipleChoice", "XLNetForQuestionAnswering", "XLNetModel",
    "XLNetPretrainer", "XLNetRegressor", "load_checkpoint",
    "load_native_checkpoint", "load_original_checkpoint",
    "save_native_checkpoint", "save_original_checkpoint",
]
