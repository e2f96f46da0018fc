"""The whole XLNet workflow on the bundled demo data (`make demo`).

Stages, each an ordinary command of this project run with demo-sized flags
(the command lines are printed, so any stage can be re-run alone or pointed
at real data):
  1. train a SentencePiece model with XLNet's special symbols (8k pieces)
  2. build pretraining TFRecords with precomputed permutations
  3. pretrain a small XLNet (memory, two-stream attention, bi_data)
  4. fine-tune it on an SST-2 sample; evaluate against the majority class
  5. export (done by step 4: the versioned features and raw-text
     SavedModels) and query the raw-text export from a fresh process
  6. query the features export with TensorFlow's stock `saved_model_cli`
     (no TF Text) on the same sentences
  7. print where everything is, the figures, and how to scale up

Re-running reuses what is built (`--fresh` starts over). `--tiny` shrinks
every stage (the test suite runs it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
from absl import flags

from data_utils.classification.features import convert_example
from data_utils import paths
from data_utils.errors import UsageError, run_app, run_main
from data_utils.tokenization import SentencePieceTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "demo", "data")

SIZES = {
    "demo": dict(vocab=8000, lines=None, seq_len=128, reuse_len=64, bsz=16,
                 num_predict=20, perm=32, n_layer=4, d_model=128, n_head=4,
                 d_head=32, d_inner=512, mem_len=64, pretrain_steps=300,
                 pretrain_lr=1e-3, clf_len=64, clf_bsz=32, clf_steps=600,
                 clf_lr=2e-4, iterations=50),
    "tiny": dict(vocab=1000, lines=400, seq_len=32, reuse_len=16, bsz=4,
                 num_predict=6, perm=8, n_layer=1, d_model=16, n_head=2,
                 d_head=8, d_inner=32, mem_len=16, pretrain_steps=20,
                 pretrain_lr=1e-3, clf_len=32, clf_bsz=8, clf_steps=10,
                 clf_lr=1e-4, iterations=10),
}

NOISE = re.compile(r"cuda|oneDNN|cpu_feature_guard|rebuild TensorFlow|"
                   r"TF_ENABLE_ONEDNN_OPTS|AVX512|untraced functions|"
                   r"unsupported characters|Sharding callback|"
                   r"local_rendezvous|tf_record_dataset_op")


def run(stage: str, cmd: list, log_path: str) -> str:
  """Runs a stage's command, streaming its progress lines; returns its log."""
  print(f"\n== {stage}\n$ {' '.join(cmd)}", flush=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  began = time.monotonic()
  lines = []
  with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True) as proc:
    for line in proc.stdout:
      lines.append(line)
      if not NOISE.search(line):
        print("   " + re.sub(r"^[IWE]\d{4} [\d:.]+ \d+ (\S+\] )", "", line),
              end="", flush=True)
  text = "".join(lines)
  with open(log_path, "w") as f:
    f.write(text)
  if proc.returncode != 0:
    sys.exit(f"demo: stage '{stage}' failed (exit {proc.returncode}); its "
             f"log is {log_path}")
  print(f"   ({time.monotonic() - began:.0f} s)", flush=True)
  return text


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The demo's flags."""
  flags.DEFINE_string("workdir", os.path.join(ROOT, "out", "demo"),
                      "Where every stage writes.")
  flags.DEFINE_bool("tiny", False, "Even smaller flags (what the tests run).")
  flags.DEFINE_bool("fresh", False, "Delete the workdir first.")


FEATURE_KEYS = ("input_ids", "segment_ids", "input_mask")


def write_query_features(path: str, sentences, spiece: str,
                         length: int) -> str:
  """The classifier features of `sentences` (`[B, length]`, as the
  fine-tuning records) in an .npz the stock CLI reads. Returns `path`."""
  tokenizer = SentencePieceTokenizer(spiece)
  rows = [convert_example(tokenizer.encode_ids(t), None, length)
          for t in sentences]
  np.savez(path, **{k: np.array([r[k] for r in rows], np.float32
                                if k == "input_mask" else np.int32)
                    for k in FEATURE_KEYS})
  return path


