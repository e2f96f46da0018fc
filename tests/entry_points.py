"""Every entry point of the project and the flags it accepts, found in this
process (the docs test checks each `--flag` a doc passes against them).

    >>> "nodo_train" in flags_of("run_classifier.py")
    True

The convention (test_entry_points.py holds it): an entry point defines its
flags only in its `define_flags()`, which its `main_cli()` (what its
`if __name__ == "__main__":` block and its console script run) calls right
before it runs; importing it defines nothing. So `flags_of` imports the
module, calls `define_flags()` and deletes again what it defined: one
process lists every entry point, whose flags share names (`--overwrite`,
`--output_dir`, ...).
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import re
import sys
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the run_*.py scripts live in the project root
  sys.path.insert(0, ROOT)

# How a doc invokes the entry -> the module to import.
ENTRY_POINTS: Dict[str, str] = {
    # Scripts, `python <path>` (the path from the project root).
    "run_pretrain.py": "run_pretrain",
    "run_classifier.py": "run_classifier",
    "run_squad.py": "run_squad",
    "run_race.py": "run_race",
    "run_ner.py": "run_ner",
    "run_embed.py": "run_embed",
    "run_score.py": "run_score",
    "run_generate.py": "run_generate",
    "run_infill.py": "run_infill",
    "run_batch_predict.py": "run_batch_predict",
    "demo/run_demo.py": "demo.run_demo",
    # Modules, `python -m <module>`.
    "data_utils.train_spiece": "data_utils.train_spiece",
    "data_utils.pretraining.create_pretrain_data":
        "data_utils.pretraining.create_pretrain_data",
    "xlnet_tf.convert": "xlnet_tf.convert",
    # Console scripts (pyproject.toml's [project.scripts]).
    "xlnet-saved-model-cli": "xlnet_tf.export.saved_model_cli",
}

# The console scripts (pyproject.toml's [project.scripts]): one per entry
# point that the wheel installs, name -> the entry (a key of ENTRY_POINTS).
CONSOLE_SCRIPTS: Dict[str, str] = {
    "xlnet-tf-pretrain": "run_pretrain.py",
    "xlnet-tf-pretrain-data": "data_utils.pretraining.create_pretrain_data",
    "xlnet-tf-spiece": "data_utils.train_spiece",
    "xlnet-tf-classifier": "run_classifier.py",
    "xlnet-tf-squad": "run_squad.py",
    "xlnet-tf-race": "run_race.py",
    "xlnet-tf-ner": "run_ner.py",
    "xlnet-tf-embed": "run_embed.py",
    "xlnet-tf-score": "run_score.py",
    "xlnet-tf-generate": "run_generate.py",
    "xlnet-tf-infill": "run_infill.py",
    "xlnet-tf-batch-predict": "run_batch_predict.py",
    "xlnet-tf-convert": "xlnet_tf.convert",
    # The name the docs used before the others (kept as it was).
    "xlnet-saved-model-cli": "xlnet-saved-model-cli",
}
# Entries of a checkout only, not in the wheel: why.
CHECKOUT_ONLY = {
    "demo/run_demo.py": "runs the checkout's scripts on its bundled "
                        "demo/data (`make demo`)",
}
# What a console script calls: `main_cli()` (define_flags(), then run_app:
# the `__main__` block's one call); or `main()`, for the entries whose
# `main` reads sys.argv itself.
CONSOLE_FUNCTION = "main_cli"
_ARGV_MAIN = frozenset({"xlnet_tf.convert", "xlnet_tf.export.saved_model_cli"})


def console_target(entry: str) -> str:
  """`module:function`, what `entry`'s console script runs.

    >>> console_target("run_classifier.py")
    'run_classifier:main_cli'
  """
  module = ENTRY_POINTS[entry]
  return f"{module}:{'main' if module in _ARGV_MAIN else CONSOLE_FUNCTION}"


# Where an entry's `define_flags` lives when not in its own module.
DEFINED_IN = {"xlnet_tf.convert": "xlnet_tf.convert_args"}

# What absl's app.run adds to every entry's own flags (`--helpfull`,
# `--logtostderr`, ...) and what any FlagValues parses (`--flagfile`).
_ABSL_MODULES = ("absl.app", "absl.logging")
_SPECIAL = frozenset({"flagfile", "undefok"})
# Entries that parse with a FlagValues of their own instead of app.run:
# the help flags their `main` answers itself.
_OWN_PARSER = {"xlnet_tf.convert": frozenset({"help", "helpfull"})}


def module_of(entry: str):
  """The imported module of `entry` (a key of ENTRY_POINTS)."""
  return importlib.import_module(ENTRY_POINTS[entry])


def define_flags_of(entry: str):
  """`entry`'s `define_flags` function."""
  name = ENTRY_POINTS[entry]
  module_of(entry)
  return importlib.import_module(DEFINED_IN.get(name, name)).define_flags


def _with_negations(found: Dict[str, flags.Flag]) -> FrozenSet[str]:
  names = set()
  for flag in found.values():
    names.add(flag.name)
    if isinstance(flag, flags.BooleanFlag):
      names.add("no" + flag.name)
  return frozenset(names)


