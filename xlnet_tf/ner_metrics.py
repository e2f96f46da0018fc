"""Deprecated alias of `xlnet_tf.tasks.token_classification.metrics`
(conlleval's scores); importing it warns once. Kept for code that imported
it: the README named `xlnet_tf.ner_metrics.entity_metrics`."""

import warnings

from xlnet_tf.tasks.token_classification.metrics import (  # noqa: F401
    entity_metrics, majority_baseline_tags, majority_tags)

# Module code runs once per process: one warning, at the importing line.
warnings.warn("xlnet_tf.ner_metrics is deprecated; import "
              "xlnet_tf.tasks.token_classification.metrics",
              DeprecationWarning, stacklevel=2)
