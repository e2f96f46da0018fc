"""Deprecated alias of `xlnet_tf.export.directory` (where an export may go,
the atomic swap); importing it warns once. Kept for code that imported it."""

import warnings

from xlnet_tf.export.directory import (  # noqa: F401  (re-exported)
    EXPORT_MARKER, EXPORT_TEMP_PREFIX, LEGACY_TEMP_AGE, MARKER_FORMAT,
    PARTIAL, check_export_dir, check_export_target, check_marker_kind,
    read_export_marker, real_path, remove_stale_export_temps,
    save_atomically, unmarked, write_atomically)

# Module code runs once per process: one warning, at the importing line.
warnings.warn("xlnet_tf.export_dir is deprecated; import "
              "xlnet_tf.export.directory", DeprecationWarning, stacklevel=2)
