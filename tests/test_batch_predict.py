"""Batch prediction on Apache Beam (run_batch_predict.py, xlnet_tf/
batch_predict/) against the single-process scripts, on real shared data
with tiny models: run_classifier.py --do_predict (RTE), run_ner.py
--do_predict (CoNLL-2003), run_embed.py (IMDB reviews, several windows) and
run_score.py --order=l2r (SST-2 sentences). The jobs run as one pipeline on
the DirectRunner in-process, and again with 2 worker processes; both equal
the scripts row for row, by key: labels and tags identical, values within
1e-5. Rows that cannot be predicted are in the dead-letter shards with
their reasons, and the manifest's counts and sha256 are the files'.
"""

import glob
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import ROOT, spiece_path
from data_utils.batch_inputs import InputSpec
from data_utils.classification.features import convert_example
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.batch_predict.job import BatchJob, resolve_export
from xlnet_tf.batch_predict.run import run_jobs
from xlnet_tf.io import save_original_checkpoint
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.tasks.language_model.serving import export_language_model

TINY = xt.XLNetConfig(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64,
                      n_token=32000, ff_activation="gelu", untie_r=True)
WINDOW = 64  # the LM export's window (texts longer are read in segments)
TWO_WORKERS = ["--runner=DirectRunner", "--direct_num_workers=2",
               "--direct_running_mode=multi_processing"]


