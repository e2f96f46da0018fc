"""Fine-tunes XLNet on RACE (multiple-choice reading comprehension).

    python run_race.py --data_dir=RACE --output_dir=proc_data/race \
        --model_config_path=xlnet_cased_L-24_H-1024_A-16/xlnet_config.json \
        --init_checkpoint=xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --model_dir=finetuned/race --do_train --do_eval \
        --max_seq_length=512 --max_qa_length=128 --train_batch_size=8 \
        --learning_rate=2e-5 --train_steps=12000 --warmup_steps=1000

Flags follow the original `run_race.py`. Evaluation reports accuracy for
middle, high and all; `--do_predict` writes `race_predictions.tsv` for the
evaluation split; training ends with a SavedModel (features of the four
options -> four logits).
"""

from absl import flags

from data_utils.errors import run_app
from xlnet_tf import cli
from xlnet_tf.tasks.multiple_choice.spec import SPEC as TASK


FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_race.py's flags: the shared fine-tuning ones with RACE's defaults,
  then its own."""
  cli.define_finetune_flags(dict(task_name="race", max_seq_length=512,
                                 train_steps=12000, learning_rate=2e-5,
                                 adam_epsilon=1e-6))
  flags.DEFINE_integer("max_qa_length", 128,
                       "Tokens kept (the last ones) of question + option.")
  flags.DEFINE_bool("high_only", False, "High-school passages only.")
  flags.DEFINE_bool("middle_only", False, "Middle-school passages only.")
  flags.DEFINE_bool("original_context_aliasing", False,
                    "Reproduce the original's bug: short contexts carry the "
                    "earlier options' tokens into later options (issue #204).")
  flags.mark_flags_as_required(cli.REQUIRED)


def _options():
  f = FLAGS
  return cli.finetune_options(
      f, TASK.options, max_qa_length=f.max_qa_length,
      high_only=f.high_only, middle_only=f.middle_only,
      original_context_aliasing=f.original_context_aliasing)


def main(argv):
  del argv
  return cli.run_finetune_main("run_race", FLAGS, _options, TASK.run)


def main_cli() -> None:
  """The command line: `python run_race.py`, or `xlnet-tf-race` installed."""
  define_flags()
  run_app("run_race", main)


if __name__ == "__main__":
  main_cli()
