"""Every page's walkthrough (its `## Walkthrough` section) run as written,
with a tiny model where the page downloads XLNet-Base: the folders the
download lines fetch are put in place (released and HuggingFace layouts,
tests/model_folders.py), with a user's CSV, a corpus and a folder of texts.
Each project command runs with the page's flags, and after them the few
that make it tiny (a model config, lengths, steps), which override the
page's. Then each step's output is checked, and the journey goes on:
records, pretraining, fine-tuning from the pretrained folder and from
both downloaded folders on the CSV, the exports, batch prediction over the
texts and a serving call of the export that agrees with it."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 (the text export's ops)

import xlnet_tf as xt
from conftest import corpus_slice, early_result, run, shared_dir, spiece_path
from doc_pages import ROOT, commands_in, read
from entry_points import entry_of
from model_folders import CONFIG, LABELS, write_csv_task, write_folders
from xlnet_tf import pretrained

# What the download lines fetch (the fixture puts it there) and what the
# pages show without running (a server): never run here.
NOT_RUN = ("wget", "unzip", "huggingface-cli", "docker", "curl")
# The flags that make each job tiny, after the page's own.
TINY = {
    "data_utils.pretraining.create_pretrain_data": [
        "--bsz_per_host=4", "--seq_len=32", "--reuse_len=16",
        "--num_predict=6", "--perm_size=8", "--task_size_mb=0.02"],
    "run_pretrain.py": [
        "--model_config_path=tiny_config.json", "--train_batch_size=4",
        "--seq_len=32", "--reuse_len=16", "--perm_size=8", "--num_predict=6",
        "--mem_len=16", "--train_steps=4", "--warmup_steps=0",
        "--iterations=2"],
    "run_classifier.py": [
        "--max_seq_length=32", "--train_batch_size=4", "--train_steps=4",
        "--warmup_steps=0", "--iterations=2", "--eval_batch_size=8",
        "--predict_batch_size=8"],
    "run_batch_predict.py": [],
}
PAGES = ("docs/pretraining.md", "docs/classification.md",
         "docs/batch_prediction.md")
TEXTS = {"a.txt": ["A gripping, well-acted film.", "Two hours lost.",
                   "good, said the review"],
         "b.txt": ["poor, said the review", "great fun"]}


def walkthrough(doc: str):
  """(line, words) of the commands under the page's `## Walkthrough`."""
  text = read(doc)
  match = re.search(r"^## Walkthrough\n(.*?)(?=^## |\Z)", text, re.M | re.S)
  assert match, f"{doc}: no ## Walkthrough section"
  found = commands_in(match.group(1))
  assert found, f"{doc}: its walkthrough runs no command"
  return found


def _command(words):
  """The argv that runs a project command of a page, from the checkout."""
  entry, args = entry_of(words)
  assert entry in TINY, f"{entry}: no tiny flags for it here"
  script = ([os.path.join(ROOT, entry)] if entry.endswith(".py")
            else ["-m", entry])
  return [sys.executable, *script, *args, *TINY[entry]]


def _run_page(doc, work):
  """Runs the page's walkthrough in `work`: {first word or entry: [results
  in order]}; a command that fails stops the journey with its output."""
  done = {}
  for line, words in walkthrough(doc):
    if words[0] in NOT_RUN:
      done.setdefault(words[0], []).append(None)
      continue
    if entry_of(words) is None:   # a shell command shown to the user
      res = subprocess.run(words, cwd=work, capture_output=True, text=True,
                           timeout=60, check=False)
    else:
      res = run(_command(words), 600, cwd=work)
    assert res.returncode == 0, (f"{doc}:{line}: {' '.join(words)}\n"
                                 f"{res.stderr[-3000:]}")
    key = entry_of(words)[0] if entry_of(words) else words[0]
    done.setdefault(key, []).append(res)
  return done


def journey(work):
  """The pages in order in one folder, as a user would run them."""
  shared = shared_dir()
  write_folders(work / "xlnet_cased_L-12_H-768_A-12",
                work / "xlnet-base-cased", spiece_path(shared))
  CONFIG.to_json(str(work / "tiny_config.json"))
  rows = write_csv_task(work / "my_task")
  os.makedirs(work / "corpus")
  with open(corpus_slice(shared, work, 600), encoding="utf-8") as f:
    lines = f.readlines()
  for i in range(2):  # two files of ~40 KB: two tasks of --task_size_mb
    with open(work / "corpus" / f"part-{i}.txt", "w", encoding="utf-8") as f:
      f.writelines(lines[i * 300:(i + 1) * 300])
  os.makedirs(work / "reviews")
  for name, lines in TEXTS.items():
    (work / "reviews" / name).write_text("\n".join(lines) + "\n")
  ran = {doc: _run_page(doc, work) for doc in PAGES}
  readme = work / "readme"   # the README's own, in a folder of its own
  os.makedirs(readme)
  for name in ("xlnet_cased_L-12_H-768_A-12", "my_task", "reviews"):
    shutil.copytree(work / name, readme / name)
  ran["README.md"] = _run_page("README.md", readme)
  return work, rows, ran


