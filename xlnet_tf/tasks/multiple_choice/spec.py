"""Multiple choice (`run_race.py`)."""

from xlnet_tf.tasks.multiple_choice.model import (EXPORT_KIND,
                                                  XLNetForMultipleChoice)
from xlnet_tf.tasks.multiple_choice.serving import export_multiple_choice
from xlnet_tf.tasks.multiple_choice.workflow import (RaceOptions,
                                                     RaceWorkflow, run)
from xlnet_tf.tasks.spec import TaskSpec

SPEC = TaskSpec("multiple_choice", XLNetForMultipleChoice,
                "XLNetForMultipleChoice", EXPORT_KIND, export_multiple_choice,
                RaceOptions, RaceWorkflow, run, ("run_race.py",))
SPECS = (SPEC,)
