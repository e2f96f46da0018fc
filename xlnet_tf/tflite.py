"""Deprecated alias of `xlnet_tf.export.tflite` (features export -> TFLite,
`TFLiteModel`); importing it warns once. Kept for code that imported it."""

import warnings

from xlnet_tf.export.tflite import (  # noqa: F401  (re-exported)
    SIGNATURE, TFLITE_VARIANTS, TFLiteModel, convert_features_export)

# Module code runs once per process: one warning, at the importing line.
warnings.warn("xlnet_tf.tflite is deprecated; import xlnet_tf.export.tflite",
              DeprecationWarning, stacklevel=2)