pytestmark = [pytest.mark.early("journey"),
              pytest.mark.long("every page's walkthrough, start to finish: "
                               "records, pretraining, three fine-tunings, "
                               "batch prediction twice")]


@pytest.fixture(scope="module")
def done(shared):  # pylint: disable=unused-argument  (without ../shared)
  return early_result(journey)


def _json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def test_the_downloads_are_the_only_lines_not_run(done):
  _, _, ran = done
  assert {doc: sorted(k for k in r if k in NOT_RUN)
          for doc, r in ran.items()} == {
              "docs/pretraining.md": [],
              "docs/classification.md": ["huggingface-cli", "unzip", "wget"],
              "docs/batch_prediction.md": [],
              "README.md": ["unzip", "wget"]}


def test_records_then_pretraining_make_a_model_folder(done):
  """Every task built in one process; the pretrained folder holds weights,
  config and SentencePiece model, and loads as a released one does."""
  work, _, _ = done
  info = _json(work / "records" / "corpus_info.json")
  assert info["num_task"] > 1 and info["pass_ids"] == [0]
  infos = [_json(work / "records" / "tfrecords" / n) for n in sorted(
      os.listdir(work / "records" / "tfrecords"))
           if n.startswith("record_info-")]
  assert sorted(i["task"] for i in infos) == list(range(info["num_task"]))
  assert all(i["num_batch"] > 0 for i in infos)
  folder = work / "pretrained" / "original"
  assert sorted(os.listdir(folder)) == [
      "checkpoint", "spiece.model", "xlnet_config.json",
      "xlnet_model.ckpt.data-00000-of-00001", "xlnet_model.ckpt.index"]
  loaded = pretrained.load(str(folder))
  assert loaded.config == CONFIG
  trained = tf.train.load_checkpoint(str(work / "pretrained"))
  np.testing.assert_array_equal(
      loaded.model.word_embedding.numpy(),
      trained.get_tensor("model/encoder/word_embedding.Slookup_table/"
                         ".ATTRIBUTES/VARIABLE_VALUE"))


@pytest.mark.parametrize("model_dir", ["mine/model", "work/model",
                                       "work_hf/model",
                                       "readme/work/model"])
def test_each_finetuning_evaluated_predicted_and_exported(done, model_dir):
  """From the pretrained folder, the released one, HuggingFace's, and the
  README's: the metric on dev.csv at the last step, a label per test row
  (where the page predicts), both exports of the last step."""
  work, rows, _ = done
  model = work / model_dir
  results = _json(model / "eval_results_dev.json")
  assert [(r["step"], r["num_examples"]) for r in results["results"]] == [
      (4, len(rows["dev"]))]
  for servable in ("features", "text"):
    assert "4" in os.listdir(model / "saved_model" / servable)
    assert os.path.isfile(model / "saved_model" / servable / "4" /
                          "saved_model.pb")
  if model_dir == "mine/model":
    return   # the pretraining page's fine-tuning does not --do_predict
  with open(model / "predictions" / "generic.tsv", encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert lines[0] == "index\tprediction"
  assert [line.split("\t")[0] for line in lines[1:]] == [
      f"test-{i}" for i in range(1, len(rows["test"]) + 1)]
  assert {line.split("\t")[1] for line in lines[1:]} <= set(LABELS)


@pytest.mark.parametrize("root", ["", "readme"])
def test_batch_prediction_rows_agree_with_the_export(done, root):
  """A row per line of the texts, and each label the one the text export
  gives the same text in this process (what a server would answer)."""
  work, _, _ = done
  out = work / root / "predicted"
  manifest = _json(out / "manifest.json")
  total = sum(len(lines) for lines in TEXTS.values())
  assert (manifest["counts"]["rows_read"], manifest["counts"]["predicted"]) \
      == (total, total)
  rows = []
  for name in sorted(os.listdir(out)):
    if name.startswith("predictions-"):
      with open(out / name, encoding="utf-8") as f:
        rows += [json.loads(line) for line in f]
  assert sorted((r["file"], r["line"]) for r in rows) == sorted(
      (name, i + 1) for name, lines in TEXTS.items()
      for i in range(len(lines)))
  export = tf.saved_model.load(str(work / root / "work" / "model" /
                                   "saved_model" / "text" / "4"))
  serve = export.signatures["serve_text"]
  texts = [TEXTS[r["file"]][r["line"] - 1] for r in rows]
  answer = serve(text=tf.constant(texts))
  labels = [label.decode() for label in answer["label"].numpy()]
  assert [r["label"] for r in rows] == labels
