"""Token classification, named entities (`run_ner.py`)."""

from xlnet_tf.tasks.spec import TaskSpec, workflow_fields
from xlnet_tf.tasks.token_classification import formats

_PACKAGE = "xlnet_tf.tasks.token_classification"
SPEC = TaskSpec.of_formats(
    formats, f"{_PACKAGE}.model:XLNetForTokenClassification",
    batch_at=f"{_PACKAGE}.batch:TokenClassifierBatch",
    **workflow_fields(f"{_PACKAGE}.workflow", "NerOptions", "NerWorkflow"))
SPECS = (SPEC,)
