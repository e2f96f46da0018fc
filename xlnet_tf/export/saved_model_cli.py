"""`xlnet-saved-model-cli`: TensorFlow's `saved_model_cli` with TF Text's
ops registered (the raw-text signatures use them, and a process can only load
them after `import tensorflow_text`), and its arguments checked against the
SavedModel first: a missing directory, an unknown tag-set or signature, a bad
input key, literal or shape is one line with exit code 2, not a traceback.
"""

from __future__ import annotations

import ast
import copy
import importlib
import itertools
import os
import sys
from typing import List, Optional

import numpy as np
import tensorflow as tf
from absl import flags

from data_utils import paths
from data_utils.errors import UsageError, UserError, one_line, run_main
from data_utils.path_checks import check_store, tf_path

CLI_PROGRAM = "xlnet-saved-model-cli"
_HELP = {"-h", "--help", "-help", "--helpfull", "-helpfull", "--helpshort",
         "-helpshort"}
# The flags of TF's saved_model_cli this wrapper checks before delegating.
_CLI_CHECKED = ("dir", "tag_set", "signature_def", "inputs", "input_exprs",
                "input_examples")


def _cli_flag_values(argv: List[str], cli_module):
  """Parses `argv` with a private copy of TF's saved_model_cli flags (the
  global ones stay unparsed for TF's own run); returns (command, values)."""
  own = flags.FlagValues()
  for flag in flags.FLAGS.get_flags_for_module(cli_module.__name__):
    own[flag.name] = copy.deepcopy(flag)
  try:
    rest = own(argv, known_only=True)
  except flags.Error as e:
    raise UsageError(one_line(e)) from e
  for arg in itertools.takewhile(lambda a: a != "--", rest[1:]):
    name = arg.lstrip("-").split("=")[0]
    # absl's own flags (--v, --logtostderr) are TF's run's; any other is
    # an error absl's app.run would exit 1 on.
    if (arg.startswith("-") and arg.split("=")[0] not in _HELP
        and name not in flags.FLAGS
        and not (name.startswith("no") and name[2:] in flags.FLAGS)):
      raise UsageError(f"Unknown command line flag '{name}'")
  command = next((a for a in rest[1:] if not a.startswith("-")), None)
  return command, {name: own[name].value for name in _CLI_CHECKED}


def _shape_text(dims) -> str:
  return "[" + ", ".join("None" if d is None or d < 0 else str(d)
                         for d in dims) + "]"


def _check_cli_value(key: str, value, info, signature: str) -> None:
  """An --input_exprs value against the signature's TensorInfo `info`."""
  array = np.asarray(value)
  dtype = tf.as_dtype(info.dtype)
  if not info.tensor_shape.unknown_rank:
    want = [d.size for d in info.tensor_shape.dim]
    if array.ndim != len(want) or any(
        w >= 0 and w != g for w, g in zip(want, array.shape)):
      raise UsageError(
          f"--input_exprs: input '{key}' has shape {_shape_text(array.shape)}"
          f", signature '{signature}' takes {_shape_text(want)}")
  strings = array.dtype.kind in "US" or (
      array.dtype.kind == "O" and all(isinstance(x, (str, bytes))
                                      for x in array.flat))
  numbers = array.dtype.kind in "biuf"
  if (dtype == tf.string and not strings) or (
      dtype != tf.string and not numbers):
    raise UsageError(
        f"--input_exprs: input '{key}' has {array.dtype.name} values, "
        f"signature '{signature}' takes {dtype.name}")


def check_saved_model_cli_args(command: Optional[str], values: dict,
                               cli_module) -> None:
  """Checks what TF's saved_model_cli `show`/`run` would fail on with a
  traceback, against the SavedModel itself: the directory, the tag-set, the
  signature, and the inputs (keys, `--input_exprs` literals and their
  shape/type). Raises a one-line UsageError naming the flag."""
  if command not in ("show", "run", "scan", "convert", "freeze_model",
                     "aot_compile_cpu"):
    return  # no command, or help: TF's own usage message
  directory = values["dir"]
  if command == "aot_compile_cpu" and not directory:
    return
  required = ("dir", "tag_set", "signature_def") if command == "run" else (
      "dir",)
  for name in required:
    if values[name] is None:
      raise UsageError(f"--{name} is required for {command}")
  # TF reads the SavedModel: in a bucket (gs://) it is probed with TF's own
  # filesystem, after the store's one-line checks.
  remote = paths.is_remote(directory)
  if remote:
    tf_path(directory, "dir")
    check_store(directory, "dir")
  exists, isdir, isfile = (os.path.exists, os.path.isdir, os.path.isfile)
  if remote:
    exists, isdir = tf.io.gfile.exists, tf.io.gfile.isdir
    isfile = lambda p: exists(p) and not isdir(p)  # noqa: E731
  if not exists(directory):
    raise UsageError(f"--dir={directory}: no such directory")
  if not isdir(directory):
    raise UsageError(f"--dir={directory}: is a file, not a SavedModel "
                     "directory")
  if not any(isfile(paths.join(directory, n))
             for n in ("saved_model.pb", "saved_model.pbtxt")):
    raise UsageError(f"--dir={directory}: no SavedModel there (no "
                     "saved_model.pb)")
  try:
    saved_model = cli_module.saved_model_utils.read_saved_model(directory)
  except (IOError, ValueError) as e:
    raise UsageError(f"--dir={directory}: unreadable SavedModel "
                     f"({one_line(e)})") from e
  tag_set = values["tag_set"]
  if command not in ("show", "run") or tag_set is None:
    return
  wanted = {t for t in tag_set.split(",") if t}
  graphs = {frozenset(g.meta_info_def.tags): g for g in saved_model.meta_graphs}
  if frozenset(wanted) not in graphs:
    have = "; ".join(sorted(",".join(sorted(t)) for t in graphs)) or "none"
    raise UsageError(f"--tag_set={tag_set}: no such tag-set in {directory}; "
                     f"it has: {have}")
  graph = graphs[frozenset(wanted)]
  signature = values["signature_def"]
  if signature is None:
    return
  if signature not in graph.signature_def:
    # `__saved_model_init_op` and the like are TF's, not for running.
    have = sorted(s for s in graph.signature_def if not s.startswith("__"))
    raise UsageError(f"--signature_def={signature}: no such signature in "
                     f"{directory}; it has: {', '.join(have)}")
  if command != "run":
    return
  _check_cli_inputs(values, graph.signature_def[signature].inputs, signature,
                    cli_module)


