"""Span extraction (`run_squad.py`). Its model kind was called `qa`."""

from xlnet_tf.tasks.spec import TaskSpec
from xlnet_tf.tasks.squad.model import EXPORT_KIND, XLNetForQuestionAnswering
from xlnet_tf.tasks.squad.serving import export_squad
from xlnet_tf.tasks.squad.workflow import SquadOptions, SquadWorkflow, run

SPEC = TaskSpec("squad", XLNetForQuestionAnswering,
                "XLNetForQuestionAnswering", EXPORT_KIND, export_squad,
                SquadOptions, SquadWorkflow, run, ("run_squad.py",),
                aliases=("qa",))
SPECS = (SPEC,)
