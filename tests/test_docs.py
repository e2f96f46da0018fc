"""Docs that cannot drift: README.md, CHANGELOG.md and docs/*.md, read as a
user reads them.

  1. every relative link resolves: the file exists, and a `#anchor` is a
     heading of the target (GitHub's anchor rules);
  2. every command a shell block runs with one of this project's scripts,
     modules or console scripts names one that exists, and every `--flag`
     it passes is a flag of it (tests/entry_points.py);
  3. every ```python block runs, in a working directory holding what the
     snippets name (a tiny checkpoint in the released layout under the
     released folder name, an HF folder, small SavedModels with the
     signatures the snippets call and the files exports carry, a
     TFLite file made by the project's converter, the demo's features);
  4. every dotted name of the project in backticks (`xlnet_tf.x.y`,
     `data_utils.x`) imports, every source path named (`xlnet_tf/...py`)
     exists, and the architecture page's module tree lists files that exist.

All in this process, on tiny models: a few seconds besides TensorFlow's
import.
"""

import contextlib
import glob
import io
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import spiece_path
from doc_pages import (BENCHMARKS, DOCS, PROJECT, ROOT, anchors, blocks,
                       code_spans, command_problems, commands, commands_in,
                       links, read, resolves, slug)
from entry_points import ENTRY_POINTS, entry_of
from xlnet_tf import pretrained
from xlnet_tf.export.directory import EXPORT_MARKER
from xlnet_tf.export.tflite import convert_features_export

# -- 1. links ---------------------------------------------------------------

def test_slug_follows_github():
  assert slug("Data in a bucket (gs://, s3://)") == "data-in-a-bucket-gs-s3"
  assert slug("Long documents (issue 19) — bench_long_documents.py, "
              "long_documents_accuracy.sh") == \
      "long-documents-issue-19--bench_long_documentspy-long_documents_accuracysh"
  assert slug("Where do I ...") == "where-do-i-"


@pytest.mark.parametrize("doc", DOCS + [BENCHMARKS])
def test_links_resolve(doc):
  bad = []
  for number, target in links(doc):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
      continue
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), path)) \
        if path else os.path.join(ROOT, doc)
    if not os.path.exists(full):
      bad.append(f"{doc}:{number}: {target}: no such file")
    elif anchor and full.endswith(".md") and \
        anchor not in anchors(os.path.relpath(full, ROOT)):
      bad.append(f"{doc}:{number}: {target}: no heading #{anchor} in "
                 f"{os.path.relpath(full, ROOT)}")
  assert not bad, "\n".join(bad)


def test_every_page_is_linked():
  linked = {os.path.normpath(os.path.join(os.path.dirname(doc),
                                          t.partition("#")[0]))
            for doc in DOCS for _, t in links(doc)}
  assert not [d for d in DOCS if d != "README.md" and d not in linked]


# -- 2. commands and their flags ---------------------------------------------

def test_commands_parse_as_a_user_types_them():
  text = ('X=ckpt\nF=(--runner=DirectRunner --pipeline_options="--a=1 \\\n'
          '  --b=2")\n.venv/bin/python run_batch_predict.py "${F[@]}" '
          '--input=\'a b\' --export_dir=$X # --not_a_flag\n')
  words = [[" ".join(w.split()) for w in c]
           for _, c in commands_in("```bash\n" + text + "```\n")]
  assert words == [[".venv/bin/python", "run_batch_predict.py",
                    "--runner=DirectRunner", "--pipeline_options=--a=1 --b=2",
                    "--input=a b", "--export_dir=$X"]]


@pytest.mark.parametrize("doc", DOCS + [BENCHMARKS])
def test_commands_name_entries_and_their_flags(doc):
  bad = command_problems(doc, read(doc))
  assert not bad, "\n".join(bad)


