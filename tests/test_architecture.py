"""The house rules docs/architecture.md states, read from the
source: imports point down the floors, no cycles, no function-level imports
of the project's own modules in the packages and entry scripts (tests and
benchmarks may import inside a test or a subprocess's function), no module
over 400 lines anywhere."""

import ast
import os

import pytest

from xlnet_tf.tasks import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("xlnet_tf", "data_utils")
MAX_LINES = 400
# The task packages (`xlnet_tf/tasks/<task>/`), as the registry lists them.
TASK_PACKAGES = tuple(sorted({s.model_at.split(".")[2]
                              for s in registry.TASKS}))
# What every module may read of the tasks: the registry and the specs, and
# what they name of each package, its formats (plain data: the checkpoint
# layers decode HF configs and weight names through them).
LIGHT = ["xlnet_tf.tasks.registry", "xlnet_tf.tasks.spec"] + [
    f"xlnet_tf.tasks.{p}.{m}" for p in TASK_PACKAGES
    for m in ("spec", "formats")]

# (importer prefix, imported prefixes it must not reach). A prefix names a
# module and everything under it.
FORBIDDEN = [
    ("data_utils", ["xlnet_tf"]),
    ("xlnet_tf.config", ["xlnet_tf"]),
    ("xlnet_tf.positions", ["xlnet_tf"]),
    ("xlnet_tf.masks", ["xlnet_tf"]),
    ("xlnet_tf.factorization", ["xlnet_tf"]),
    ("xlnet_tf.kernels", ["xlnet_tf.layers", "xlnet_tf.encoder",
                          "xlnet_tf.tasks", "xlnet_tf.io",
                          "xlnet_tf.training"]),
    ("xlnet_tf.layers", ["xlnet_tf.encoder", "xlnet_tf.tasks", "xlnet_tf.io",
                         "xlnet_tf.training"]),
    ("xlnet_tf.encoder", ["xlnet_tf.tasks", "xlnet_tf.io",
                          "xlnet_tf.training"]),
    # The loop knows no task, model or checkpoint format: they are handed in.
    ("xlnet_tf.training", ["xlnet_tf.tasks", "xlnet_tf.io", "xlnet_tf.encoder",
                           "xlnet_tf.layers", "xlnet_tf.kernels",
                           "xlnet_tf.pretrained"]),
    ("xlnet_tf.io", ["xlnet_tf.tasks", "xlnet_tf.pretrained",
                     "xlnet_tf.training"]),
    # The light modules import no task's heavy modules.
    *[(light, ["xlnet_tf.tasks", "xlnet_tf.io.hf", "xlnet_tf.io.hf_config",
               "xlnet_tf.io.hf_names", "xlnet_tf.encoder",
               "xlnet_tf.training"]) for light in LIGHT],
    ("xlnet_tf.tasks", ["xlnet_tf.pretrained", "xlnet_tf.convert"]),
    # Serving exports know no task, model or checkpoint format (an export
    # kind is a name, a model a tf.Module): each task's signatures are in
    # its tasks/<task>/serving.py, which imports xlnet_tf.export.
    ("xlnet_tf.export", ["xlnet_tf.tasks", "xlnet_tf.finetuning",
                         "xlnet_tf.pretrained", "xlnet_tf.encoder",
                         "xlnet_tf.layers", "xlnet_tf.kernels", "xlnet_tf.io",
                         "xlnet_tf.training"]),
    # The fine-tuning driver knows a task only as an XLNetTask.
    ("xlnet_tf.finetuning", ["xlnet_tf.pretrained",
                             "xlnet_tf.tasks.registry"] + [
        f"xlnet_tf.tasks.{p}" for p in TASK_PACKAGES]),
]
# Any module may import these (the `FORBIDDEN` rules' exceptions).
ANYONE_MAY_IMPORT = LIGHT + ["xlnet_tf.tasks"]
# What a task package holds (`xlnet_tf/tasks/<task>/`), and which of its
# modules sit above the fine-tuning driver.
TASK_MODULES = ("model", "serving", "workflow", "spec", "formats")
ABOVE_DRIVER = ("workflow", "spec")


def _sources():
  """`{module name: path}` of every project file: the two packages, the entry
  scripts, tests, benchmarks and the demo."""
  found = {}
  for directory, dirs, files in os.walk(ROOT):
    rel = os.path.relpath(directory, ROOT)
    dirs[:] = [d for d in dirs if not d.startswith((".", "__"))
               and d not in ("out", "build")]
    if rel != "." and rel.split(os.sep)[0].endswith(".egg-info"):
      continue
    for name in files:
      if name.endswith(".py"):
        path = os.path.normpath(os.path.join(rel, name))
        module = path[:-3].replace(os.sep, ".")
        found[module.removesuffix(".__init__")] = path
  return found


SOURCES = _sources()


def _project_imports(tree):
  """`(module, at function level)` for every import of a project module."""
  parents = {}
  for node in ast.walk(tree):
    for child in ast.iter_child_nodes(node):
      parents[child] = node
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names = [f"{node.module}.{a.name}" for a in node.names]
    else:
      continue
    up, in_function = parents.get(node), False
    while up is not None:
      in_function |= isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef))
      up = parents.get(up)
    for name in names:
      if name.split(".")[0] not in PACKAGES:
        continue
      while name not in SOURCES and "." in name:
        name = name.rpartition(".")[0]  # `from pkg.mod import Class`
      if name in SOURCES:
        yield name, in_function