@functools.lru_cache(maxsize=None)
def _defined(entry: str) -> Dict[str, flags.Flag]:
  define = define_flags_of(entry)
  before = set(flags.FLAGS)
  define()
  new = {key: flags.FLAGS[key] for key in flags.FLAGS if key not in before}
  for key in new:
    delattr(flags.FLAGS, key)
  return {flag.name: flag for flag in new.values()}


def defined_flags(entry: str) -> Dict[str, flags.Flag]:
  """{long name: absl Flag} of what `entry`'s `define_flags()` defines
  (defined, read and deleted again; their defaults, enum values, ...)."""
  return dict(_defined(entry))


def own_flags(entry: str) -> FrozenSet[str]:
  """The long names of the flags `entry`'s `define_flags()` defines."""
  return frozenset(_defined(entry))


def builtin_flags(entry: str) -> FrozenSet[str]:
  """The flags `entry` accepts besides its own (absl's `--helpfull`,
  `--logtostderr`, ..., and their `no` forms; `--flagfile`)."""
  own_parser = _OWN_PARSER.get(ENTRY_POINTS[entry])
  if own_parser is not None:
    return own_parser | _SPECIAL
  app.define_help_flags()  # what app.run defines (once per process)
  by_module = flags.FLAGS.flags_by_module_dict()
  found = {flag.name: flag for module in _ABSL_MODULES
           for flag in by_module.get(module, ())}
  return _with_negations(found) | _SPECIAL


def flags_of(entry: str) -> FrozenSet[str]:
  """The long names of every flag `entry` (a key of ENTRY_POINTS or
  ARGPARSE_SCRIPTS) accepts: its own and absl's, booleans also as
  `noname`; a benchmark's, from its source."""
  if entry in ARGPARSE_SCRIPTS:
    return _argparse_flags(ARGPARSE_SCRIPTS[entry])
  return _with_negations(_defined(entry)) | builtin_flags(entry)


def _benchmarks() -> Dict[str, str]:
  folder = os.path.join(ROOT, "benchmarks")
  found = {}
  for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    if name.endswith(".py"):
      with open(path, encoding="utf-8") as f:
        text = f.read()
      if "argparse.ArgumentParser(" in text and "__main__" in text:
        found[f"benchmarks/{name}"] = path
  return found


# The benchmark scripts (not part of the package; argparse, not absl):
# `python benchmarks/<name>.py` -> the file. Their flags are read from
# their source (the literal option strings of `add_argument`), not by
# importing them (they load torch, transformers, ...).
ARGPARSE_SCRIPTS: Dict[str, str] = _benchmarks()


@functools.lru_cache(maxsize=None)
def _argparse_flags(path: str) -> FrozenSet[str]:
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  names = {"help"}
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"):
      names.update(a.value[2:] for a in node.args
                   if isinstance(a, ast.Constant) and isinstance(a.value, str)
                   and a.value.startswith("--"))
  return frozenset(names)


_PYTHON = re.compile(r"(^|/)python(3(\.\d+)?)?$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def entry_of(words: Sequence[str]) -> Optional[Tuple[str, List[str]]]:
  """(the entry, its arguments) that a shell command's `words` run, or
  None for a command that runs none of this project's entry points (a
  console script's words run its entry).

    >>> entry_of(["python", "run_squad.py", "--do_train"])
    ('run_squad.py', ['--do_train'])
    >>> entry_of(["TF_CPP_MIN_LOG_LEVEL=2", ".venv/bin/python", "-m",
    ...           "xlnet_tf.convert", "--from=a"])
    ('xlnet_tf.convert', ['--from=a'])
    >>> entry_of(["python", "-m", "run_ner", "--do_eval"])
    ('run_ner.py', ['--do_eval'])
    >>> entry_of([".venv/bin/xlnet-saved-model-cli", "show", "--dir", "x"])
    ('xlnet-saved-model-cli', ['show', '--dir', 'x'])
    >>> entry_of(["xlnet-tf-classifier", "--do_train"])
    ('run_classifier.py', ['--do_train'])
    >>> entry_of(["python", "./demo/run_demo.py"])
    ('demo/run_demo.py', [])
    >>> entry_of(["pip", "install", "-e", "."]) is None
    True
  """
  words = list(words)
  while words and _ENV.match(words[0]):
    words.pop(0)
  if not words:
    return None
  if _PYTHON.search(words[0]):
    if len(words) > 2 and words[1] == "-m":
      # `python -m run_squad` runs the script too.
      by_module = {m: e for e, m in ENTRY_POINTS.items() if "-" not in e}
      entry = by_module.get(words[2])
      return (entry, words[3:]) if entry else None
    if len(words) > 1:
      path = os.path.normpath(words[1]).replace(os.sep, "/")
      if path in ENTRY_POINTS or path in ARGPARSE_SCRIPTS:
        return path, words[2:]
    return None
  name = words[0].rsplit("/", 1)[-1]
  entry = CONSOLE_SCRIPTS.get(name, name if name in ENTRY_POINTS else None)
  return (entry, words[1:]) if entry else None