def _check_cli_inputs(values: dict, inputs, signature: str,
                      cli_module) -> None:
  """The run inputs: given, parseable, named as the signature's inputs, and
  (for literals) of its shapes and types."""
  if not (values["inputs"] or values["input_exprs"] or
          values["input_examples"]):
    raise UsageError("run needs --inputs, --input_exprs or --input_examples")
  given = {}
  try:
    for key in cli_module.preprocess_inputs_arg_string(values["inputs"] or ""):
      given[key] = "--inputs"
  except RuntimeError as e:
    raise UsageError(one_line(e)) from e
  exprs = {}
  for item in filter(None, (values["input_exprs"] or "").split(";")):
    if "=" not in item:
      raise UsageError(f"--input_exprs: {item}: expected <input_key>="
                       "<python literal>")
    key, expr = item.split("=", 1)
    try:
      exprs[key] = ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError, MemoryError,
            RecursionError) as e:
      raise UsageError(f"--input_exprs: {item}: the value is not a Python "
                       "literal") from e
    given[key] = "--input_exprs"
  for item in filter(None, (values["input_examples"] or "").split(";")):
    given[item.split("=", 1)[0]] = "--input_examples"
  names = ", ".join(sorted(inputs))
  for key, flag in given.items():
    if key not in inputs:
      raise UsageError(f"{flag}: '{key}' is not an input of signature "
                       f"'{signature}'; its inputs: {names}")
  missing = sorted(set(inputs) - set(given))
  if missing:
    raise UsageError(f"signature '{signature}' takes inputs {names}; missing: "
                     f"{', '.join(missing)}")
  for key, value in exprs.items():
    _check_cli_value(key, value, inputs[key], signature)


def define_flags():
  """The command line's flags: those of TF's saved_model_cli, whose module
  defines them when first imported (imported only here: they are global
  absl flags, --dir, ..., that no other entry point should carry); again
  after they were deleted (tests list every entry point's flags so).
  Returns that module."""
  from tensorflow.python.tools import saved_model_cli
  if not flags.FLAGS.get_flags_for_module(saved_model_cli.__name__):
    importlib.reload(saved_model_cli)
  return saved_model_cli


def _saved_model_cli(saved_model_cli) -> int:
  # Imported only here: TF Text is heavy.
  import tensorflow_text  # noqa: F401  (registers the ops)
  argv = ["saved_model_cli"] + sys.argv[1:]
  command, values = _cli_flag_values(argv, saved_model_cli)
  if not _HELP.intersection(a.split("=")[0] for a in argv[1:]):
    check_saved_model_cli_args(command, values, saved_model_cli)
  sys.argv[:] = argv
  try:
    return saved_model_cli.main()
  except (RuntimeError, ValueError, tf.errors.InvalidArgumentError) as e:
    # What TF's CLI itself refuses (an --inputs file without the named
    # array, an existing --outdir file, a value the graph rejects): its
    # message, on one line.
    message = e.message if isinstance(e, tf.errors.OpError) else str(e)
    raise UserError(one_line(message.strip().splitlines()[0] if
                             message.strip() else type(e).__name__)) from e


def main():
  """`xlnet-saved-model-cli`: TensorFlow's `saved_model_cli` with TF Text's
  ops registered (the raw-text signatures use them, and any process can only
  load them after `import tensorflow_text`). What the stock CLI answers with
  a traceback (a missing directory, an unknown tag-set or signature, a bad
  input key, literal or shape) is one line `xlnet-saved-model-cli: ...`
  with exit code 2."""
  cli_module = define_flags()
  sys.exit(run_main(CLI_PROGRAM, lambda: _saved_model_cli(cli_module)))
