"""docs/troubleshooting.md's error lines are lines the code prints.

Each line of the page's blocks is `program: message`:
  * `program` is an entry point's name as its script passes it to
    `run_main` / `run_app`, and every `--flag` in the line is one of that
    entry point's flags (tests/entry_points.py);
  * the message is one of the source's own: it matches a string template
    of xlnet_tf/, data_utils/ or a run_*.py (an f-string or string literal,
    read with `ast`, each `{...}` standing for any value), or a template
    ending in `: {...}` whose value is such a message (`f"{where}:
    {missing}"`);
  * where a line can be made in this process, it is made, with the page's
    paths in a scratch folder, and must be on the page whole.
A reworded message, a renamed flag or program fails here."""

import ast
import contextlib
import glob
import io
import json
import os
import re
import shutil
import types

import pytest
from absl import flags

import xlnet_tf as xt
from conftest import spiece_path
from data_utils.classification import reader as cd
from data_utils.errors import parse_flags, run_main
from data_utils.outputs import check_outputs
from data_utils.path_checks import tf_path
from data_utils.pretraining.examples import PretrainDataConfig
from data_utils.pretraining.reader import load_record_infos
from data_utils.pretraining.save_dir import format_name, record_info_path
from doc_pages import ROOT, blocks, read
from entry_points import ENTRY_POINTS, flags_of
from input_cases import workflow_options
from xlnet_tf import cli, model_folder, precision
from xlnet_tf.tasks.classification.workflow import (ClassifierOptions,
                                                    ClassifierWorkflow)

# The entry scripts live in the project root (entry_points puts it on the
# path).
import run_pretrain  # noqa: E402  pylint: disable=wrong-import-position

PAGE = "docs/troubleshooting.md"
LINES = 15
SOURCES = ("xlnet_tf", "data_utils")
# A template with fewer fixed characters (a leading `--flag=` not counted)
# says too little to hold a line.
MIN_FIXED = 20


def page_lines():
  """Every line of the page's ```text blocks."""
  return [line for lang, _, body in blocks(read(PAGE))[0] if lang == "text"
          for line in body.split("\n") if line.strip()]


# -- the source's message templates ------------------------------------------

def _parts(node):
  """A string expression as fixed text and values (None), or None."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return [node.value]
  if isinstance(node, ast.JoinedStr):
    return [v.value if isinstance(v, ast.Constant) else None
            for v in node.values]
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
    left, right = _parts(node.left), _parts(node.right)
    if left is not None and right is not None:
      return left + right
  return None


class Template:
  """A message template: its regex, its fixed characters, its longest fixed
  piece (a cheap test before the regex), and its head (the template
  without a final value, where it ends in `: {...}`)."""

  def __init__(self, parts):
    flag = re.match(r"--\w+=", parts[0] or "")
    self.fixed = sum(len(p) for p in parts if p is not None) - (
        flag.end() if flag else 0)
    self.longest = max((p for p in parts if p), key=len, default="")
    self.regex = re.compile(self._pattern(parts), re.S)
    head = parts[:-1]
    self.head = (re.compile(self._pattern(head), re.S) if parts[-1] is None
                 and head and head[-1] and head[-1].endswith(": ") else None)

  @staticmethod
  def _pattern(parts):
    return "".join("(.+?)" if p is None else re.escape(p) for p in parts)


@pytest.fixture(scope="module")
def templates():
  files = [p for d in SOURCES
           for p in glob.glob(os.path.join(ROOT, d, "**", "*.py"),
                              recursive=True)]
  files += glob.glob(os.path.join(ROOT, "run_*.py"))
  found = {}
  for path in files:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      parts = _parts(node)
      if parts:
        found[tuple(parts)] = Template(parts)
  return list(found.values())


def _whole(message, templates):
  return any(t.fixed >= MIN_FIXED and t.longest in message and
             t.regex.fullmatch(message) for t in templates)


def is_code_message(message, templates) -> bool:
  """Whether the code makes `message`: a template whole, or a template's
  head (`...: `) followed by a message the code makes whole."""
  if _whole(message, templates):
    return True
  for cut in [m.end() for m in re.finditer(": ", message)]:
    if _whole(message[cut:], templates) and any(
        t.head and t.head.fullmatch(message[:cut]) for t in templates):
      return True
  return False


def test_the_matcher_knows_a_message_from_a_near_miss(templates):
  line = ("--data_dir=my_task: dev.csv not found (needed by --do_eval for "
          "split 'dev')")
  assert is_code_message(line, templates)
  assert not is_code_message(line.replace("not found", "is missing"),
                             templates)
  # `f"--model_config_path={value}"` alone holds nothing.
  assert not is_code_message("--model_config_path=large is wrong", templates)
  # Composed: `f"{where}: {missing}"` with a whole message after the head.
  composed = ("--output_dir=s3://b/out: no credentials for s3:// (set "
              "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an AWS "
              "profile)")
  assert is_code_message(composed, templates)
  assert not is_code_message(composed.replace("no credentials", "no keys"),
                             templates)
  assert not is_code_message("--output_dir=s3://b/out: anything at all",
                             templates)


# -- the page -----------------------------------------------------------------

def _entry(program: str):
  """The entry point whose script runs as `program` (its `run_main` /
  `run_app` / `run_finetune_main` name), or None."""
  for entry, module in ENTRY_POINTS.items():
    if re.split(r"[./]", entry.removesuffix(".py"))[-1] != program:
      continue
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    with open(path, encoding="utf-8") as f:
      if re.search(r"\b(run_main|run_app|run_finetune_main)\(\s*"
                   rf"\"{program}\"", f.read()):
        return entry
  return None


def test_the_page_has_its_lines():
  lines = page_lines()
  assert len(lines) == LINES and len(set(lines)) == LINES, lines


@pytest.mark.parametrize("line", page_lines())
def test_each_line_is_printed_by_the_code(line, templates):
  program, sep, message = line.partition(": ")
  assert sep, line
  entry = _entry(program)
  assert entry, f"{program}: no entry point runs as that program"
  known = flags_of(entry)
  # `--name=value` is the syntax, not a flag.
  named = re.findall(r"--(\w+)\b(?!=value)", message)
  unknown = [f for f in named if f not in known]
  assert not unknown, f"{entry} has no --{', --'.join(unknown)}"
  assert is_code_message(message, templates), line


# -- the lines made here ------------------------------------------------------

def _line(program, body) -> str:
  """`body` run as a script runs it: its one stderr line."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    try:
      code = run_main(program, body)
    except SystemExit as e:
      code = e.code
  assert code == 2, err.getvalue()
  return err.getvalue().rstrip("\n")


