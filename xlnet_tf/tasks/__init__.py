"""Tasks: one package each (`<task>/`: model, serving, workflow, formats
and its `TaskSpec` in spec.py; see `registry.py`), on what every task
shares:

  base      TaskModel, XLNetTask (the loop's hooks), signature helpers
  pooling   SequenceSummary, LogitHead, PooledTaskModel (classification,
            multiple choice)
  losses    classification_loss (classification, multiple choice)
  segments  long documents as segments with memory (the graph loop)
  batch     what every batch-prediction kind shares (BatchKind)
  spec      TaskSpec; registry: every task's spec and the look-ups

  classification/        XLNetClassifier, XLNetRegressor (run_classifier.py)
  multiple_choice/       XLNetForMultipleChoice (run_race.py)
  squad/                 XLNetForQuestionAnswering (run_squad.py)
  token_classification/  XLNetForTokenClassification (run_ner.py)
  language_model/        XLNetPretrainer and the LM uses (run_pretrain.py,
                         run_embed/score/generate/infill.py)

The data side of a task lives in `data_utils/<task>/`. The names below are
this package's too (`from xlnet_tf.tasks import XLNetClassifier`), each
imported when first read (PEP 562): importing one task loads no other, and
a worker imports what it runs.
"""

from xlnet_tf.tasks.spec import load

# {module under xlnet_tf.tasks: the public names it holds}
_PUBLIC = {
    "base": ("TaskModel", "XLNetTask"),
    "pooling": ("SUMMARY_TYPES", "LogitHead", "SequenceSummary"),
    "classification.model": ("ClassifierTask", "XLNetClassifier",
                             "XLNetRegressor", "classification_loss",
                             "regression_loss"),
    "classification.serving": ("export_classifier",),
    "language_model.model": ("LMHead", "PretrainTask", "XLNetPretrainer"),
    "multiple_choice.model": ("MultipleChoiceTask", "XLNetForMultipleChoice"),
    "multiple_choice.serving": ("export_multiple_choice",),
    "squad.model": ("SquadHead", "SquadTask", "XLNetForQuestionAnswering",
                    "squad_loss"),
    "squad.serving": ("export_squad",),
    "token_classification.model": ("TokenClassificationTask",
                                   "XLNetForTokenClassification",
                                   "token_classification_loss"),
    "token_classification.serving": ("TokenClassifierServer",
                                     "export_token_classifier"),
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
  if name not in _HOME:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return load(f"{__name__}.{_HOME[name]}:{name}")


def __dir__():
  return sorted(set(globals()) | set(_HOME))