def test_command_problems_are_found():
  text = ("```bash\nX=1\nF=\"--bi_data --bogus_flag\"\n"
          "python run_pretrain.py $F --model_dir=m --nobi_data \\\n"
          "  --pipeline_options=\"--not_ours=1\" --strategy=gpu\n"
          "python -m xlnet_tf.no_such_module --a\n"
          ".venv/bin/python run_nothing.py --x\n"
          "python -m apache_beam.runners.worker.worker_pool_main --port=1\n"
          "make test-quick PYTHON=python3.12 no-such-target\n"
          "```\n")
  assert command_problems("t.md", text) == [
      "t.md:4: run_pretrain.py has no --bogus_flag",
      "t.md:4: run_pretrain.py has no --pipeline_options",
      "t.md:4: run_pretrain.py --strategy=gpu: not one of default, "
      "mirrored, multi_worker, tpu",
      "t.md:6: python -m xlnet_tf.no_such_module: no such entry point",
      "t.md:7: run_nothing.py: no such script",
      "t.md:9: make no-such-target: no such target"]


def test_docs_run_every_entry_point():
  """The flags test reads real commands: every entry point is run by some
  doc (and would pass on none)."""
  named = {entry_of(words)[0] for doc in DOCS for _, words in commands(doc)
           if entry_of(words)}
  # The demo and the SentencePiece trainer are named in prose (the demo
  # prints the trainer's command).
  missing = set(ENTRY_POINTS) - named - {"data_utils.train_spiece",
                                         "demo/run_demo.py"}
  assert not missing, missing


# -- 4. names and paths --------------------------------------------------------

SOURCE_DIRS = ("", "xlnet_tf", "data_utils", "xlnet_tf/tasks")
# The original's files (zihangdai/xlnet), named where flags keep its names.
ORIGINAL_FILES = {"data_utils.py", "train.py", "train_gpu.py"}


def source_files() -> set:
  """Every file name of the project's source (bare names, as `x.py`)."""
  names = set()
  for top in PROJECT + ("tests", "benchmarks", "demo"):
    for _, _, files in os.walk(os.path.join(ROOT, top)):
      names.update(files)
  return names | set(os.listdir(ROOT))


def path_problem(word: str, folder):
  """Why a path-like `word` of a code span names no file, or None. A bare
  `x.py` is looked up in the folder a span before it in the same line (or
  table cell) named (`tasks/squad/`: `model.py`), else anywhere in the
  source."""
  if re.fullmatch(r"[\w-]+(/[\w.-]+)*/[\w-]+\.py", word) or \
      re.fullmatch(r"(xlnet_tf|data_utils|tests|benchmarks|demo)"
                   r"(/[\w.-]+)*/?", word):
    if not any(os.path.exists(os.path.join(ROOT, d, word))
               for d in SOURCE_DIRS):
      return "no such file"
  elif re.fullmatch(r"[\w-]+\.py", word) and word not in ORIGINAL_FILES:
    if folder and not os.path.exists(os.path.join(folder, word)):
      return f"not in {os.path.relpath(folder, ROOT)}/"
    if word not in source_files():
      return "no such file"
  return None


def defines(path: str, name: str) -> bool:
  """Whether the source file `path` (as the docs name it) defines `name`."""
  for folder in SOURCE_DIRS:
    full = os.path.join(ROOT, folder, path)
    if os.path.isfile(full):
      with open(full, encoding="utf-8") as f:
        return re.search(rf"^\s*(def|class) {name}\b|^{name}\s*=", f.read(),
                         re.M) is not None
  return False


# benchmarks/README.md names files as they were at a dated commit: history.
@pytest.mark.parametrize("doc", DOCS)
def test_names_and_paths_exist(doc):
  bad, where, folder = [], None, None
  for number, cell, span in code_spans(doc, cells=True):
    if (number, cell) != where:
      where, folder = (number, cell), None
    named = re.fullmatch(r"([\w/.-]+\.py): (\w+)", span)
    if named and not defines(*named.groups()):
      bad.append(f"{doc}:{number}: {span}: not defined there")
    for word in re.findall(r"[\w./<>*-]+", span):
      word = word.rstrip(".")
      if "<" in word or "*" in word:
        continue
      if re.fullmatch(r"(xlnet_tf|data_utils)(\.\w+)+", word) and \
          not word.endswith(".py"):
        if not resolves(word):
          bad.append(f"{doc}:{number}: {word} does not import")
        continue
      problem = path_problem(word, folder)
      if problem:
        bad.append(f"{doc}:{number}: {word}: {problem}")
      elif word.endswith("/") and span == word:
        folder = next((os.path.join(ROOT, d, word) for d in SOURCE_DIRS
                       if os.path.isdir(os.path.join(ROOT, d, word))), folder)
  assert not bad, "\n".join(bad)


