"""The exports of a fine-tuned model, versioned as TF Serving reads them.

  <export_dir>/
    xlnet_tf_export.json  the root's marker: {"layout": "versioned", kind}
    features/<step>/      SavedModel, `serving_default` on features: plain
                          TensorFlow ops only (stock saved_model_cli, TF
                          Serving, tf.saved_model.load, the TFLite converter)
    text/<step>/          SavedModel, the same signatures plus the raw-text
                          ones, with the in-graph tokenizer: needs `import
                          tensorflow_text` (or a TF Serving with TF Text ops)
    tflite/<step>/        float32.tflite, int8.tflite (`--export_tflite`):
                          the features model, as is and with dynamic-range
                          int8 weights

`features` and `text` are each a TF Serving model base path
(`--model_base_path=<export_dir>/features`). `<step>` is the global step of
the exported checkpoint: a later run adds a version beside the earlier ones
(TF Serving serves the newest); the same step is replaced. Every version
directory is written by `directory.write_atomically` (its own marker, a
temp directory moved into place, ordinary permissions; in a bucket, uploaded
with its marker last).
"""

from __future__ import annotations

import os
from typing import Dict, Optional

from absl import logging

from data_utils import paths
from data_utils.atomic import TEMP_PREFIX, write_json
from data_utils.errors import UsageError, UserError
from xlnet_tf.export.directory import (EXPORT_MARKER, EXPORT_TEMP_PREFIX,
                                       check_export_dir, check_export_target,
                                       check_marker_kind, real_path,
                                       unmarked, write_atomically)
from xlnet_tf.export.tflite import TFLITE_VARIANTS, convert_features_export
from xlnet_tf.version import __version__

SERVABLES = ("features", "text", "tflite")
LAYOUT = "versioned"


def version_dir(export_dir: str, servable: str, step: int) -> str:
  """Where version `step` of `servable` goes.

    >>> version_dir("out/sm", "features", 1000)
    'out/sm/features/1000'
  """
  if servable not in SERVABLES:
    raise ValueError(f"unknown servable {servable!r}")
  return paths.join(export_dir, servable, str(int(step)))


def check_export_root(export_dir: str, export_kind: str,
                      flag: str = "export_dir",
                      keep: Optional[Dict[str, str]] = None,
                      model_dir: Optional[str] = None) -> None:
  """A one-line UserError naming `--flag` unless the versioned exports of
  `export_kind` may go to `export_dir`: a path that does not exist yet, an empty
  directory, or a root this layout wrote for `export_kind` holding only its
  servables, each only versions of `export_kind` (and temp directories of
  exports). `keep` and `model_dir` as `check_export_dir`. Writes nothing.
  """
  names = check_export_target(export_dir, export_kind, flag, keep, model_dir)
  names = [n for n in names or [] if not n.startswith(TEMP_PREFIX)]
  if not names:
    return
  real = real_path(export_dir)
  where = f"--{flag}={export_dir}"
  if EXPORT_MARKER not in names:
    raise unmarked(where, export_kind, names)
  marker = check_marker_kind(real, export_kind, where)
  if marker.get("layout") != LAYOUT:
    raise UserError(
        f"{where}: holds an xlnet-tf {export_kind} export in the unversioned "
        "layout of earlier versions; move it aside or choose another "
        "directory")
  extra = sorted(set(names) - set(SERVABLES) - {EXPORT_MARKER})
  if extra:
    raise UserError(
        f"{where}: holds files the export did not write ("
        f"{', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); move "
        "them out or choose another directory")
  for servable in sorted(set(names) & set(SERVABLES)):
    base = paths.join(export_dir, servable)
    if not paths.isdir(base):
      raise UserError(f"{where}: {servable} is not a directory; move it out "
                      "or choose another directory")
    for version in paths.listdir(base):
      if version.startswith(EXPORT_TEMP_PREFIX):
        continue  # an interrupted export's; the next export removes it
      if not version.isdigit():
        raise UserError(
            f"{where}: {servable}/{version} is not a version the export "
            "wrote; move it out or choose another directory")
      check_export_dir(paths.join(base, version), export_kind, flag)
  if not paths.is_remote(real) and not os.access(real, os.W_OK | os.X_OK):
    raise UsageError(f"{where}: is not writable")


def prepare_export_root(export_dir: str, export_kind: str) -> None:
  """Checks `export_dir` (`check_export_root`) and gives it its marker."""
  check_export_root(export_dir, export_kind)
  if not paths.exists(paths.join(export_dir, EXPORT_MARKER)):
    write_json(paths.join(export_dir, EXPORT_MARKER),
               {"layout": LAYOUT, "kind": export_kind,
                "servables": list(SERVABLES),
                "xlnet_tf_version": __version__})


def write_tflite(features_dir: str, tflite_dir: str, export_kind: str) -> str:
  """The features SavedModel at `features_dir` as `<variant>.tflite` for
  every `TFLITE_VARIANTS`, written to `tflite_dir` as one export of `export_kind`
  (both converted before anything is written). Returns `tflite_dir`."""
  check_export_dir(tflite_dir, export_kind)
  models = {}
  for variant in TFLITE_VARIANTS:
    logging.info("converting %s to TFLite (%s)", features_dir, variant)
    models[variant] = convert_features_export(features_dir, variant)

  def write(tmp):
    for variant, flatbuffer in models.items():
      with open(os.path.join(tmp, f"{variant}.tflite"), "wb") as f:
        f.write(flatbuffer)
  return write_atomically(tflite_dir, export_kind, write,
                          variants=list(TFLITE_VARIANTS),
                          source=os.path.basename(features_dir))
