"""Tasks: one package each (`<task>/`: model, serving, workflow and its
`TaskSpec` in spec.py; see `registry.py`), on what every task shares:

  base      TaskModel, XLNetTask (the loop's hooks), signature helpers
  pooling   SequenceSummary, LogitHead, PooledTaskModel (classification,
            multiple choice)
  segments  long documents as segments with memory (the graph loop)
  spec      TaskSpec; registry: every task's spec and the look-ups

  classification/        XLNetClassifier, XLNetRegressor (run_classifier.py)
  multiple_choice/       XLNetForMultipleChoice (run_race.py)
  squad/                 XLNetForQuestionAnswering (run_squad.py)
  token_classification/  XLNetForTokenClassification (run_ner.py)
  language_model/        XLNetPretrainer and the LM uses (run_pretrain.py,
                         run_embed/score/generate/infill.py)

The data side of a task lives in `data_utils/<task>/`. This module
re-exports the task models; it imports no workflow (the fine-tuning driver,
`xlnet_tf/finetuning`, imports `tasks.base`).
"""

from xlnet_tf.tasks.base import TaskModel, XLNetTask
from xlnet_tf.tasks.classification.model import (ClassifierTask,
                                                 XLNetClassifier,
                                                 XLNetRegressor,
                                                 classification_loss,
                                                 regression_loss)
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.tasks.language_model.model import (LMHead, PretrainTask,
                                                 XLNetPretrainer)
from xlnet_tf.tasks.multiple_choice.model import (MultipleChoiceTask,
                                                  XLNetForMultipleChoice)
from xlnet_tf.tasks.multiple_choice.serving import export_multiple_choice
from xlnet_tf.tasks.pooling import SUMMARY_TYPES, LogitHead, SequenceSummary
from xlnet_tf.tasks.squad.model import (SquadHead, SquadTask,
                                        XLNetForQuestionAnswering, squad_loss)
from xlnet_tf.tasks.squad.serving import export_squad
from xlnet_tf.tasks.token_classification.model import (
    TokenClassificationTask, XLNetForTokenClassification,
    token_classification_loss)
from xlnet_tf.tasks.token_classification.serving import (
    TokenClassifierServer, export_token_classifier)

__all__ = [
    "ClassifierTask", "LMHead", "LogitHead", "MultipleChoiceTask",
    "PretrainTask", "SUMMARY_TYPES", "SequenceSummary", "SquadHead",
    "SquadTask", "TaskModel", "TokenClassificationTask",
    "TokenClassifierServer", "XLNetClassifier",
    "XLNetForMultipleChoice", "XLNetForQuestionAnswering",
    "XLNetForTokenClassification", "XLNetPretrainer", "XLNetRegressor",
    "XLNetTask", "classification_loss", "export_classifier",
    "export_multiple_choice", "export_squad", "export_token_classifier",
    "regression_loss", "squad_loss", "token_classification_loss",
]