def test_module_tree_lists_files_that_exist():
  text = read("docs/architecture.md")
  tree = text[text.index("## Modules"):]
  body = tree[tree.index("```") + 3:]
  body = body[body.index("\n") + 1:body.index("```")]
  bad, top = [], None
  for line in body.split("\n"):
    m = re.match(r"^(\w+)/\s", line + " ")
    if m:
      top = m.group(1) if m.group(1) in PROJECT else None
      continue
    m = re.match(r"^  (\S[^ ]*(?:, \S+)*)", line)
    if top and m:
      for name in m.group(1).split(","):
        name = name.strip()
        if name and re.fullmatch(r"[\w.]+/?", name) and not \
            os.path.exists(os.path.join(ROOT, top, name)):
          bad.append(f"{top}/{name}")
  assert not bad, "docs/architecture.md's module tree: no such file " + \
      ", ".join(bad)


# -- 3. the Python snippets run ------------------------------------------------

RELEASED = "xlnet_cased_L-12_H-768_A-12"
LABELS = ["neg", "pos"]  # the walkthroughs' --label_list
TINY = dict(n_token=32000, n_layer=1, d_model=8, n_head=2, d_head=4,
            d_inner=16, ff_activation="gelu", untie_r=True)


def python_snippets():
  for doc in DOCS:
    for lang, first, body in blocks(read(doc))[0]:
      if lang in ("python", "py"):
        yield pytest.param(doc, first, body, id=f"{doc}:{first}")


class _Classifier(tf.Module):
  """The signatures the snippets call, with the real exports' names, inputs
  and outputs (tests/test_export_*.py test the real ones)."""

  def __init__(self, length=None):
    super().__init__()
    self.w = tf.Variable(tf.ones([2]))
    self.length = length

  def _outputs(self, logits):
    class_id = tf.argmax(logits, -1, output_type=tf.int32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits),
            "class_id": class_id,
            "label": tf.gather(tf.constant(LABELS), class_id)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve_text(self, text):
    n = tf.cast(tf.strings.length(text), tf.float32)
    return self._outputs(n[:, None] * self.w)

  def features(self, input_ids, segment_ids, input_mask):
    real = tf.reduce_sum(1.0 - input_mask, -1) + tf.cast(
        tf.reduce_sum(input_ids + segment_ids, -1), tf.float32) * 0.0
    return self._outputs(real[:, None] * self.w)


def _features_spec(length=None):
  return [tf.TensorSpec([None, length], tf.int32, "input_ids"),
          tf.TensorSpec([None, length], tf.int32, "segment_ids"),
          tf.TensorSpec([None, length], tf.float32, "input_mask")]


def _text_export(path):
  model = _Classifier()
  tf.saved_model.save(model, path, signatures={
      "serve_text": model.serve_text})


def _features_export(path, length):
  model = _Classifier()
  fn = tf.function(model.features, input_signature=_features_spec(length))
  tf.saved_model.save(model, path, signatures={"serving_default": fn})


def _segments_export(path, n_layer=1, mem=4, d=2):
  model = _Classifier()

  @tf.function(input_signature=[tf.TensorSpec([], tf.int32, "batch_size")])
  def initial_memory(batch_size):
    return {"mems": tf.zeros([n_layer, batch_size, mem, d]),
            "mems_mask": tf.ones([batch_size, mem])}

  @tf.function(input_signature=_features_spec() + [
      tf.TensorSpec([n_layer, None, mem, d], tf.float32, "mems"),
      tf.TensorSpec([None, mem], tf.float32, "mems_mask")])
  def serve_segment(input_ids, segment_ids, input_mask, mems, mems_mask):
    out = model.features(input_ids, segment_ids, input_mask)
    return {**out, "new_mems": mems + 1.0, "new_mems_mask": mems_mask * 0.0}

  model.initial_memory, model.serve_segment = initial_memory, serve_segment
  tf.saved_model.save(model, path, signatures={
      "initial_memory": initial_memory, "serve_segment": serve_segment})


