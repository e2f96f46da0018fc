"""The language model: pretraining (`run_pretrain.py`) and the LM scripts,
which share `workflow.py`'s flags and loading rather than a fine-tuning
workflow; batch prediction embeds or scores (`batch_flags.py`)."""

from xlnet_tf.tasks.language_model import formats
from xlnet_tf.tasks.spec import TaskSpec

_PACKAGE = "xlnet_tf.tasks.language_model"
SPEC = TaskSpec.of_formats(formats, f"{_PACKAGE}.model:XLNetPretrainer",
                           batch_at=f"{_PACKAGE}.batch:LanguageModelBatch",
                           batch_flags=f"{_PACKAGE}.batch_flags")
SPECS = (SPEC,)
