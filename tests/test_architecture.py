"""The house rules the README's architecture section states, read from the
source: imports point down the floors, no cycles, no function-level imports
of the project's own modules in the packages and entry scripts (tests and
benchmarks may import inside a test or a subprocess's function), no module
over 400 lines anywhere."""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("xlnet_tf", "data_utils")
MAX_LINES = 400

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
    ("xlnet_tf.tasks", ["xlnet_tf.pretrained", "xlnet_tf.convert"]),
    # Serving exports know no task, model or checkpoint format (an export
    # kind is a name, a model a tf.Module): each task's signatures are in
    # its tasks/<task>/serving.py, which imports xlnet_tf.export.
    ("xlnet_tf.export", ["xlnet_tf.tasks", "xlnet_tf.finetuning",
                         "xlnet_tf.pretrained", "xlnet_tf.encoder",
                         "xlnet_tf.layers", "xlnet_tf.kernels", "xlnet_tf.io",
                         "xlnet_tf.training"]),
    # The fine-tuning driver knows a task only as an XLNetTask.
    ("xlnet_tf.finetuning", ["xlnet_tf.pretrained"] + [
        f"xlnet_tf.tasks.{p}" for p in ("classification", "multiple_choice",
                                        "squad", "token_classification",
                                        "language_model", "registry")]),
]
# What a task package holds (`xlnet_tf/tasks/<task>/`), and which of its
# modules sit above the fine-tuning driver.
TASK_MODULES = ("model", "serving", "workflow", "spec")
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
                 and not _under(dep, importer))
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


def _task_packages():
  tasks = os.path.join(ROOT, "xlnet_tf", "tasks")
  return sorted(d for d in os.listdir(tasks) if os.path.isfile(
      os.path.join(tasks, d, "__init__.py")))


def test_every_task_is_one_package_with_its_spec_registered():
  """Adding a task is adding a package (model, serving, workflow, spec)
  and registering its specs; every table of tasks reads the registry."""
  from xlnet_tf.tasks import registry
  packages = _task_packages()
  assert packages == ["classification", "language_model", "multiple_choice",
                      "squad", "token_classification"]
  for package in packages:
    for name in TASK_MODULES:
      assert f"xlnet_tf.tasks.{package}.{name}" in SOURCES, (package, name)
    assert f"xlnet_tf.tasks.{package}.spec" in GRAPH["xlnet_tf.tasks.registry"]
  homes = {spec.model_class.__module__ for spec in registry.TASKS}
  assert homes == {f"xlnet_tf.tasks.{p}.model" for p in packages}
  # No other module keeps a table of tasks: the kinds' names occur as
  # string literals only in the task packages' specs and models (the export
  # kind), the spec and registry docstrings, and the checkpoint formats'
  # decoding (HF config.json, the original's variable names).
  names = {s.name for s in registry.TASKS} | set(registry.EXPORT_KINDS)
  quoted = re.compile(r"""["'](%s)["']""" % "|".join(sorted(names)))
  allowed = {f"xlnet_tf/tasks/{p}/{m}.py" for p in packages
             for m in ("spec", "model")} | {
                 "xlnet_tf/tasks/spec.py", "xlnet_tf/tasks/registry.py",
                 "xlnet_tf/io/hf_config.py", "xlnet_tf/convert.py"}
  found = []
  for module, path in SOURCES.items():
    if module.split(".")[0] != "xlnet_tf" or path in allowed:
      continue
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      for line_no, line in enumerate(f, 1):
        if quoted.search(line) and not line.lstrip().startswith("#"):
          found.append(f"{path}:{line_no}: {line.strip()}")
  assert found == []


def test_task_models_and_serving_sit_below_the_driver():
  """A task's model and serving import no workflow, spec, registry or
  driver (the driver imports `tasks.base`, and the workflows import it)."""
  above = [f"xlnet_tf.tasks.{p}.{m}" for p in _task_packages()
           for m in ABOVE_DRIVER] + ["xlnet_tf.tasks.registry",
                                     "xlnet_tf.finetuning"]
  wrong = sorted(
      f"{module} imports {dep}" for module, deps in GRAPH.items()
      if _under(module, "xlnet_tf.tasks")
      and module.rpartition(".")[2] not in ABOVE_DRIVER
      and module != "xlnet_tf.tasks.registry"
      for dep in deps if any(_under(dep, a) for a in above))
  assert wrong == []