def _carry_spiece(path, shared, length):
  """What a classifier's export carries besides its signatures: its
  SentencePiece model and the marker's `batch` entry (how to feed it)."""
  os.makedirs(os.path.join(path, "assets.extra"))
  shutil.copy(spiece_path(shared),
              os.path.join(path, "assets.extra", "spiece.model"))
  with open(os.path.join(path, EXPORT_MARKER), "w", encoding="utf-8") as f:
    json.dump({"kind": "classifier", "batch": {
        "labels": LABELS, "lower": False, "max_seq_length": length,
        "signature": "serve_features",
        "spiece_model": "assets.extra/spiece.model"}}, f)


def _features_npz(path, rows, length):
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  ids = np.zeros([rows, length], np.int32)
  ids[:, -2:] = [4, 3]
  mask = np.ones([rows, length], np.float32)
  mask[:, -4:] = 0
  seg = np.full([rows, length], 4, np.int32)
  seg[:, -4:] = [0, 0, 0, 2]
  np.savez(path, input_ids=ids, segment_ids=seg, input_mask=mask)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, shared):
  """What the snippets name, as a user would have it."""
  work = tmp_path_factory.mktemp("docs")
  released = work / RELEASED
  released.mkdir()
  with open(released / "xlnet_config.json", "w") as f:
    json.dump(TINY, f)
  config = xt.XLNetConfig.from_json(str(released / "xlnet_config.json"))
  lm = xt.XLNetPretrainer(xt.XLNetModel(config, xt.RunOptions()))
  xt.save_original_checkpoint(lm, str(released / "xlnet_model.ckpt"))
  shutil.copy(spiece_path(shared), released / "spiece.model")
  pretrained.save_hf_weights(lm, str(work / "xlnet-base-cased"))
  _text_export(str(work / "finetuned/sst-2/saved_model/text/4000"))
  exports = work / "work" / "model" / "saved_model"  # the walkthroughs' run
  _text_export(str(exports / "text" / "1000"))
  features = str(exports / "features" / "1000")
  _features_export(features, 16)
  for servable in ("text", "features"):
    _carry_spiece(str(exports / servable / "1000"), shared, 16)
  os.makedirs(exports / "tflite" / "1000")
  with open(exports / "tflite" / "1000" / "int8.tflite", "wb") as f:
    f.write(convert_features_export(features, "int8"))
  _segments_export(str(work / "finetuned" / "imdb" / "saved_model" /
                       "features" / "4000"))
  _features_npz(str(work / "out" / "demo" / "queries.npz"), 3, 16)
  _features_npz(str(work / "document.npz"), 1, 2 * 128)
  return work


@pytest.mark.parametrize("doc,line,source", list(python_snippets()))
def test_python_snippet_runs(doc, line, source, workdir, monkeypatch):
  monkeypatch.chdir(workdir)
  code = compile("\n" * (line - 1) + source, os.path.join(ROOT, doc), "exec")
  with contextlib.redirect_stdout(io.StringIO()):
    exec(code, {"__name__": "__doc_snippet__"})  # noqa: S102


def test_snippets_call_signatures_the_exports_have():
  """The snippets' `signatures["..."]` are names the real exports write."""
  sources = ""
  for path in glob.glob(os.path.join(ROOT, "xlnet_tf", "**", "*.py"),
                        recursive=True):
    with open(path, encoding="utf-8") as f:
      sources += f.read()
  called = {m for doc in DOCS for lang, _, body in blocks(read(doc))[0]
            if lang == "python"
            for m in re.findall(r"signatures\[\"(\w+)\"\]", body)}
  assert called
  assert not [name for name in called if f'"{name}"' not in sources]


def test_model_kinds_are_the_package_s():
  """The kinds the conversion page lists and its commands pass to
  `--model` are `pretrained.model_kinds()`, no more and no fewer."""
  kinds = set(pretrained.model_kinds())
  text = read("docs/conversion.md")
  sentence = text[text.index("A model kind"):]
  sentence = sentence[:sentence.index("\n-")]
  assert set(re.findall(r"`(\w+)`", sentence)) == kinds
  used = {word.split("=", 1)[1] for doc in DOCS for _, words in commands(doc)
          for entry in [entry_of(words)] if entry and
          entry[0] == "xlnet_tf.convert" for word in entry[1]
          if word.startswith("--model=")}
  assert used and used <= kinds, used - kinds


def test_defines_reads_the_source():
  assert defines("kernels/attention.py", "segment_score")
  assert not defines("kernels/attention.py", "segment_scor")
  assert not defines("kernels/no_such_file.py", "segment_score")
