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
NOT_RUN = ("wget", "unzip", "tar", "huggingface-cli", "docker", "curl")
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
    "run_ner.py": [
        "--max_seq_length=32", "--doc_stride=12", "--train_batch_size=4",
        "--train_steps=4", "--iterations=2", "--eval_batch_size=8",
        "--predict_batch_size=8"],
    "run_squad.py": [
        "--max_seq_length=64", "--doc_stride=32", "--max_query_length=16",
        "--train_batch_size=4", "--train_steps=4", "--iterations=2",
        "--predict_batch_size=8", "--num_proc=1"],
    "run_race.py": [
        "--max_seq_length=64", "--max_qa_length=16", "--train_batch_size=2",
        "--train_steps=4", "--iterations=2", "--eval_batch_size=4"],
    "run_embed.py": ["--max_seq_length=32"],
    "run_score.py": ["--max_seq_length=32"],
    "run_generate.py": ["--max_new_tokens=4"],
    "run_infill.py": [],
}
PAGES = ("docs/pretraining.md", "docs/classification.md",
         "docs/batch_prediction.md", "docs/ner.md", "docs/squad.md",
         "docs/race.md", "docs/language_model.md")
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


def _sentences(source, dest, start, n):
  """CoNLL sentences [start, start + n) of `source` into `dest`."""
  with open(source, encoding="utf-8") as f:
    sentences = [s for s in f.read().split("\n\n") if s.strip()]
  with open(dest, "w", encoding="utf-8") as f:
    f.write("\n\n".join(sentences[start:start + n]) + "\n\n")


def _task_data(shared, work):
  """What the NER, SQuAD, RACE and language-model pages read, small: slices
  of the shared CoNLL-2003, SQuAD 1.1 dev and RACE dev, and texts."""
  data = os.path.join(shared, "data")
  os.makedirs(work / "conll2003")
  for name, start, n in (("eng.train", 0, 40), ("eng.testa", 0, 12),
                         ("eng.testb", 12, 10)):
    source = "eng.train" if name == "eng.train" else "eng.testa"
    _sentences(os.path.join(data, "conll2003", source),
               work / "conll2003" / name, start, n)
  with open(os.path.join(data, "squad", "dev-v1.1.json"),
            encoding="utf-8") as f:
    squad = json.load(f)
  for name, article in (("train-v1.1.json", 0), ("dev-v1.1.json", 1)):
    part = dict(squad["data"][article], paragraphs=squad["data"][article][
        "paragraphs"][:1])
    with open(work / name, "w", encoding="utf-8") as f:
      json.dump({"version": "1.1", "data": [part]}, f)
  race = os.path.join(data, "race", "RACE", "dev")
  for split, pick in (("train", slice(0, 2)), ("dev", slice(2, 4))):
    for level in ("middle", "high"):
      os.makedirs(work / "RACE" / split / level)
      for name in sorted(os.listdir(os.path.join(race, level)))[pick]:
        shutil.copy(os.path.join(race, level, name),
                    work / "RACE" / split / level / name)
  (work / "texts.txt").write_text("The film is good.\nA dog ran home.\n")


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
  _task_data(shared, work)
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
              "docs/batch_prediction.md": [], "docs/ner.md": [],
              "docs/squad.md": ["wget"], "docs/race.md": ["tar"],
              "docs/language_model.md": [],
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
  assert sorted(os.listdir(folder)) == [  # the export and its ledger
      ".xlnet_tf_outputs.json", "checkpoint", "spiece.model",
      "xlnet_config.json",
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


def _jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def test_ner_squad_and_race_pages(done):
  """Each page's run: its metric file and its predictions, a tag per input
  word and an answer per question."""
  work, _, _ = done
  ner = work / "ner" / "model"
  assert _json(ner / "eval_results_dev.json")["best"]["step"] == 4
  predicted = (ner / "predictions" / "eng.testb.predictions.conll"
               ).read_text(encoding="utf-8")
  given = (work / "conll2003" / "eng.testb").read_text(encoding="utf-8")
  def words(text):
    return [line.split()[0] for line in text.splitlines()
            if line and not line.startswith("-DOCSTART-")]
  assert words(predicted) == words(given)
  with open(work / "dev-v1.1.json", encoding="utf-8") as f:
    questions = {q["id"] for p in json.load(f)["data"][0]["paragraphs"]
                 for q in p["qas"]}
  answers = _json(work / "squad" / "model" / "predictions" /
                  "dev-v1.1.json.predictions.json")
  assert set(answers) == questions
  assert {"exact_match", "f1"} <= set(_json(
      work / "squad" / "model" / "predictions" / "dev-v1.1.json.results.json"))
  race = _json(work / "race" / "model" / "eval_results_dev.json")
  assert race["best"]["step"] == 4


def test_language_model_page(done):
  """A vector and a score per text, a continuation, a filled text."""
  work, _, _ = done
  lm = work / "lm"
  assert [r["text"] for r in _jsonl(lm / "embeddings.jsonl")] == [
      "The film is good.", "A dog ran home."]
  # [texts, layers (the last), d_model]
  assert np.load(lm / "embeddings.masked_mean.npy").shape == (
      2, 1, CONFIG.d_model)
  scores = _jsonl(lm / "scores.jsonl")
  assert len(scores) == 2 and all(
      abs(r["sum"] - sum(r["log_probs"])) < 1e-3 for r in scores)
  assert [r["prompt"] for r in _jsonl(lm / "generated.jsonl")] == [
      "The film is"]
  filled = _jsonl(lm / "filled.jsonl")
  assert len(filled) == 1 and "<mask>" not in filled[0]["filled"]
