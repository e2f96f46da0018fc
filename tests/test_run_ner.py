"""run_ner.py end to end on a slice of eng.train with a tiny model: train,
evaluate on eng.testa, predict an unseen file, export, query the export
with raw text from a fresh process; and its one-line errors."""

import json
import os
import subprocess
import sys

import pytest

import xlnet_tf as xt
from data_utils.ner.reader import read_ner
from tests.conlleval_reference import score_file
from conftest import (early_result, event_scalars, run, shared_dir,
                      spiece_path, tree_digest)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every test reads the trained model, whose run begins with the session.
pytestmark = pytest.mark.early("ner_training")
TINY = xt.XLNetConfig(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64,
                      n_token=32000, ff_activation="gelu", untie_r=True)


def _conll_slice(source, target, first, count):
  """Sentences [first, first + count) of a CoNLL file, with the
  -DOCSTART- lines among them, as a new file."""
  with open(source, encoding="utf-8") as f:
    blocks = f.read().split("\n\n")
  kept, n = [], 0
  for block in blocks:
    if not block.strip():
      continue
    if block.startswith("-DOCSTART-"):
      if first <= n < first + count:
        kept.append(block)
      continue
    if first <= n < first + count:
      kept.append(block)
    n += 1
  with open(target, "w", encoding="utf-8") as f:
    f.write("\n\n".join(kept) + "\n\n")
  return str(target)


def _run(args, timeout=900):
  return run([sys.executable, "run_ner.py", *args], timeout)


def ner_training(tmp):
  """Training, evaluation, prediction and export (an early run: see
  conftest): the folder, the flags, the unseen file and the result."""
  shared = shared_dir()
  conll = os.path.join(shared, "data", "conll2003")
  config = tmp / "config.json"
  config.write_text(json.dumps(TINY.to_dict()))
  train = _conll_slice(os.path.join(conll, "eng.train"), tmp / "train.txt",
                       0, 400)
  unseen = _conll_slice(os.path.join(conll, "eng.train"), tmp / "unseen.txt",
                        9000, 300)
  args = [
      f"--train_file={train}", f"--eval_file={conll}/eng.testa",
      f"--predict_file={unseen}", f"--model_config_path={config}",
      f"--spiece_model_file={spiece_path(shared)}",
      f"--output_dir={tmp}/data", f"--model_dir={tmp}/model",
      "--max_seq_length=32", "--doc_stride=12", "--train_batch_size=16",
      "--train_steps=100", "--iterations=50", "--learning_rate=3e-3",
      "--warmup_steps=10", "--eval_batch_size=128",
      "--predict_batch_size=128"]
  return tmp, args, unseen, _run(args + ["--do_train", "--do_eval",
                                         "--do_predict"])


@pytest.fixture(scope="module")
def trained(shared):
  tmp, args, unseen, res = early_result(ner_training)
  conll = os.path.join(shared, "data", "conll2003")
  assert res.returncode == 0, res.stderr[-3000:]
  return {"tmp": tmp, "args": args, "unseen": unseen, "stdout": res.stdout,
          "shared": shared,
          "stderr": res.stderr, "testa": os.path.join(conll, "eng.testa")}


def test_eval_reports_conlleval_scores_per_type(trained):
  with open(trained["tmp"] / "model" / "eval_results_dev.json") as f:
    results = json.load(f)
  best = results["best"]
  assert results["num_words"] == 51362 and results["scheme"] == "IOB1"
  assert results["labels"] == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC",
                               "B-ORG", "I-ORG", "B-PER", "I-PER"]
  assert set(best["per_type"]) >= {"PER", "LOC", "ORG", "MISC"}
  # TensorBoard holds the same figures, per type too, at the step.
  scalars = event_scalars(trained["tmp"] / "model" / "eval_dev")
  for key, value in (("f1", best["f1"]),
                     ("per_type/PER/f1", best["per_type"]["PER"]["f1"])):
    assert scalars[key] == {best["step"]: pytest.approx(value, abs=1e-7)}
  assert best["n_gold"] == 5942   # eng.testa's entities
  assert 0.0 <= best["majority_baseline_f1"] <= 1.0
  assert results["windows"]["split_sentences"] > 0


