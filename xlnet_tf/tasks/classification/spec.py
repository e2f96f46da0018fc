"""The classification and regression tasks (`run_classifier.py`): one
workflow, two model kinds."""

from xlnet_tf.tasks.classification.batch import ClassifierBatch
from xlnet_tf.tasks.classification.model import (CLASSIFIER_EXPORT_KIND,
                                                 REGRESSOR_EXPORT_KIND,
                                                 XLNetClassifier,
                                                 XLNetRegressor)
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.tasks.classification.workflow import (ClassifierOptions,
                                                    ClassifierWorkflow, run)
from xlnet_tf.tasks.spec import TaskSpec

_SCRIPT = dict(options=ClassifierOptions, workflow=ClassifierWorkflow,
               run=run, scripts=("run_classifier.py", "run_batch_predict.py"),
               batch=ClassifierBatch,
               export=export_classifier,
               hf_architecture="XLNetForSequenceClassification")
CLASSIFICATION = TaskSpec("classification", XLNetClassifier,
                          export_kind=CLASSIFIER_EXPORT_KIND, **_SCRIPT)
REGRESSION = TaskSpec("regression", XLNetRegressor,
                      export_kind=REGRESSOR_EXPORT_KIND, **_SCRIPT)
SPECS = (CLASSIFICATION, REGRESSION)
