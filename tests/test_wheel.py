"""What `pip install` of the project's wheel gives a user without a checkout:
every module of the packages and every run_*.py script (and nothing else),
one console script per entry point (tests/entry_points.py's
CONSOLE_SCRIPTS, as README's Install table lists them), each pointing at a
function that exists; and installed commands that really run, answering a
bad flag as a checkout's scripts do: one line, exit code 2.

The wheel is built once, offline (`pip wheel --no-build-isolation`, the
backend the test extra installs), from a copy of the source tree: the build
writes no build/ or egg-info into the checkout.
"""

import collections
import configparser
import glob
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import start
from doc_pages import blocks, read
from entry_points import (CHECKOUT_ONLY, CONSOLE_SCRIPTS, ENTRY_POINTS, ROOT,
                          console_target, entry_of)

PACKAGES = ("xlnet_tf", "data_utils")
# What a checkout holds besides its source (.gitignore's list): not copied.
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", "*.egg-info",
                                     "__pycache__", "*.pyc", ".pytest_cache",
                                     "build", "dist", "out")

Wheel = collections.namedtuple("Wheel", "path names console_scripts")


def _pip(*args, cwd):
  res = subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps",
                        "--no-index", "--quiet"], cwd=cwd, capture_output=True,
                       text=True, timeout=300, check=False)
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]


def _console_scripts(archive: zipfile.ZipFile) -> dict:
  (name,) = [n for n in archive.namelist()
             if re.fullmatch(r"[^/]+\.dist-info/entry_points\.txt", n)]
  parser = configparser.ConfigParser(delimiters=("=",))
  parser.optionxform = str  # names as written
  parser.read_string(archive.read(name).decode("utf-8"))
  return dict(parser["console_scripts"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Wheel:
  """The wheel `pip wheel` builds from the source tree."""
  tmp = tmp_path_factory.mktemp("wheel")
  shutil.copytree(ROOT, tmp / "source", ignore=_NOT_SOURCE)
  _pip("wheel", "--no-build-isolation", "-w", str(tmp / "dist"),
       str(tmp / "source"), cwd=tmp)
  (path,) = glob.glob(str(tmp / "dist" / "*.whl"))
  with zipfile.ZipFile(path) as archive:
    return Wheel(path, frozenset(archive.namelist()),
                 _console_scripts(archive))


def _source_files() -> set:
  """The files a wheel must hold: the root's run_*.py and everything under
  the packages (modules, and any file they read at run time)."""
  names = {n for n in os.listdir(ROOT)
           if n.startswith("run_") and n.endswith(".py")}
  for package in PACKAGES:
    for folder, dirs, files in os.walk(os.path.join(ROOT, package)):
      dirs[:] = [d for d in dirs if d != "__pycache__"]
      names.update(os.path.relpath(os.path.join(folder, n), ROOT)
                   .replace(os.sep, "/") for n in files
                   if not n.endswith(".pyc"))
  return names


def test_every_source_file_and_nothing_else_is_in_the_wheel(wheel):
  source = _source_files()
  assert "run_batch_predict.py" in source
  assert "data_utils/pretraining/create_pretrain_data.py" in source
  shipped = {n for n in wheel.names if ".dist-info/" not in n}
  assert sorted(source - shipped) == []  # missing from the wheel
  assert sorted(shipped - source) == []  # tests, demo, ...: not the package
  # The demo stays in the checkout, with its data.
  assert not any(n.startswith("demo/") for n in wheel.names)


def test_one_console_script_per_entry_point(wheel):
  assert wheel.console_scripts == {
      name: console_target(entry) for name, entry in CONSOLE_SCRIPTS.items()}
  # Every entry point has exactly one (but the checkout's own).
  assert sorted(CONSOLE_SCRIPTS.values()) == sorted(
      set(ENTRY_POINTS) - set(CHECKOUT_ONLY))
  assert set(CHECKOUT_ONLY) == {"demo/run_demo.py"}
  # The names the docs used before stay.
  assert wheel.console_scripts["xlnet-saved-model-cli"] == \
      "xlnet_tf.export.saved_model_cli:main"
  assert wheel.console_scripts["xlnet-tf-classifier"] == \
      "run_classifier:main_cli"
  for name, target in wheel.console_scripts.items():
    module, function = target.split(":")
    assert module.replace(".", "/") + ".py" in wheel.names, name
    assert callable(getattr(importlib.import_module(module), function)), name


def readme_table() -> dict:
  """{installed command: the entry its row names} of README's Install
  table (`| `python run_x.py` | `xlnet-tf-x` |`; a command only: itself)."""
  _, prose = blocks(read("README.md"))
  section = prose[prose.index("\n## Install\n"):]
  section = section[:section.index("\n## ", 1)]
  rows = {}
  for line in section.split("\n"):
    m = re.fullmatch(r"\|\s*(?:`([^`]+)`|[^|`]*)\s*\|\s*`([\w-]+)`\s*\|",
                     line.strip())
    if m:
      found = entry_of(shlex.split(m.group(1)) if m.group(1) else
                       [m.group(2)])
      rows[m.group(2)] = found and found[0]
  return rows


def test_readme_lists_the_console_scripts(wheel):
  rows = readme_table()
  assert rows == dict(CONSOLE_SCRIPTS)
  assert {name: console_target(entry) for name, entry in rows.items()} == \
      wheel.console_scripts


# Runs the installed command (pip's generated script) with the installed
# modules only: the checkout (on the path through the editable install) is
# taken off it, and the files of the modules loaded are printed at exit.
_LAUNCH = """
import atexit, os, runpy, sys
root = os.path.realpath(sys.argv.pop(1))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != root]
loaded = sys.argv.pop(1).split(",")
atexit.register(lambda: print(*(sys.modules[m].__file__ for m in loaded)))
sys.argv.pop(0)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
  """The wheel installed into a folder (`pip install --target`): its
  modules, and its console scripts in bin/."""
  target = tmp_path_factory.mktemp("installed")
  _pip("install", "--no-compile", "--target", str(target), wheel.path,
       cwd=target)
  return target


@pytest.mark.e2e
def test_installed_commands_refuse_a_bad_flag_in_one_line(installed):
  cases = [  # (command, its module, arguments, the line it answers)
      ("xlnet-tf-classifier", "run_classifier", ["--no_such_flag"],
       "run_classifier: Unknown command line flag 'no_such_flag'"),
      ("xlnet-tf-pretrain-data", "data_utils.pretraining.create_pretrain_data",
       ["--input_glob=x", "--sp_path=x", "--save_dir=x",
        "--bsz_per_host=abc"],
       "create_pretrain_data: flag --bsz_per_host=abc: invalid literal for "
       "int() with base 10: 'abc'"),
  ]
  runs = [start([sys.executable, "-c", _LAUNCH, ROOT, f"{module},data_utils",
                 str(installed / "bin" / name), *args], 300,
                env={"PYTHONPATH": str(installed)}, cwd=installed)
          for name, module, args, _ in cases]
  for (name, module, _, line), res in zip(cases, (r.result() for r in runs)):
    assert res.returncode == 2, (name, res.stderr[-3000:])
    assert res.stderr == line + "\n", name
    # The installed modules ran, not the checkout's.
    files = res.stdout.split()
    assert files == [str(installed / (module.replace(".", "/") + ".py")),
                     str(installed / "data_utils" / "__init__.py")], name
