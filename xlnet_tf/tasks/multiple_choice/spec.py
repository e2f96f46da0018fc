"""Multiple choice (`run_race.py`)."""

from xlnet_tf.tasks.multiple_choice import formats
from xlnet_tf.tasks.spec import TaskSpec, workflow_fields

SPEC = TaskSpec.of_formats(
    formats, "xlnet_tf.tasks.multiple_choice.model:XLNetForMultipleChoice",
    **workflow_fields("xlnet_tf.tasks.multiple_choice.workflow",
                      "RaceOptions", "RaceWorkflow"))
SPECS = (SPEC,)
