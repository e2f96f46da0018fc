"""Token classification, named entities (`run_ner.py`)."""

from xlnet_tf.tasks.spec import TaskSpec
from xlnet_tf.tasks.token_classification.batch import TokenClassifierBatch
from xlnet_tf.tasks.token_classification.model import (
    EXPORT_KIND, XLNetForTokenClassification)
from xlnet_tf.tasks.token_classification.serving import export_token_classifier
from xlnet_tf.tasks.token_classification.workflow import (NerOptions,
                                                          NerWorkflow, run)

SPEC = TaskSpec("token_classification", XLNetForTokenClassification,
                "XLNetForTokenClassification", EXPORT_KIND,
                export_token_classifier, NerOptions, NerWorkflow, run,
                ("run_ner.py", "run_batch_predict.py"),
                batch=TokenClassifierBatch)
SPECS = (SPEC,)
