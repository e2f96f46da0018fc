"""Fine-tunes XLNet for text classification or regression (GLUE, IMDB,
Yelp, Amazon, DBpedia, AG News, or your own TSV/CSV).

    python run_classifier.py --task_name=sst-2 --data_dir=glue/SST-2 \
        --model_config_path=xlnet_cased_L-24_H-1024_A-16/xlnet_config.json \
        --init_checkpoint=xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --output_dir=proc_data/sst-2 --model_dir=finetuned/sst-2 \
        --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \
        --learning_rate=2e-5 --train_steps=4000 --warmup_steps=500

Flags follow the original `run_classifier.py`; `--init_checkpoint` takes an
original TF1 checkpoint or one written by this project. After training, the
last checkpoint is exported under `--export_dir` (default
`model_dir/saved_model`) as TF Serving versions: `features/<step>` (plain
TensorFlow), `text/<step>` (raw-text signatures; needs tensorflow_text)
and, with `--export_tflite`, `tflite/<step>` (float32 and int8).

Long documents (IMDB, Yelp, ...): `--max_segments=4 --max_seq_length=128
--mem_len=128` reads up to 4 x 128 tokens per text as consecutive segments
with Transformer-XL memory instead of truncating to one window.
"""

import dataclasses

from absl import flags

from data_utils.classification.reader import GenericSpec
from data_utils.errors import run_app
from xlnet_tf import cli
# Regression too: one workflow.
from xlnet_tf.tasks.classification.spec import CLASSIFICATION as TASK
from xlnet_tf.tasks.classification.workflow import check_segment_options

FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_classifier.py's flags: the shared fine-tuning ones, then its own."""
  cli.define_finetune_flags({})
  flags.DEFINE_float("predict_threshold", 0.0,
                     "Binary tasks: class 1 when p(1) > threshold "
                     "(0 = argmax).")
  flags.DEFINE_string("cls_scope", None,
                      "Classifier scope (default task name).")
  flags.DEFINE_bool("is_regression", False, "Regression task.")
  # Long documents: segments read in order with memory.
  flags.DEFINE_integer("max_segments", 1,
                       "Segments of max_seq_length tokens per text (1 = one "
                       "window, as the original).")
  flags.DEFINE_integer("mem_len", 0,
                       "Tokens of memory carried from segment to segment "
                       "(required > 0 with max_segments > 1).")
  flags.DEFINE_integer("bptt_segments", 1,
                       "Back-propagate through the last this many segments "
                       "(1 = the memory is a stop-gradient).")
  flags.DEFINE_bool("keep_end", False,
                    "Texts longer than max_segments segments keep their end "
                    "(default: their beginning).")
  # Your own data (task_name=generic).
  flags.DEFINE_integer("text_a_column", 0, "generic: text column.")
  flags.DEFINE_integer("text_b_column", None,
                       "generic: second text column.")
  flags.DEFINE_integer("label_column", 1, "generic: label column.")
  flags.DEFINE_list("label_list", None, "generic: the labels, in order.")
  flags.DEFINE_bool("has_header", True, "generic: first row is a header.")
  flags.DEFINE_enum("delimiter", "tab", ["tab", "comma"],
                    "generic: separator.")
  flags.mark_flags_as_required(["task_name"] + cli.REQUIRED)


def _options():
  f = FLAGS
  # Before RunOptions sees mem_len: the error names the flags.
  check_segment_options(f.max_segments, f.mem_len,
                                   f.bptt_segments, f.keep_end)
  generic = GenericSpec(
      text_a=f.text_a_column, text_b=f.text_b_column, label=f.label_column,
      labels=f.label_list, header=f.has_header,
      delimiter="\t" if f.delimiter == "tab" else ",")
  opts = cli.finetune_options(
      f, TASK.options, is_regression=f.is_regression,
      cls_scope=f.cls_scope, predict_threshold=f.predict_threshold,
      generic=generic, max_segments=f.max_segments, keep_end=f.keep_end,
      bptt_segments=f.bptt_segments)
  return dataclasses.replace(
      opts, run=dataclasses.replace(opts.run, mem_len=f.mem_len))


def main(argv):
  del argv
  return cli.run_finetune_main("run_classifier", FLAGS, _options,
                               TASK.run)


def main_cli() -> None:
  """The command line: `python run_classifier.py`,
  or `xlnet-tf-classifier` installed."""
  define_flags()
  run_app("run_classifier", main)


if __name__ == "__main__":
  main_cli()
