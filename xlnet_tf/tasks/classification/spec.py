"""The classification and regression tasks (`run_classifier.py`): one
workflow, two model kinds."""

from xlnet_tf.tasks.classification import formats
from xlnet_tf.tasks.spec import TaskSpec, workflow_fields

_PACKAGE = "xlnet_tf.tasks.classification"
_SHARED = dict(hf_architecture=formats.HF_ARCHITECTURE,
               hf_head=formats.hf_head, hf_fields=formats.hf_fields,
               hf_names=formats.HF_NAMES,
               batch_at=f"{_PACKAGE}.batch:ClassifierBatch",
               **workflow_fields(f"{_PACKAGE}.workflow", "ClassifierOptions",
                                 "ClassifierWorkflow"))
CLASSIFICATION = TaskSpec(
    formats.CLASSIFICATION, f"{_PACKAGE}.model:XLNetClassifier",
    original_head=formats.ORIGINAL_HEADS[formats.CLASSIFICATION],
    export_kind=formats.CLASSIFIER_EXPORT_KIND, **_SHARED)
REGRESSION = TaskSpec(
    formats.REGRESSION, f"{_PACKAGE}.model:XLNetRegressor",
    original_head=formats.ORIGINAL_HEADS[formats.REGRESSION],
    export_kind=formats.REGRESSOR_EXPORT_KIND, **_SHARED)
SPECS = (CLASSIFICATION, REGRESSION)
