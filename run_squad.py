"""Fine-tunes XLNet on SQuAD v1.1 / v2.0 and writes its answers.

    python run_squad.py \
        --model_config_path=xlnet_cased_L-24_H-1024_A-16/xlnet_config.json \
        --init_checkpoint=xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --train_file=squad/train-v2.0.json --predict_file=squad/dev-v2.0.json \
        --output_dir=proc_data/squad --model_dir=finetuned/squad \
        --predict_dir=finetuned/squad/predictions --do_train --do_predict \
        --max_seq_length=512 --train_batch_size=48 --learning_rate=3e-5 \
        --train_steps=8000 --warmup_steps=1000 --num_proc=8

Flags follow the original `run_squad.py` (+ `--strategy` and the shared
fine-tuning flags). `--do_prepro` only builds the cached training records
(with a pool of `--num_proc` processes). `--do_eval` scores the newest (or
every, `--eval_all_ckpt`) checkpoint on `--predict_file` and picks the best
by `--target_eval_key`; `--do_predict` writes `predictions.json`,
`nbest_predictions.json`, `null_odds.json` (+ `results.json` with EM / F1
when the file has answers) to `--predict_dir`. Training ends with a
SavedModel (features -> beam of start / end log-probs and indices, answer
class logit).

Two bugs of the original are fixed by default; their flags restore them:
`--original_off_by_one` (spans ending on a window's last paragraph piece are
dropped) and `--original_piece_snapping` (whole SentencePiece pieces, so an
answer inside a piece snaps to the whole piece; by default pieces are split
where the character class changes and between digits).
"""

from absl import flags

from data_utils.errors import run_app
from data_utils.path_checks import check_store
from xlnet_tf import cli, model_folder
from xlnet_tf.tasks.squad.spec import SPEC as TASK


FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_squad.py's flags: the shared fine-tuning ones with SQuAD's
  defaults, then its own."""
  cli.define_finetune_flags(dict(task_name="squad", max_seq_length=512,
                                 train_steps=8000, learning_rate=3e-5,
                                 train_batch_size=48, adam_epsilon=1e-6))
  FLAGS.set_default("lr_layer_decay_rate", 0.75)
  # Preprocessing.
  flags.DEFINE_bool("do_prepro", False, "Only build the training records.")
  flags.DEFINE_integer("num_proc", 1, "Preprocessing processes.")
  # Data.
  flags.DEFINE_string("train_file", None, "SQuAD JSON to train on.")
  flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate / answer.")
  flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
  flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
  flags.DEFINE_integer("max_answer_length", 64, "Longest answer, in pieces.")
  # Prediction.
  flags.DEFINE_integer("n_best_size", 5, "Answers kept per question.")
  flags.DEFINE_integer("start_n_top", 5, "Beam size for span starts.")
  flags.DEFINE_integer("end_n_top", 5, "Beam size for span ends.")
  flags.DEFINE_string("target_eval_key", "best_f1",
                      "Metric that picks the best checkpoint (has_ans_f1 for "
                      "the original's Model I).")
  # The original's behaviour.
  flags.DEFINE_bool("original_off_by_one", False,
                    "Reproduce the original's bug: drop answer spans that "
                    "touch a window's last paragraph piece.")
  flags.DEFINE_bool("original_piece_snapping", False,
                    "Reproduce the original's bug: keep the SentencePiece "
                    "pieces whole, so an answer inside a piece (\"8\" of "
                    "\"18\") "
                    "snaps to the whole piece. By default pieces are split "
                    "where the character class changes and between digits.")
  flags.DEFINE_bool("split_digits", True,
                    "With the piece split: also cut numbers into single "
                    "digits (--nosplit_digits keeps numbers whole).")
  flags.mark_flags_as_required(["output_dir", "model_dir"])


def _options():
  f = FLAGS
  return cli.finetune_options(
      f, TASK.options, train_file=f.train_file or "",
      predict_file=f.predict_file or "",
      max_query_length=f.max_query_length, doc_stride=f.doc_stride,
      max_answer_length=f.max_answer_length, n_best_size=f.n_best_size,
      start_n_top=f.start_n_top, end_n_top=f.end_n_top,
      target_eval_key=f.target_eval_key, num_proc=f.num_proc,
      original_off_by_one=f.original_off_by_one,
      original_piece_snapping=f.original_piece_snapping,
      split_digits=f.split_digits)


def main(argv):
  del argv
  if FLAGS.do_prepro:
    cli.split_cpu(FLAGS.num_cpu_devices)

    def prepro():
      cli.check_path_flags(FLAGS)
      model_folder.fill_flags(FLAGS)
      for flag in ("train_file", "predict_file"):
        if getattr(FLAGS, flag):
          check_store(getattr(FLAGS, flag), flag)
      return TASK.workflow(_options()).prepro()
    return cli.run_main("run_squad", prepro)
  return cli.run_finetune_main("run_squad", FLAGS, _options, TASK.run)


def main_cli() -> None:
  """The command line: `python run_squad.py`, or `xlnet-tf-squad` installed."""
  define_flags()
  run_app("run_squad", main)


if __name__ == "__main__":
  main_cli()
