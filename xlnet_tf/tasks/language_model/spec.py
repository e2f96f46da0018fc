"""The language model: pretraining (`run_pretrain.py`) and the LM scripts,
which share `workflow.py`'s flags and loading rather than a fine-tuning
workflow."""

from xlnet_tf.tasks.language_model.batch import LanguageModelBatch
from xlnet_tf.tasks.language_model.model import EXPORT_KIND, XLNetPretrainer
from xlnet_tf.tasks.language_model.serving import export_language_model
from xlnet_tf.tasks.spec import TaskSpec

SPEC = TaskSpec("lm", XLNetPretrainer, "XLNetLMHeadModel", EXPORT_KIND,
                export_language_model,
                scripts=("run_pretrain.py", "run_embed.py", "run_score.py",
                         "run_generate.py", "run_infill.py",
                         "run_batch_predict.py"),
                aliases=("language_model",), batch=LanguageModelBatch)
SPECS = (SPEC,)