def _unexpected_arguments():
  values = flags.FlagValues()
  flags.DEFINE_string("input_glob", None, "", flag_values=values)
  return parse_flags("create_pretrain_data", [
      "create_pretrain_data", "--input_glob", "corpus/a.txt", "corpus/b.txt",
      "corpus/c.txt"], values)


def _nothing_to_do():
  f = types.SimpleNamespace(num_cpu_devices=0, do_train=False, do_eval=False,
                            do_predict=False)
  return cli.run_finetune_main("run_classifier", f, None, None)


def _records():
  built = PretrainDataConfig(bsz_per_host=16)
  os.makedirs("records/tfrecords")
  with open(record_info_path("records/tfrecords", "train", 0, 0, built), "w",
            encoding="utf-8") as f:
    json.dump({"config": built.to_dict(), "num_batch": 136, "filenames": [
        format_name("train-0-0", built, "tfrecords")]}, f)
  asked = PretrainDataConfig(bsz_per_host=32).to_dict()
  load_record_infos("records/tfrecords", "train", asked)


def _resume():
  os.makedirs("pretrained")
  model_folder.read_config("base").to_json("pretrained/xlnet_config.json")
  run_pretrain.check_resume(types.SimpleNamespace(model_dir="pretrained"),
                            model_folder.read_config("large"),
                            xt.RunOptions())


def _bfloat16(monkeypatch):
  monkeypatch.setattr(precision, "cpu_flags", lambda *_: frozenset(
      {"avx2", "avx512f", "avx512_bf16"}))
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
  precision.dtype_policy(xt.RunOptions(use_bfloat16=True))


def _generic(shared, tmp_path):
  ClassifierWorkflow(workflow_options(
      ClassifierOptions, shared, tmp_path, task_name="generic",
      generic=cd.GenericSpec()))


def test_lines_made_here_are_on_the_page(shared, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  released, hf = "xlnet_cased_L-12_H-768_A-12", "xlnet-base-cased"
  os.makedirs(released)
  model_folder.read_config("base").to_json(f"{released}/xlnet_config.json")
  os.makedirs(hf)
  shutil.copy(spiece_path(shared), f"{hf}/spiece.model")
  os.makedirs("my_task")
  os.makedirs("work/model/predictions")
  with open("work/model/predictions/generic.tsv", "w", encoding="utf-8") as f:
    f.write("my own notes\n")
  dev = cd.split_files("generic", "dev", cd.GenericSpec(delimiter=","))
  classifier = {
      "nothing to do": _nothing_to_do,
      "config": lambda: model_folder.resolve(None, None, None),
      "no config": lambda: model_folder.resolve(hf, None, None),
      "no spiece": lambda: model_folder.resolve(released, None, None),
      "disagrees": lambda: model_folder.resolve(released, "large", None),
      "generic": lambda: _generic(shared, tmp_path / "generic"),
      "split": lambda: cd.check_split_files("my_task", dev, "dev",
                                            "--do_eval"),
      "not ours": lambda: check_outputs(
          ["work/model/predictions/generic.tsv"], "predict_dir"),
      "s3": lambda: tf_path("s3://my-bucket/model", "model_dir"),
      "bfloat16": lambda: _bfloat16(monkeypatch)}
  made = [_line("run_classifier", body) for body in classifier.values()]
  made += [_line("create_pretrain_data", _unexpected_arguments),
           _line("run_pretrain", _records), _line("run_pretrain", _resume)]
  missing = [line for line in made if line not in page_lines()]
  assert not missing, "\n".join(missing)
