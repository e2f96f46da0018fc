"""Task models: encoder + head (+ loss)."""

from xlnet_tf.models.base import TaskModel
from xlnet_tf.models.classifier import (XLNetClassifier, XLNetRegressor,
                                        classification_loss, regression_loss)
from xlnet_tf.models.pretrainer import XLNetPretrainer
from xlnet_tf.models.race import XLNetForMultipleChoice
from xlnet_tf.models.squad import XLNetForQuestionAnswering, squad_loss

__all__ = ["TaskModel", "XLNetClassifier", "XLNetRegressor",
           "XLNetPretrainer", "XLNetForMultipleChoice",
           "XLNetForQuestionAnswering", "classification_loss",
           "regression_loss", "squad_loss"]