def _script(name, args):
  return subprocess.Popen([sys.executable, name, *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def _wait(proc):
  out, err = proc.communicate(timeout=900)
  assert proc.returncode == 0, err[-3000:]
  return out


def _lines(source, target, first, count, header=True):
  with open(source, encoding="utf-8") as f:
    lines = f.read().splitlines()
  kept = (lines[:1] if header else []) + lines[first:first + count]
  target.write_text("\n".join(kept) + "\n", encoding="utf-8")
  return str(target)


def _conll_sentences(source, target, count):
  with open(source, encoding="utf-8") as f:
    blocks = [b for b in f.read().split("\n\n") if b.strip()]
  target.write_text("\n\n".join(blocks[:count]) + "\n\n", encoding="utf-8")
  return str(target)


def _varied_lm():
  """A tiny LM whose outputs vary with the input (weights far from the
  initializer's)."""
  lm = build_model("lm", TINY, xt.RunOptions(dropout=0.0, dropatt=0.0))
  lm.build()
  rng = np.random.RandomState(7)
  for var in lm.weights:
    value = rng.normal(0, 0.3, var.shape.as_list())
    if "LayerNorm/gamma" in var.name:
      value = 1 + 0.3 * value
    elif "LayerNorm/beta" in var.name:
      value = 0 * value
    var.assign(value.astype(np.float32))
  return lm


@pytest.fixture(scope="module")
def work(shared, tmp_path_factory):
  """Tiny models trained or built, exported, and the scripts' outputs."""
  tmp = tmp_path_factory.mktemp("batch")
  sp = spiece_path(shared)
  config = tmp / "config.json"
  config.write_text(json.dumps(TINY.to_dict()))
  glue, conll = f"{shared}/data/glue", f"{shared}/data/conll2003"
  rte = tmp / "rte"
  rte.mkdir()
  _lines(f"{glue}/RTE/train.tsv", rte / "train.tsv", 1, 64)
  test_tsv = _lines(f"{glue}/RTE/test.tsv", rte / "test.tsv", 1, 120)
  ner_train = _conll_sentences(f"{conll}/eng.train", tmp / "ner.train", 200)
  ner_test = _conll_sentences(f"{conll}/eng.testa", tmp / "eng.testa.conll",
                              120)
  common = [f"--model_config_path={config}", f"--spiece_model_file={sp}",
            "--train_batch_size=16", "--iterations=20", "--do_train",
            "--do_predict", "--predict_batch_size=64"]
  classifier = _script("run_classifier.py", common + [
      "--task_name=rte", f"--data_dir={rte}", f"--output_dir={tmp}/rte_data",
      f"--model_dir={tmp}/rte_model", "--max_seq_length=64",
      "--train_steps=20", "--learning_rate=1e-3"])
  ner = _script("run_ner.py", common + [
      f"--train_file={ner_train}", f"--predict_file={ner_test}",
      f"--output_dir={tmp}/ner_data", f"--model_dir={tmp}/ner_model",
      "--max_seq_length=32", "--doc_stride=12", "--train_steps=40",
      "--learning_rate=3e-3"])
  # The language model: original checkpoint for the scripts, its export.
  lm = _varied_lm()
  ckpt = save_original_checkpoint(lm, str(tmp / "lm" / "model.ckpt"))
  TINY.to_json(str(tmp / "lm" / "xlnet_config.json"))
  lm_export = export_language_model(lm, sp, str(tmp / "lm_export"), WINDOW,
                                    4)
  reviews = sorted(glob.glob(f"{shared}/data/imdb/aclImdb/test/pos/*.txt"))
  embed_input = tmp / "reviews.jsonl"
  with open(embed_input, "w", encoding="utf-8") as f:
    for path in reviews[:12]:
      with open(path, encoding="utf-8") as g:
        f.write(json.dumps({"text": g.read().strip()}) + "\n")
  tokenizer = SentencePieceTokenizer(sp)
  with open(f"{glue}/SST-2/dev.tsv", encoding="utf-8") as f:
    sentences = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
  fitting = [s for s in sentences
             if len(tokenizer.encode_ids(s)) + 2 <= WINDOW][:40]
  long = next(s for s in sentences if len(tokenizer.encode_ids(s)) + 2
              > WINDOW)
  score_ref = tmp / "sentences.txt"
  score_ref.write_text("\n".join(fitting) + "\n", encoding="utf-8")
  # The Beam job reads the same lines, then one too long and one empty.
  score_input = tmp / "sentences_and_two_bad.txt"
  score_input.write_text("\n".join(fitting + [long, ""]) + "\n",
                         encoding="utf-8")
  lm_flags = [f"--init_checkpoint={ckpt}", f"--spiece_model_file={sp}",
              "--batch_size=5"]
  embed = _script("run_embed.py", lm_flags + [
      f"--input_file={embed_input}", f"--output_file={tmp}/emb.jsonl",
      "--layers=0,-1", "--pooling=last,first,mean,masked_mean",
      f"--max_seq_length={WINDOW}"])
  score = _script("run_score.py", lm_flags + [
      f"--input_file={score_ref}", f"--output_file={tmp}/scores.jsonl",
      "--order=l2r", f"--max_seq_length={WINDOW}"])
  # A regressor, straight from the Python API (the scripts' export path).
  regressor = xt.XLNetRegressor(
      xt.XLNetModel(TINY, xt.RunOptions(init_std=0.5)), task_name="sts-b")
  regressor.build(None)
  regressor_export = export_classifier(
      regressor, str(tmp / "regressor"), 64, True, sp_model_path=sp,
      text_signatures=False)
  for proc in (classifier, ner, embed, score):
    _wait(proc)
  return {"tmp": tmp, "sp": sp, "test_tsv": test_tsv, "ner_test": ner_test,
          "lm_export": lm_export, "embed_input": str(embed_input),
          "score_input": str(score_input), "long": long,
          "regressor": regressor_export}


def _jobs(work, out):
  tmp = work["tmp"]
  clf = resolve_export(str(tmp / "rte_model" / "saved_model"))
  ner = resolve_export(str(tmp / "ner_model" / "saved_model"))
  lm = resolve_export(work["lm_export"])
  regressor = resolve_export(work["regressor"])

  def job(export, pattern, name, spec=InputSpec(), **options):
    tfrecord = options.pop("tfrecord", False)
    return BatchJob(export, pattern, (pattern,), spec, options,
                    str(out / name), rows_per_shard=50, tfrecord=tfrecord,
                    batch_size=8)
  return {
      "classifier": job(clf, work["test_tsv"], "classifier",
                        InputSpec("auto", "sentence1", "sentence2")),
      "ner": job(ner, work["ner_test"], "ner", InputSpec("conll")),
      "embed": job(lm, work["embed_input"], "embed", job="embed",
                   layers=[0, TINY.n_layer], tfrecord=True,
                   poolings=["last", "first", "mean", "masked_mean"],
                   piece_vectors=True),
      "score": job(lm, work["score_input"], "score", job="score"),
      "regressor": job(regressor, work["test_tsv"], "regressor",
                       InputSpec("auto", "sentence1", "sentence2"))}


@pytest.fixture(scope="module")
def runs(work):
  """The four jobs as one pipeline, in-process and with 2 workers."""
  out = {}
  for name, args in (("in_process", ["--runner=DirectRunner"]),
                     ("two_workers", TWO_WORKERS)):
    jobs = _jobs(work, work["tmp"] / name)
    manifests = run_jobs(list(jobs.values()), args)
    out[name] = {k: (j, m) for (k, j), m in zip(jobs.items(), manifests)}
  return out


def _rows(output_dir, stream="predictions"):
  rows = {}
  for path in sorted(glob.glob(f"{output_dir}/{stream}-*.jsonl")):
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        rows[(row["file"], row["line"])] = row
  return rows


MODES = ("in_process", "two_workers")


@pytest.mark.parametrize("mode", MODES)
def test_classifier_equals_run_classifier(work, runs, mode):
  job, manifest = runs[mode]["classifier"]
  rows = _rows(job.output_dir)
  with open(work["tmp"] / "rte_model" / "predictions" / "RTE.tsv") as f:
    script = [r.split("\t") for r in f.read().splitlines()[1:]]
  assert len(rows) == len(script) == 120
  assert manifest["counts"] == {"rows_read": 120, "predicted": 120,
                                "dead_letters": 0}
  # Line 2 + i of the TSV is example i (its guid is its index column).
  with open(work["test_tsv"], encoding="utf-8") as f:
    guids = [r.split("\t")[0] for r in f.read().splitlines()[1:]]
  labels = {guid: label for guid, label in script}
  for i, guid in enumerate(guids):
    assert rows[(work["test_tsv"], i + 2)]["label"] == labels[guid]
  _assert_export_values(work, job, rows, "probabilities")


def _assert_export_values(work, job, rows, key):
  """The rows' values: the features export's serving_default at full
  length on Python features (convert_example) of every TSV row."""
  export = tf.saved_model.load(job.export.path)
  tok = SentencePieceTokenizer(work["sp"])
  with open(work["test_tsv"], encoding="utf-8") as f:
    records = [r.split("\t") for r in f.read().splitlines()[1:]]
  f = [convert_example(tok.encode_ids(a), tok.encode_ids(b), 64)
       for _, a, b in records]
  want = export.signatures["serving_default"](
      **{k: tf.constant([x[k] for x in f], tf.float32 if k == "input_mask"
                        else tf.int32) for k in f[0]})[key]
  got = [rows[(work["test_tsv"], i + 2)][key] for i in range(len(records))]
  np.testing.assert_allclose(got, want.numpy(), atol=1e-5)
  # The rows' values differ by more than 10x the tolerance.
  assert np.ptp(want.numpy(), axis=0).max() > 1e-4


@pytest.mark.parametrize("mode", MODES)
def test_regressor_scores_equal_the_export(work, runs, mode):
  job, manifest = runs[mode]["regressor"]
  rows = _rows(job.output_dir)
  assert manifest["counts"]["predicted"] == len(rows) == 120
  assert all(set(r) == {"file", "line", "score"} for r in rows.values())
  _assert_export_values(work, job, rows, "score")


@pytest.mark.parametrize("mode", MODES)
def test_ner_equals_run_ner(work, runs, mode):
  job, manifest = runs[mode]["ner"]
  rows = _rows(job.output_dir)
  predictions = work["tmp"] / "ner_model" / "predictions" / \
      "eng.testa.conll.predictions.jsonl"
  with open(predictions, encoding="utf-8") as f:
    script = [json.loads(line) for line in f]
  assert len(rows) == len(script) > 100
  assert manifest["counts"] == {"rows_read": len(script),
                                "predicted": len(script), "dead_letters": 0}
  tags = set()
  for want in script:
    got = rows[(work["ner_test"], want["line"])]
    assert got["words"] == want["tokens"] and got["text"] == want["text"]
    assert got["tags"] == want["tags"]
    assert got["entities"] == want["entities"]
    tags.update(got["tags"])
  assert len(tags) > 2  # the model predicts entities, not only O


@pytest.mark.parametrize("mode", MODES)
def test_embeddings_equal_run_embed(work, runs, mode):
  job, _ = runs[mode]["embed"]
  rows = _rows(job.output_dir)
  tmp = work["tmp"]
  with open(tmp / "emb.jsonl", encoding="utf-8") as f:
    index = [json.loads(line) for line in f]
  pieces = np.load(tmp / "emb.pieces.npy")
  assert len(rows) == len(index) == 12
  assert max(len(r["ids"]) for r in index) > 3 * WINDOW  # several windows
  for i, want in enumerate(index):
    got = rows[(work["embed_input"], i + 1)]
    for key in ("pieces", "ids", "starts", "ends"):
      assert got[key] == want[key], key
    for pooling in ("last", "first", "mean", "masked_mean"):
      np.testing.assert_allclose(got["pooled"][pooling],
                                 np.load(tmp / f"emb.{pooling}.npy")[i],
                                 atol=1e-5, err_msg=pooling)
  # Per-piece vectors: the TFRecord shards hold run_embed's rows.
  seen = 0
  for path in sorted(glob.glob(f"{job.output_dir}/predictions-*.tfrecord")):
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      feature = example.features.feature
      line = feature["index"].int64_list.value[0]
      first, end = index[line - 1]["rows"]
      vectors = np.array(feature["piece_vectors"].float_list.value)
      np.testing.assert_allclose(vectors.reshape(pieces[first:end].shape),
                                 pieces[first:end], atol=1e-5)
      seen += 1
  assert seen == 12


@pytest.mark.parametrize("mode", MODES)
def test_scores_equal_run_score_and_bad_rows_are_dead_letters(work, runs,
                                                              mode):
  job, manifest = runs[mode]["score"]
  rows = _rows(job.output_dir)
  with open(work["tmp"] / "scores.jsonl", encoding="utf-8") as f:
    script = [json.loads(line) for line in f]
  assert len(rows) == len(script) == 40
  for i, want in enumerate(script):
    got = rows[(work["score_input"], i + 1)]
    assert got["pieces"] == want["pieces"] and got["ids"] == want["ids"]
    np.testing.assert_allclose(got["log_probs"], want["log_probs"],
                               atol=1e-5)
    assert got["sum"] == pytest.approx(want["sum"], abs=1e-4)
  dead = _rows(job.output_dir, "dead-letter")
  n = len(SentencePieceTokenizer(work["sp"]).encode_ids(work["long"])) + 2
  assert dead == {
      (work["score_input"], 41): {
          "file": work["score_input"], "line": 41,
          "reason": f"{n} pieces with the markers, more than the export's "
                    f"window of {WINDOW} (it reads one window)"},
      (work["score_input"], 42): {"file": work["score_input"], "line": 42,
                                  "reason": "empty text"}}
  assert manifest["counts"] == {"rows_read": 42, "predicted": 40,
                                "dead_letters": 2}


@pytest.mark.parametrize("mode", MODES)
def test_manifest_lists_every_file_with_its_rows_and_sha256(runs, mode):
  for job, manifest in runs[mode].values():
    listed = manifest["shards"] + manifest["dead_letter_shards"]
    names = sorted(n for n in os.listdir(job.output_dir)
                   if not n.startswith("."))
    assert names == sorted([x["name"] for x in listed] + ["manifest.json"])
    for entry in listed:
      path = os.path.join(job.output_dir, entry["name"])
      with open(path, "rb") as f:
        data = f.read()
      assert hashlib.sha256(data).hexdigest() == entry["sha256"]
      if path.endswith(".jsonl"):
        assert data.count(b"\n") == entry["rows"]
    counts = manifest["counts"]
    assert counts["predicted"] + counts["dead_letters"] == \
        counts["rows_read"]
    assert sum(x["rows"] for x in manifest["shards"]
               if x["name"].endswith(".jsonl")) == counts["predicted"]
    with open(os.path.join(job.output_dir, "manifest.json")) as f:
      assert json.load(f) == manifest