def test_predictions_one_tag_per_word_and_conlleval_agrees(trained):
  directory = trained["tmp"] / "model" / "predictions"
  unseen = read_ner(trained["unseen"])
  predicted = read_ner(str(directory / "unseen.txt.predictions.conll"))
  # Exactly the input's words, sentences and documents, in order.
  assert [s.words for s in predicted.sentences] == \
      [s.words for s in unseen.sentences]
  assert [s.document for s in predicted.sentences] == \
      [s.document for s in unseen.sentences]
  with open(directory / "unseen.txt.predictions.conll", encoding="utf-8") as f:
    gold_column = [line.split()[1] for line in f
                   if line.strip() and not line.startswith("-DOCSTART-")]
  assert gold_column == [t for s in unseen.sentences for t in s.source_tags]
  with open(directory / "unseen.txt.results.json") as f:
    reported = json.load(f)
  independent = score_file(str(directory / "unseen.txt.predictions.conll"))
  for key in ("f1", "precision", "recall"):
    assert independent[key] == pytest.approx(reported[key], abs=1e-12), key
  assert independent["per_type"] == pytest.approx(
      {t: m["f1"] for t, m in reported["per_type"].items()}, abs=1e-12)
  assert reported["n_predicted"] > 0
  with open(directory / "unseen.txt.predictions.jsonl",
            encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert [r["tags"] for r in rows] == \
      [s.source_tags for s in predicted.sentences]


QUERY = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops
model = tf.saved_model.load(sys.argv[1])
texts = json.loads(sys.stdin.read())
out = model.signatures["serve_text"](text=tf.constant(texts))
n = out["num_words"].numpy()
tags = [[t.decode() for t in row[:k]] for row, k in zip(out["tags"].numpy(), n)]
m = out["num_entities"].numpy()
ents = [[(t.decode(), int(s), int(e)) for t, s, e in zip(
    out["entity_types"].numpy()[i][:m[i]], out["entity_starts"].numpy()[i][:m[i]],
    out["entity_ends"].numpy()[i][:m[i]])] for i in range(len(texts))]
print(json.dumps({"tags": tags, "entities": ents}))
"""


def test_export_answers_raw_text_from_a_fresh_process(trained):
  exports = trained["tmp"] / "model" / "saved_model"
  # Version 100 (the last step) of both exports; raw text needs the text one.
  assert sorted(os.listdir(exports / "features")) == ["100"]
  export = exports / "text" / "100"
  with open(export / "xlnet_tf_export.json") as f:
    assert json.load(f)["kind"] == "token_classifier"
  # Both carry what a batch job needs: the SentencePiece model, and how the
  # windows are made; only the text one tokenizes in the graph.
  with open(spiece_path(trained["shared"]), "rb") as f:
    spiece = f.read()
  for servable, signatures in (
      ("features", ["serve_features", "serving_default"]),
      ("text", ["serve_features", "serve_text", "serving_default"])):
    with open(exports / servable / "100" / "xlnet_tf_export.json") as f:
      marker = json.load(f)
    assert marker["signatures"] == signatures
    batch = marker["batch"]
    assert (batch["max_seq_length"], batch["doc_stride"], batch["lower"],
            batch["signature"]) == (32, 12, False, "serve_features")
    assert batch["labels"][0] == "O" and "B-PER" in batch["labels"]
    with open(exports / servable / "100" / batch["spiece_model"], "rb") as f:
      assert f.read() == spiece
  rows = []
  with open(trained["tmp"] / "model" / "predictions" /
            "unseen.txt.predictions.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f][:120]
  res = subprocess.run([sys.executable, "-c", QUERY, str(export)],
                       input=json.dumps([r["text"] for r in rows]),
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  served = json.loads(res.stdout.strip().splitlines()[-1])
  unseen = read_ner(trained["unseen"])
  for row, tags, entities in zip(rows, served["tags"], served["entities"]):
    # The export answers in IOB2; the files in the input's scheme (IOB1).
    assert unseen.restore(tags) == row["tags"]
    assert [tuple(x) for x in entities] == \
        [(e["type"], e["start"], e["end"]) for e in row["entities"]]


# The runs below, after training, are early runs too (see conftest): they
# begin when ner_training's has ended.
def _predict_command(trained, predict_file, predict_dir, *extra):
  return [sys.executable, "run_ner.py"] + [
      a for a in trained["args"] if not a.startswith("--predict_file")] + [
          f"--predict_file={predict_file}", "--do_predict",
          f"--predict_dir={predict_dir}", *extra]


def ner_predict_only(unused):
  """Runs with --do_predict alone: on eng.testa, and on the unseen file's
  first 80 sentences' words as untagged JSONL (into the training's
  folder)."""
  del unused
  tmp, args, unseen, _ = early_result(ner_training)
  trained = {"args": args}
  testa = os.path.join(shared_dir(), "data", "conll2003", "eng.testa")
  with open(tmp / "words.jsonl", "w", encoding="utf-8") as f:
    for s in read_ner(unseen).sentences[:80]:
      f.write(json.dumps({"tokens": s.words}) + "\n")
  return (run(_predict_command(trained, testa, tmp / "again")),
          run(_predict_command(trained, tmp / "words.jsonl", tmp / "words")))


@pytest.mark.early("ner_predict_only")
def test_predict_only_run_reads_the_saved_labels(trained):
  tmp = trained["tmp"]
  res = early_result(ner_predict_only)[0]
  assert res.returncode == 0, res.stderr[-3000:]
  with open(tmp / "again" / "eng.testa.results.json") as f:
    again = json.load(f)
  with open(tmp / "model" / "eval_results_dev.json") as f:
    evaluated = json.load(f)["best"]
  assert again["f1"] == evaluated["f1"]
  assert again["per_type"] == evaluated["per_type"]


@pytest.mark.early("ner_predict_only")
def test_predict_untagged_jsonl(trained):
  tmp = trained["tmp"]
  res = early_result(ner_predict_only)[1]
  assert res.returncode == 0, res.stderr[-3000:]
  assert sorted(os.listdir(tmp / "words")) == [
      ".xlnet_tf_outputs.json", "words.jsonl.predictions.conll",
      "words.jsonl.predictions.jsonl"]
  with open(tmp / "words" / "words.jsonl.predictions.conll",
            encoding="utf-8") as f:
    lines = f.read().split("\n")
  tagged = read_ner(str(tmp / "model" / "predictions" /
                        "unseen.txt.predictions.conll"))
  expected = []
  for s in tagged.sentences[:80]:
    # Written in IOB2 (an untagged file has no scheme of its own).
    iob2 = s.tags   # the reader's IOB2 reading of the predictions
    expected += [f"{w} {t}" for w, t in zip(s.words, iob2)] + [""]
  assert lines == expected + [""]
  with open(tmp / "words" / "words.jsonl.predictions.jsonl",
            encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert len(rows) == 80 and all("gold" not in r for r in rows)


def ner_refusals(tmp_path):
  """Four runs with something wrong: their folder and results."""
  _, args, _, _ = early_result(ner_training)
  base = [a for a in args if not a.startswith(
      ("--train_file", "--model_dir"))]
  bad = tmp_path / "bad.txt"
  bad.write_text("EU B-ORG\nrejects O\nGerman X-MISC\n")
  # A training file whose tags are all O names itself.
  plain = tmp_path / "plain.txt"
  plain.write_text("EU O\nrejects O\n\nGerman O\n")
  return tmp_path, [run([sys.executable, "run_ner.py", *a]) for a in (
      base + [f"--train_file={bad}", f"--model_dir={tmp_path}/m",
              "--do_train"],
      base + [f"--model_dir={tmp_path}/m2", "--do_predict"],
      args + ["--do_eval", "--label_list=PER,LOC"],
      base + [f"--train_file={plain}", f"--model_dir={tmp_path}/m3",
              "--do_train"])]


@pytest.mark.early("ner_refusals")
@pytest.mark.usefixtures("trained")
def test_errors_are_one_line():
  tmp_path, runs = early_result(ner_refusals)
  bad, plain = tmp_path / "bad.txt", tmp_path / "plain.txt"
  res = runs[0]
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_ner: {bad}:3: tag X-MISC is not O or B-, I-, E-, S- "
      "followed by a type")
  res = runs[1]
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      "run_ner: no labels: pass --label_list or --do_train, or use a "
      "--model_dir holding ner_labels.json")
  res = runs[2]
  assert res.returncode == 2
  assert "was trained with labels" in res.stderr.strip().splitlines()[-1]
  res = runs[3]
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_ner: {plain}: labels ['O']: no entity type to learn")


def ner_never_replace(tmp_path):
  """The predictions of the test below, step by step; what it checks, as
  it was after each step."""
  _, args, _, _ = early_result(ner_training)
  trained = {"args": args}
  source = os.path.join(shared_dir(), "data", "conll2003", "eng.testa")
  folder = tmp_path / "data"
  folder.mkdir()
  testa = _conll_slice(source, folder / "eng.testa", 0, 40)
  testb = _conll_slice(source, folder / "eng.testb", 40, 30)
  # What the old naming (the input cut at its first dot) wrote over.
  for name in ("eng.conll", "eng.jsonl", "eng.results.json"):
    (folder / name).write_text(f"the user's {name}\n")
  (folder / "eng.testb.predictions.jsonl").write_text("the user's notes\n")
  out = {"tmp": tmp_path, "folder": folder, "testa": testa, "testb": testb,
         "users": tree_digest(folder)}
  out["first"] = run(_predict_command(trained, testa, folder))
  out["refused"] = run(_predict_command(trained, testb, folder))
  os.rename(folder / "eng.testb.predictions.jsonl", tmp_path / "notes")
  out["second"] = run(_predict_command(trained, testb, folder))
  out["after"] = tree_digest(folder)
  # A --predict_dir that is a file.
  out["into_file"] = run(_predict_command(trained, testa,
                                          tmp_path / "notes"))
  return out


@pytest.mark.early("ner_never_replace")
@pytest.mark.usefixtures("trained")
def test_predictions_never_replace_a_users_file():
  """Two inputs with the same stem predicted into their own folder: each
  keeps its whole name, the inputs and the user's files stay as they were,
  and a user's file where an output would go stops the run first."""
  runs = early_result(ner_never_replace)
  tmp_path, folder = runs["tmp"], runs["folder"]
  testa, testb, users = runs["testa"], runs["testb"], runs["users"]
  res = runs["first"]
  assert res.returncode == 0, res.stderr[-3000:]
  res = runs["refused"]
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_ner: --predict_dir={folder}: eng.testb.predictions.jsonl exists "
      "and was not written by xlnet-tf (or was changed since); move it, or "
      "pass --overwrite to replace it")
  assert "ner inference" not in res.stderr   # refused before any work
  # Moved away (to tmp_path/notes): the second input again.
  res = runs["second"]
  assert res.returncode == 0, res.stderr[-3000:]

  after = runs["after"]
  for name, digest in users.items():
    if name != "eng.testb.predictions.jsonl":
      assert after[name] == digest, name
  for source, n in ((testa, 40), (testb, 30)):
    name = os.path.basename(source)
    predicted = read_ner(str(folder / f"{name}.predictions.conll"))
    assert [s.words for s in predicted.sentences] == \
        [s.words for s in read_ner(source).sentences]
    assert len(predicted.sentences) == n
    with open(folder / f"{name}.results.json") as f:
      assert json.load(f)["file"] == source

  # A --predict_dir that is a file is refused before inference.
  res = runs["into_file"]
  assert res.returncode == 2
  assert res.stderr.strip().splitlines()[-1] == (
      f"run_ner: --predict_dir={tmp_path}/notes: {tmp_path}/notes is a file, "
      "not a directory")
  assert (tmp_path / "notes").read_text() == "the user's notes\n"
