"""Tasks: one module each, holding its head, model (an injected
`XLNetModel` encoder plus the head), loss, `TrainTask` and SavedModel
signature. The data side of a task lives in `data_utils/`.

  base            TaskModel, XLNetTask (the loop's hooks for every task)
  pooling         SequenceSummary, LogitHead (classification, multiple choice)
  segments        long documents as segments with memory (the graph loop)
  classification  XLNetClassifier, XLNetRegressor, ClassifierTask
  classification_serving  export_classifier (features and raw-text signatures)
  multiple_choice XLNetForMultipleChoice, MultipleChoiceTask (RACE)
  squad           SquadHead, XLNetForQuestionAnswering, SquadTask
  pretraining     LMHead, XLNetPretrainer, PretrainTask
  token_classification  XLNetForTokenClassification,
                  TokenClassificationTask (named entities)
  token_serving   export_token_classifier, TokenClassifierServer (its
                  SavedModel, raw text in, tags and entities out)
"""

from xlnet_tf.tasks.base import TaskModel, XLNetTask
from xlnet_tf.tasks.classification import (ClassifierTask, XLNetClassifier,
                                           XLNetRegressor,
                                           classification_loss,
                                           regression_loss)
from xlnet_tf.tasks.classification_serving import export_classifier
from xlnet_tf.tasks.multiple_choice import (MultipleChoiceTask,
                                            XLNetForMultipleChoice,
                                            export_multiple_choice)
from xlnet_tf.tasks.pooling import SUMMARY_TYPES, LogitHead, SequenceSummary
from xlnet_tf.tasks.pretraining import LMHead, PretrainTask, XLNetPretrainer
from xlnet_tf.tasks.squad import (SquadHead, SquadTask,
                                  XLNetForQuestionAnswering, export_squad,
                                  squad_loss)
from xlnet_tf.tasks.token_classification import (
    TokenClassificationTask, XLNetForTokenClassification,
    token_classification_loss)
from xlnet_tf.tasks.token_serving import (TokenClassifierServer,
                                          export_token_classifier)

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
