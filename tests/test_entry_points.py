"""One convention for every entry point (entry_points.py lists them): its
flags are defined only in its `define_flags()`, which its `main_cli()` (the
one call of its `__main__` block, and what its console script runs) calls
before it runs; importing it defines nothing. And `flags_of`, which the
docs test reads, gives each one's flags. In one process: the scripts are
imported, never run."""

import ast
import os
import re

from absl import flags

from entry_points import (ARGPARSE_SCRIPTS, CHECKOUT_ONLY, CONSOLE_FUNCTION,
                          CONSOLE_SCRIPTS, DEFINED_IN, ENTRY_POINTS, ROOT,
                          builtin_flags, console_target, define_flags_of,
                          entry_of, flags_of, module_of, own_flags)

PROJECT = ("xlnet_tf", "data_utils", "demo", "run_")


def _source_of(module_name: str) -> str:
  path = os.path.join(ROOT, *module_name.split(".")) + ".py"
  with open(path, encoding="utf-8") as f:
    return f.read()


def _main_block(tree: ast.Module):
  for node in tree.body:
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
        and ast.unparse(node.test) == "__name__ == '__main__'"):
      return node
  return None


def _calls(body) -> list:
  """The expression statements of `body` (a docstring left out), as text."""
  return [ast.unparse(s.value) for s in body if isinstance(s, ast.Expr)
          and not isinstance(s.value, ast.Constant)]


def test_every_entry_point_is_listed():
  """The root's run_*.py, the console scripts of pyproject.toml (one per
  entry point, but the demo) and every module of the packages that runs as
  `python -m`."""
  listed = set(ENTRY_POINTS.values())
  scripts = {n[:-3] for n in os.listdir(ROOT)
             if n.startswith("run_") and n.endswith(".py")}
  assert scripts <= listed
  with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
    table = f.read().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
  console = dict(re.findall(r'^([\w-]+)\s*=\s*"([\w.]+:\w+)"', table, re.M))
  assert console == {name: console_target(entry)
                     for name, entry in CONSOLE_SCRIPTS.items()}
  assert sorted(CONSOLE_SCRIPTS.values()) == sorted(
      set(ENTRY_POINTS) - set(CHECKOUT_ONLY))
  assert all(n == "xlnet-saved-model-cli" or n.startswith("xlnet-tf-")
             for n in console)
  for package in ("xlnet_tf", "data_utils"):
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      for name in files:
        if not name.endswith(".py"):
          continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
          runs = _main_block(ast.parse(f.read())) is not None
        module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        assert not runs or module in listed, module


def test_no_flag_is_defined_at_import():
  """No module of the project defines or marks a flag outside a function,
  and importing every entry point leaves absl's flags without one of the
  project's."""
  paths = [os.path.join(ROOT, n) for n in os.listdir(ROOT)
           if n.startswith("run_") and n.endswith(".py")]
  for package in ("xlnet_tf", "data_utils", "demo"):
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      paths += [os.path.join(folder, n) for n in files if n.endswith(".py")]
  for path in paths:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:
      if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        continue
      for call in ast.walk(node):
        if (isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr.startswith(("DEFINE", "mark_flag",
                                           "declare_key_flag"))):
          raise AssertionError(f"{path}:{call.lineno}: {call.func.attr} "
                               "at import (use define_flags())")
  for entry in ENTRY_POINTS:
    module_of(entry)
  # (A module whose flags were deleted keeps an empty list.)
  defining = [m for m, found in flags.FLAGS.flags_by_module_dict().items()
              if found and (m.startswith(PROJECT) or m == "__main__")]
  assert defining == []


