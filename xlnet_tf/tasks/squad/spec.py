"""Span extraction (`run_squad.py`)."""

from xlnet_tf.tasks.spec import TaskSpec, workflow_fields
from xlnet_tf.tasks.squad import formats

SPEC = TaskSpec.of_formats(
    formats, "xlnet_tf.tasks.squad.model:XLNetForQuestionAnswering",
    **workflow_fields("xlnet_tf.tasks.squad.workflow", "SquadOptions",
                      "SquadWorkflow"))
SPECS = (SPEC,)