def _graph():
  graph, function_level = {}, []
  for module, path in SOURCES.items():
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    graph[module] = set()
    for name, in_function in _project_imports(tree):
      if name == module:
        continue
      graph[module].add(name)
      if in_function and not path.startswith(("tests", "benchmarks", "demo")):
        function_level.append(f"{path}: imports {name} inside a function")
  return graph, function_level


GRAPH, FUNCTION_LEVEL = _graph()


def _under(module, prefix):
  return module == prefix or module.startswith(prefix + ".")


def test_no_function_level_imports_of_project_modules():
  assert FUNCTION_LEVEL == []


def test_no_import_cycles():
  state, cycles = {}, []

  def visit(module, stack):
    state[module] = "open"
    for dep in sorted(GRAPH.get(module, ())):
      if state.get(dep) == "open":
        cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
      elif dep not in state:
        visit(dep, stack + [dep])
    state[module] = "done"

  for module in sorted(GRAPH):
    if module not in state:
      visit(module, [module])
  assert cycles == []


@pytest.mark.parametrize("importer,banned", FORBIDDEN,
                         ids=[f[0] for f in FORBIDDEN])
def test_imports_point_down(importer, banned):
  wrong = sorted(f"{module} imports {dep}"
                 for module, deps in GRAPH.items() if _under(module, importer)
                 for dep in deps
                 if any(_under(dep, b) for b in banned)
                 and not _under(dep, importer)
                 and dep not in ANYONE_MAY_IMPORT)
  assert wrong == []


def test_no_module_over_400_lines():
  long = []
  for module, path in sorted(SOURCES.items()):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      lines = sum(1 for _ in f)
    if lines > MAX_LINES:
      long.append(f"{path}: {lines} lines")
  assert long == []


def test_the_rules_see_the_project():
  """The walk finds the layers the rules speak of (a rule on a module that
  does not exist would pass vacuously)."""
  for importer, banned in FORBIDDEN:
    for prefix in [importer] + banned:
      assert any(_under(m, prefix) for m in SOURCES), prefix
  assert any(GRAPH[m] for m in GRAPH if _under(m, "xlnet_tf.tasks"))


def _string_literals(tree):
  """`(line, text)` of the string constants of `tree` that are not
  docstrings (f-strings' literal parts included)."""
  docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr)}
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and id(node) not in docstrings:
      yield node.lineno, node.value


def test_every_task_is_one_package_with_its_spec_registered():
  """Adding a task is adding a package (model, serving, workflow, formats,
  spec) and registering its specs; every table of tasks reads the
  registry."""
  tasks = os.path.join(ROOT, "xlnet_tf", "tasks")
  packages = sorted(d for d in os.listdir(tasks) if os.path.isfile(
      os.path.join(tasks, d, "__init__.py")))
  assert tuple(packages) == TASK_PACKAGES
  for package in packages:
    for name in TASK_MODULES:
      assert f"xlnet_tf.tasks.{package}.{name}" in SOURCES, (package, name)
  assert sorted(registry.PACKAGES) == packages
  homes = {spec.model_class.__module__ for spec in registry.TASKS}
  assert homes == {f"xlnet_tf.tasks.{p}.model" for p in packages}


def test_only_a_task_spells_its_kinds():
  """No module keeps a table of tasks: a kind's name (model kind or export
  kind) is a string literal only in its own task package (docstrings
  aside); everything else reads the specs."""
  home = {}
  for spec in registry.TASKS:
    package = spec.model_at.split(".")[2]
    for name in filter(None, (spec.name, spec.export_kind)):
      home.setdefault(name, set()).add(package)
  found, at_home = [], set()
  for module, path in sorted(SOURCES.items()):
    # The registry names the task packages (its one line per task).
    if module.split(".")[0] != "xlnet_tf" or module == registry.__name__:
      continue
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    parts = module.split(".")
    own = parts[2] if len(parts) > 3 and parts[1] == "tasks" else None
    for line, text in _string_literals(tree):
      if text in home and own in home[text]:
        at_home.add(text)
      elif text in home:
        found.append(f"{path}:{line}: {text!r}")
  assert found == []
  assert at_home == set(home)  # the scan sees them where they belong


def test_task_models_and_serving_sit_below_the_driver():
  """A task's model and serving import no workflow, spec, registry or
  driver (the driver imports `tasks.base`, and the workflows import it)."""
  above = [f"xlnet_tf.tasks.{p}.{m}" for p in TASK_PACKAGES
           for m in ABOVE_DRIVER] + ["xlnet_tf.tasks.registry",
                                     "xlnet_tf.finetuning"]
  wrong = sorted(
      f"{module} imports {dep}" for module, deps in GRAPH.items()
      if _under(module, "xlnet_tf.tasks")
      and module.rpartition(".")[2] not in ABOVE_DRIVER
      and module != "xlnet_tf.tasks.registry"
      for dep in deps if any(_under(dep, a) for a in above))
  assert wrong == []
