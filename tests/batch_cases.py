"""Helpers of tests/test_batch_predict.py: the scripts run beside each
other, slices of the shared data, a tiny LM with varied outputs, the
module's models and script outputs (`build_work`), its jobs (`batch_jobs`)
and their rows (`shard_rows`)."""

import glob
import json
import os
import subprocess
import sys

import numpy as np

import xlnet_tf as xt
from conftest import ROOT, spiece_path
from data_utils.text_inputs import InputSpec
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.batch_predict.job import BatchJob, resolve_export
from xlnet_tf.io import save_original_checkpoint
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.tasks.language_model.serving import export_language_model


def start_script(name, args):
  return subprocess.Popen([sys.executable, name, *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def finished(proc):
  out, err = proc.communicate(timeout=900)
  assert proc.returncode == 0, err[-3000:]
  return out


def line_slice(source, target, first, count, header=True):
  with open(source, encoding="utf-8") as f:
    lines = f.read().splitlines()
  kept = (lines[:1] if header else []) + lines[first:first + count]
  target.write_text("\n".join(kept) + "\n", encoding="utf-8")
  return str(target)


def conll_slice(source, target, count):
  with open(source, encoding="utf-8") as f:
    blocks = [b for b in f.read().split("\n\n") if b.strip()]
  target.write_text("\n\n".join(blocks[:count]) + "\n\n", encoding="utf-8")
  return str(target)


def varied_lm(config):
  """A tiny LM whose outputs vary with the input (weights far from the
  initializer's)."""
  lm = build_model("lm", config, xt.RunOptions(dropout=0.0, dropatt=0.0))
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


TINY_CLI = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=32000, ff_activation="gelu",
                          untie_r=True)
RTE_LABELS = ["entailment", "not_entailment"]


def tiny_classifier_export(path, spiece_model):
  """The tiny RTE classifier export of test_batch_predict_cli (untrained:
  its labels do not matter, its bytes and rows do); returns its path."""
  model = xt.XLNetClassifier(xt.XLNetModel(TINY_CLI, xt.RunOptions()),
                             n_class=2, task_name="rte")
  model.build(None)
  return export_classifier(model, str(path), 32, False, RTE_LABELS,
                           sp_model_path=spiece_model, text_signatures=False)


def build_work(shared, tmp, tiny, window):
  """Tiny models (of config `tiny`) trained or built in `tmp`, exported
  (the LM's window `window`), and the scripts' outputs beside them."""
  sp = spiece_path(shared)
  config = tmp / "config.json"
  config.write_text(json.dumps(tiny.to_dict()))
  glue, conll = f"{shared}/data/glue", f"{shared}/data/conll2003"
  rte = tmp / "rte"
  rte.mkdir()
  line_slice(f"{glue}/RTE/train.tsv", rte / "train.tsv", 1, 64)
  test_tsv = line_slice(f"{glue}/RTE/test.tsv", rte / "test.tsv", 1, 120)
  ner_train = conll_slice(f"{conll}/eng.train", tmp / "ner.train", 200)
  ner_test = conll_slice(f"{conll}/eng.testa", tmp / "eng.testa.conll", 120)
  common = [f"--model_config_path={config}", f"--spiece_model_file={sp}",
            "--train_batch_size=16", "--iterations=20", "--do_train",
            "--do_predict", "--predict_batch_size=64"]
  classifier = start_script("run_classifier.py", common + [
      "--task_name=rte", f"--data_dir={rte}", f"--output_dir={tmp}/rte_data",
      f"--model_dir={tmp}/rte_model", "--max_seq_length=64",
      "--train_steps=20", "--learning_rate=1e-3"])
  ner = start_script("run_ner.py", common + [
      f"--train_file={ner_train}", f"--predict_file={ner_test}",
      f"--output_dir={tmp}/ner_data", f"--model_dir={tmp}/ner_model",
      "--max_seq_length=32", "--doc_stride=12", "--train_steps=40",
      "--learning_rate=3e-3", "--document_context"])
  # The language model: original checkpoint for the scripts, its export.
  lm = varied_lm(tiny)
  ckpt = save_original_checkpoint(lm, str(tmp / "lm" / "model.ckpt"))
  tiny.to_json(str(tmp / "lm" / "xlnet_config.json"))
  lm_export = export_language_model(lm, sp, str(tmp / "lm_export"), window,
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
             if len(tokenizer.encode_ids(s)) + 2 <= window][:40]
  long = next(s for s in sentences if len(tokenizer.encode_ids(s)) + 2
              > window)
  score_ref = tmp / "sentences.txt"
  score_ref.write_text("\n".join(fitting) + "\n", encoding="utf-8")
  # The Beam job reads the same lines, then one too long and one empty.
  score_input = tmp / "sentences_and_two_bad.txt"
  score_input.write_text("\n".join(fitting + [long, ""]) + "\n",
                         encoding="utf-8")
  lm_flags = [f"--init_checkpoint={ckpt}", f"--spiece_model_file={sp}",
              "--batch_size=5"]
  embed = start_script("run_embed.py", lm_flags + [
      f"--input_file={embed_input}", f"--output_file={tmp}/emb.jsonl",
      "--layers=0,-1", "--pooling=last,first,mean,masked_mean",
      f"--max_seq_length={window}"])
  score = start_script("run_score.py", lm_flags + [
      f"--input_file={score_ref}", f"--output_file={tmp}/scores.jsonl",
      "--order=l2r", f"--max_seq_length={window}"])
  # A regressor, straight from the Python API (the scripts' export path).
  regressor = xt.XLNetRegressor(
      xt.XLNetModel(tiny, xt.RunOptions(init_std=0.5)), task_name="sts-b")
  regressor.build(None)
  regressor_export = export_classifier(
      regressor, str(tmp / "regressor"), 64, True, sp_model_path=sp,
      text_signatures=False)
  for proc in (classifier, ner, embed, score):
    finished(proc)
  return {"tmp": tmp, "sp": sp, "test_tsv": test_tsv, "ner_test": ner_test,
          "lm_export": lm_export, "embed_input": str(embed_input),
          "score_input": str(score_input), "long": long,
          "regressor": regressor_export}


def batch_jobs(work, out, tiny_layers):
  """The jobs of test_batch_predict.py over `work`'s exports, writing
  under `out`."""
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
                   layers=[0, tiny_layers], tfrecord=True,
                   poolings=["last", "first", "mean", "masked_mean"],
                   piece_vectors=True),
      "score": job(lm, work["score_input"], "score", job="score"),
      "regressor": job(regressor, work["test_tsv"], "regressor",
                       InputSpec("auto", "sentence1", "sentence2"))}


def shard_rows(job, stream="predictions"):
  """{(input path, line): row} of a job's shards; rows name their file
  relative to the inputs' folder, put back in front here."""
  rows = {}
  for path in sorted(glob.glob(f"{job.output_dir}/{stream}-*.jsonl")):
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        row["file"] = os.path.join(job.input_root, row["file"])
        rows[(row["file"], row["line"])] = row
  return rows
