"""The root modules that moved into `xlnet_tf/export/` stay importable from
their old paths: each re-exports the new module's public names (the same
objects) and warns once, with a DeprecationWarning at the importing line.
`xlnet_tf.export_layout` moved without an alias: only the fine-tuning driver
used it."""

import importlib
import sys
import warnings

import pytest

MOVED = [("xlnet_tf.export_dir", "xlnet_tf.export.directory"),
         ("xlnet_tf.tflite", "xlnet_tf.export.tflite"),
         ("xlnet_tf.saved_model_cli", "xlnet_tf.export.saved_model_cli"),
         # Not an export module, but moved the same way (issue 29).
         ("xlnet_tf.ner_metrics",
          "xlnet_tf.tasks.token_classification.metrics")]


def _public(module):
  """Names `module` defines (not imports) for its users."""
  return {name for name, value in vars(module).items()
          if not name.startswith("_") and (
              name.isupper() or
              getattr(value, "__module__", None) == module.__name__)}


@pytest.mark.parametrize("old,new", MOVED, ids=[m[0] for m in MOVED])
def test_old_path_warns_once_and_is_the_new_module(old, new):
  sys.modules.pop(old, None)
  with pytest.warns(DeprecationWarning) as record:
    __import__(old)  # as `import <old>` does: no importlib frame between
  assert [str(w.message) for w in record] == [
      f"{old} is deprecated; import {new}"]
  assert record[0].filename == __file__  # the importing line is named
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    __import__(old)  # imported already: no second warning
  alias, target = sys.modules[old], importlib.import_module(new)
  names = _public(target)
  assert names and names <= set(vars(alias))
  assert all(getattr(alias, n) is getattr(target, n) for n in names)
