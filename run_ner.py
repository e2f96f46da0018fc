"""Fine-tunes XLNet for named entities (or any word-labelled data):
CoNLL-2003 or your own CoNLL-layout / JSONL files.

    python run_ner.py --data_dir=conll2003 \
        --model_config_path=xlnet_cased_L-24_H-1024_A-16/xlnet_config.json \
        --init_checkpoint=xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --output_dir=proc_data/ner --model_dir=finetuned/ner \
        --do_train --do_eval --do_predict --predict_file=conll2003/eng.testb \
        --max_seq_length=128 --train_batch_size=16 --learning_rate=3e-5 \
        --train_steps=5000 --warmup_steps=500

Evaluation reports entity precision, recall and F1 overall and per type as
conlleval computes them, and token accuracy; predictions are written in the
CoNLL layout (`word gold predicted`) and as JSONL with character offsets.
After training, the last checkpoint is exported under `--export_dir`
(default `model_dir/saved_model`) as TF Serving versions: `features/<step>`
(the features signature, plain TensorFlow) and `text/<step>` (also the
raw-text signature: entities with character offsets, a tag per word; needs
tensorflow_text); `--export_tflite` adds `tflite/<step>`.
"""

from absl import flags

from data_utils.errors import run_app
from data_utils.ner.schemes import SCHEMES
from xlnet_tf import cli
from xlnet_tf.tasks.token_classification.spec import SPEC as TASK


FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_ner.py's flags: the shared fine-tuning ones with NER's defaults,
  then its own."""
  cli.define_finetune_flags({"task_name": "ner", "learning_rate": 3e-5,
                             "train_batch_size": 16})
  flags.DEFINE_string("train_file", None,
                      "Training file (CoNLL layout, or .jsonl); default: the "
                      "train split's file in --data_dir.")
  flags.DEFINE_string("eval_file", None, "Evaluation file (default: the "
                      "eval split's file in --data_dir, eng.testa for dev).")
  flags.DEFINE_string("predict_file", None, "File to predict (default: the "
                      "test split's file in --data_dir).")
  flags.DEFINE_integer("doc_stride", 64, "Pieces between the starts of the "
                       "windows of a sentence longer than max_seq_length - 2.")
  flags.DEFINE_bool("label_all_pieces", False, "Train on every piece of a word "
                    "(B- becomes I- after the first), not only the first.")
  flags.DEFINE_bool("document_context", False, "Read each sentence after as "
                    "many preceding words of its document as fit the window.")
  flags.DEFINE_list("label_list", None, "The entity types or tags (default: "
                    "those of the training file).")
  flags.DEFINE_enum("tag_scheme", None, list(SCHEMES),
                    "The files' tag scheme (default: found from the tags).")
  flags.mark_flags_as_required([n for n in cli.REQUIRED if n != "data_dir"])


def _options():
  f = FLAGS
  return cli.finetune_options(
      f, TASK.options, train_file=f.train_file or "",
      eval_file=f.eval_file or "", predict_file=f.predict_file or "",
      doc_stride=f.doc_stride, label_all_pieces=f.label_all_pieces,
      document_context=f.document_context,
      label_list=tuple(f.label_list) if f.label_list else None,
      tag_scheme=f.tag_scheme)


def main(argv):
  del argv
  return cli.run_finetune_main("run_ner", FLAGS, _options, TASK.run)


def main_cli() -> None:
  """The command line: `python run_ner.py`, or `xlnet-tf-ner` installed."""
  define_flags()
  run_app("run_ner", main)


if __name__ == "__main__":
  main_cli()