def test_main_blocks_call_define_flags_before_they_run():
  for entry, module in ENTRY_POINTS.items():
    name = DEFINED_IN.get(module, module)
    assert callable(define_flags_of(entry)), entry
    tree = ast.parse(_source_of(module))
    block = _main_block(tree)
    if module == "xlnet_tf.export.saved_model_cli":
      continue  # a console script: its main() calls define_flags()
    assert block is not None, entry
    if name != module:  # convert: main() parses with define_flags' flags
      assert _calls(block.body) == ["sys.exit(main())"], entry
      continue
    # One path: the block runs what the console script runs.
    assert [ast.unparse(s) for s in block.body] == [
        f"{CONSOLE_FUNCTION}()"], entry
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                    and n.name == CONSOLE_FUNCTION)
    calls = _calls(function.body)
    docstring = ast.get_docstring(function) is not None
    assert len(calls) == len(function.body) - docstring == 2, entry
    assert calls[0] == "define_flags()", entry
    assert calls[1].startswith("run_app("), entry


def test_flags_of_defines_and_removes_each_entrys_flags():
  before = set(flags.FLAGS)
  for entry in ENTRY_POINTS:
    names = flags_of(entry)
    assert own_flags(entry) and own_flags(entry) <= names, entry
    assert builtin_flags(entry) <= names, entry
    # Only what app.run defines too (--help, --helpfull, ...) stays.
    assert all(flags.FLAGS[k].name.startswith("help")
               for k in set(flags.FLAGS) - before), entry
  # Twice: the same answer (the definitions are undone each time).
  define_flags_of("run_ner.py")()
  assert "tag_scheme" in flags.FLAGS
  for name in own_flags("run_ner.py"):
    delattr(flags.FLAGS, name)
  assert flags_of("run_ner.py") == flags_of("run_ner.py")


def test_known_flags():
  """A few entries' flags, as their docstrings and the docs use them."""
  want = {
      "run_classifier.py": {"init_checkpoint", "do_train", "nodo_train",
                            "task_name", "max_segments", "helpfull",
                            "logtostderr", "flagfile"},
      "run_squad.py": {"nosplit_digits", "do_prepro", "lr_layer_decay_rate",
                       "strategy", "num_cpu_devices"},
      "run_ner.py": {"tag_scheme", "document_context", "predict_file"},
      "run_race.py": {"max_qa_length", "high_only"},
      "run_pretrain.py": {"record_info_dir", "perm_size", "nobi_data",
                          "grad_accum_steps"},
      "run_embed.py": {"layers", "pooling", "nopiece_vectors", "batch_size"},
      "run_score.py": {"context_column", "order", "max_seq_length",
                       "init_checkpoint", "output_file"},
      "run_infill.py": {"spans", "order", "max_seq_length", "output_file"},
      "run_generate.py": {"prompt", "top_p", "export_dir"},
      "run_batch_predict.py": {"export_dir", "input", "runner",
                               "pipeline_options"},
      "demo/run_demo.py": {"workdir", "tiny", "nofresh"},
      "data_utils.train_spiece": {"input", "model_prefix", "vocab_size"},
      "data_utils.pretraining.create_pretrain_data": {
          "input_glob", "sp_path", "save_dir", "perm_size", "runner",
          "nobi_data"},
      "xlnet_tf.convert": {"from", "to", "to_format", "model",
                           "nooverwrite", "help", "helpfull"},
      "xlnet-saved-model-cli": {"dir", "tag_set", "signature_def",
                                "input_exprs", "helpfull"},
  }
  assert set(want) == set(ENTRY_POINTS)
  for entry, names in want.items():
    assert names <= flags_of(entry), (entry, names - flags_of(entry))
  assert "do_train" not in flags_of("run_embed.py")
  assert "runner" not in flags_of("run_classifier.py")
  # convert parses with a FlagValues of its own: absl's app flags are not
  # its flags.
  assert "logtostderr" not in flags_of("xlnet_tf.convert")
  assert "nohelp" not in flags_of("xlnet_tf.convert")


def test_benchmarks_flags_from_their_source():
  """The benchmarks (argparse) are read, not imported."""
  assert "benchmarks/bench_tflite.py" in ARGPARSE_SCRIPTS
  assert {"seq_len", "rounds", "help"} <= flags_of(
      "benchmarks/bench_tflite.py")
  assert "do_train" not in flags_of("benchmarks/bench_tflite.py")
  assert entry_of(["python", "benchmarks/bench_tflite.py", "--rounds=2"]) == (
      "benchmarks/bench_tflite.py", ["--rounds=2"])
