"""Deprecated alias of `xlnet_tf.export.saved_model_cli`; importing it warns
once. Kept because the `xlnet-saved-model-cli` script of an install made
before the move imports `main` from here (reinstalling points it at the new
module)."""

import warnings

from xlnet_tf.export.saved_model_cli import (  # noqa: F401  (re-exported)
    CLI_PROGRAM, check_saved_model_cli_args, main)

# Module code runs once per process: one warning, at the importing line.
warnings.warn("xlnet_tf.saved_model_cli is deprecated; import "
              "xlnet_tf.export.saved_model_cli", DeprecationWarning,
              stacklevel=2)