def cli_output(text: str, key: str) -> list:
  """The rows of output `key` in `saved_model_cli run`'s printout."""
  found = re.search(r"Result for output key " + key + r":\s*\[(.*?)\]\]",
                    text, re.S)
  if not found:
    raise RuntimeError(f"no output {key!r} in saved_model_cli's answer")
  return [[float(x) for x in row.replace("[", "").split()]
          for row in found.group(1).split("]") if row.strip()]


def demo() -> int:
  args = FLAGS
  s = SIZES["tiny" if args.tiny else "demo"]
  if paths.is_remote(args.workdir):
    # Its logs, query arrays and saved_model_cli's inputs are local files
    # (each script it runs takes bucket paths itself).
    raise UsageError(f"--workdir={args.workdir}: the demo runs in a local "
                     "folder; give a local path")
  work = os.path.abspath(args.workdir)
  if args.fresh and os.path.isdir(work):
    shutil.rmtree(work)
  os.makedirs(os.path.join(work, "logs"), exist_ok=True)
  py = sys.executable
  began = time.monotonic()

  def log(name):
    return os.path.join(work, "logs", f"{name}.log")

  def stage(done_marker, name, cmd, log_path):
    """Runs a stage unless its output exists (then returns "")."""
    if os.path.exists(done_marker):
      print(f"\n== {name}: reusing {os.path.dirname(done_marker)}")
      return ""
    return run(name, cmd, log_path)

  corpus = os.path.join(DATA, "corpus.txt")
  if s["lines"]:
    corpus = os.path.join(work, "corpus.txt")
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8") as f, \
        open(corpus, "w", encoding="utf-8") as g:
      for _, line in zip(range(s["lines"]), f):
        g.write(line)

  # 1. Vocabulary.
  spiece = os.path.join(work, "spiece.model")
  if os.path.exists(spiece):
    print(f"\n== 1. SentencePiece: reusing {spiece}")
  else:
    run("1. SentencePiece model with XLNet's special symbols",
        [py, "-m", "data_utils.train_spiece", f"--input={corpus}",
         f"--model_prefix={spiece[:-len('.model')]}",
         f"--vocab_size={s['vocab']}"], log("spiece"))

  # 2. Pretraining records.
  records = os.path.join(work, "pretrain_data")
  stage(os.path.join(records, "corpus_info.json"),
        "2. pretraining records (permutations precomputed)",
      [py, "-m", "data_utils.pretraining.create_pretrain_data",
       f"--input_glob={corpus}",
       f"--sp_path={spiece}", f"--save_dir={records}",
       f"--bsz_per_host={s['bsz']}", f"--seq_len={s['seq_len']}",
       f"--reuse_len={s['reuse_len']}", f"--num_predict={s['num_predict']}",
       f"--perm_size={s['perm']}", "--bi_data", "--seed=0",
       f"--max_batches={s['pretrain_steps']}"],
      log("pretrain_data"))

  # 3. Pretraining.
  pretrain_dir = os.path.join(work, "pretrain_model")
  model_flags = [f"--n_token={s['vocab']}", f"--n_layer={s['n_layer']}",
                 f"--d_model={s['d_model']}", f"--n_head={s['n_head']}",
                 f"--d_head={s['d_head']}", f"--d_inner={s['d_inner']}",
                 "--ff_activation=gelu", "--untie_r"]
  original = os.path.join(pretrain_dir, "original")
  curve_path = os.path.join(work, "pretrain_loss.json")
  text = stage(os.path.join(original, "xlnet_model.ckpt.index"),
             "3. pretraining (two-stream attention, memory, bi_data)",
             [py, "run_pretrain.py",
              f"--record_info_dir={records}/tfrecords",
              f"--model_dir={pretrain_dir}",
              f"--train_batch_size={s['bsz']}", f"--seq_len={s['seq_len']}",
              f"--reuse_len={s['reuse_len']}", f"--perm_size={s['perm']}",
              f"--num_predict={s['num_predict']}", "--bi_data",
              f"--mem_len={s['mem_len']}", *model_flags, "--dropout=0.1",
              "--dropatt=0.1", f"--train_steps={s['pretrain_steps']}",
              f"--warmup_steps={s['pretrain_steps'] // 10}",
              f"--learning_rate={s['pretrain_lr']}",
              f"--iterations={s['iterations']}",
              f"--save_steps={s['iterations'] * 2}"], log("pretrain"))
  if text:
    curve = [(int(a), float(b)) for a, b in
             re.findall(r"step (\d+)/\d+ loss ([0-9.]+)", text)]
    with open(curve_path, "w") as f:
      json.dump(curve, f)
  with open(curve_path) as f:
    curve = [tuple(x) for x in json.load(f)]

  # 4. Fine-tuning (the export to a SavedModel is part of training).
  clf_dir = os.path.join(work, "sst2_model")
  exports = os.path.join(clf_dir, "saved_model")
  step = str(s["clf_steps"])  # the exported checkpoint's: the last
  text_export = os.path.join(exports, "text", step)
  features_export = os.path.join(exports, "features", step)
  stage(os.path.join(text_export, "saved_model.pb"),
        "4. fine-tune on the SST-2 sample, evaluate, export",
      [py, "run_classifier.py", "--task_name=sst-2",
       f"--data_dir={DATA}/sst-2",
       f"--model_config_path={original}/xlnet_config.json",
       f"--init_checkpoint={original}", f"--spiece_model_file={spiece}",
       f"--output_dir={work}/sst2_features", f"--model_dir={clf_dir}",
       "--do_train", "--do_eval", f"--max_seq_length={s['clf_len']}",
       f"--train_batch_size={s['clf_bsz']}",
       f"--train_steps={s['clf_steps']}",
       f"--warmup_steps={s['clf_steps'] // 10}",
       f"--learning_rate={s['clf_lr']}", f"--iterations={s['iterations']}",
       # A briefly pretrained model's <cls> state is nearly constant; the
       # mean over positions fine-tunes faster (measured on this sample).
       "--summary_type=mean", "--eval_batch_size=100"], log("classifier"))
  with open(os.path.join(clf_dir, "eval_results_dev.json")) as f:
    best = json.load(f)["best"]

  # 5. Query the raw-text export from a fresh process.
  sentences = ["a gripping , funny and moving film .",
               "the plot is dull and the acting is worse .",
               "an intelligent , beautifully made story ."]
  query = (
      "import json, tensorflow as tf, tensorflow_text\n"
      f"m = tf.saved_model.load({text_export!r})\n"
      f"out = m.signatures['serve_text'](text=tf.constant({sentences!r}))\n"
      "print('RESULT ' + json.dumps([[l.decode(), float(max(p))] for l, p in "
      "zip(out['label'].numpy(), out['probabilities'].numpy())]))\n")
  text = run("5. query the SavedModel with raw text (fresh process)",
             [py, "-c", query], log("query"))
  answers = json.loads(re.search(r"RESULT (.*)", text).group(1))

  # 6. The features export through the stock CLI, on the same sentences.
  queries = write_query_features(os.path.join(work, "queries.npz"),
                                 sentences, spiece, s["clf_len"])
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  text = run("6. query the features export with stock saved_model_cli",
             [cli, "run", "--dir", features_export, "--tag_set", "serve",
              "--signature_def", "serving_default", "--inputs",
              ";".join(f"{k}={queries}[{k}]" for k in FEATURE_KEYS)],
             log("saved_model_cli"))
  cli_probs = cli_output(text, "probabilities")
  if len(cli_probs) != len(answers) or any(
      abs(max(p) - q) > 1e-4 for p, (_, q) in zip(cli_probs, answers)):
    raise RuntimeError(f"saved_model_cli answered {cli_probs}, the raw-text "
                       f"export {answers}")

  # 7. Summary.
  summary = {
      "workdir": work,
      "sentencepiece_model": spiece,
      "pretraining_records": os.path.join(records, "tfrecords"),
      "pretrained_checkpoint": pretrain_dir,
      "pretrained_original_layout": original,
      "pretraining_loss_curve": curve,
      "classifier_checkpoint": clf_dir,
      "text_export": text_export,
      "features_export": features_export,
      "sst2_dev_accuracy": best["accuracy"],
      "sst2_majority_baseline": best["majority_baseline"],
      "sst2_dev_examples": best["num_examples"],
      "queries": dict(zip(sentences, answers)),
      "seconds": round(time.monotonic() - began),
  }
  with open(os.path.join(work, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
  loss = " -> ".join(f"{b:.2f}" for _, b in curve)
  print(f"""
================================ demo summary ================================
artifacts under {work}
  vocabulary          {spiece}
  pretraining records {os.path.join(records, 'tfrecords')}
  pretrained model    {pretrain_dir}  (original layout: {original})
  SST-2 classifier    {clf_dir}
  raw-text export     {text_export}
  features export     {features_export}
pretraining loss (every {s['iterations']} steps): {loss}
SST-2 dev accuracy {best['accuracy']:.3f} on {best['num_examples']} sentences
  (majority-class baseline {best['majority_baseline']:.3f})
raw-text queries from a fresh process (the stock saved_model_cli on their
features agrees):""")
  names = {"0": "negative", "1": "positive"}  # SST-2's labels
  for sentence, (label, prob) in zip(sentences, answers):
    print(f"  {names.get(label, label)} ({prob:.2f})  {sentence}")
  print(f"""
total {summary['seconds']} s; figures in {work}/summary.json

Scale up:
  * real vocabulary and weights: the released xlnet_cased_L-24_H-1024_A-16
    (spiece.model, xlnet_config.json, xlnet_model.ckpt) go straight into
    run_classifier.py --spiece_model_file / --model_config_path /
    --init_checkpoint (docs/conversion.md).
  * pretraining records at corpus scale: python -m
    data_utils.pretraining.create_pretrain_data --input_glob='corpus/*.txt'
    --seq_len=512 --reuse_len=256 --num_predict=85 --perm_size=256
    --bsz_per_host=32 --num_passes=N --task_size_mb=64: one process per
    --task, or every task and pass as one Apache Beam job with --runner
    (DirectRunner on this machine's cores with --pipeline_options="
    --direct_num_workers=N --direct_running_mode=multi_processing";
    FlinkRunner, SparkRunner, DataflowRunner on a cluster: docs/beam.md).
  * predictions over a corpus: run_batch_predict.py --export_dir=<a
    model_dir>/saved_model --input='texts/*.txt' --output_dir=preds, on the
    same Beam runners (docs/batch_prediction.md).
  * data in buckets: every path flag takes gs:// or s3:// (pip install -e
    '.[cloud]'; docs/buckets.md).
  * training hardware: --strategy=mirrored (all local GPUs),
    --strategy=multi_worker (TF_CONFIG cluster), --strategy=tpu --tpu=NAME
    (records with --num_core_per_host = replicas per host); --use_bfloat16
    (TPU, CPUs with AVX512_BF16 or AMX), --use_float16 (GPU),
    --grad_accum_steps, --recompute (docs/speed.md).
==============================================================================""")
  return 0


def main(argv) -> int:
  del argv
  return run_main("run_demo", demo)


def main_cli() -> None:
  """The command line: `python demo/run_demo.py` (`make demo`)."""
  define_flags()
  run_app("run_demo", main)


if __name__ == "__main__":
  main_cli()
