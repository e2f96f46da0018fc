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
original TF1 checkpoint or one written by this project. After training, a
SavedModel with feature and raw-text signatures goes to `--export_dir`
(default `model_dir/saved_model`).
"""

import sys

from absl import app, flags

FLAGS = flags.FLAGS

# Model.
flags.DEFINE_string("model_config_path", None, "xlnet_config.json.")
flags.DEFINE_float("dropout", 0.1, "Dropout.")
flags.DEFINE_float("dropatt", 0.1, "Attention dropout.")
flags.DEFINE_integer("clamp_len", -1, "Clamp relative distances.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"],
                  "How to summarize the sequence.")
flags.DEFINE_bool("use_summ_proj", True, "Tanh projection in the summary.")
flags.DEFINE_bool("use_bfloat16", False, "Compute in bfloat16.")
flags.DEFINE_enum("init", "normal", ["normal", "uniform"], "Initializer.")
flags.DEFINE_float("init_std", 0.02, "Normal initializer stddev.")
flags.DEFINE_float("init_range", 0.1, "Uniform initializer range.")
# I/O.
flags.DEFINE_bool("overwrite_data", False, "Rebuild cached features.")
flags.DEFINE_string("init_checkpoint", None,
                    "Original TF1 or xlnet-tf checkpoint to start from.")
flags.DEFINE_string("output_dir", None, "Cached feature TFRecords.")
flags.DEFINE_string("spiece_model_file", None, "SentencePiece model.")
flags.DEFINE_string("model_dir", None, "Fine-tuned checkpoints.")
flags.DEFINE_string("data_dir", None, "Task data.")
flags.DEFINE_string("export_dir", None,
                    "SavedModel directory (default model_dir/saved_model).")
# Distribution.
flags.DEFINE_enum("strategy", "default",
                  ["default", "mirrored", "multi_worker", "tpu"],
                  "tf.distribute strategy.")
flags.DEFINE_string("tpu", None, "TPU name or address.")
flags.DEFINE_integer("num_cpu_devices", 0,
                     "Split the CPU into this many logical devices.")
flags.DEFINE_integer("iterations", 100, "Steps per loop and log line.")
# Training.
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_integer("train_steps", 1000, "Training steps.")
flags.DEFINE_integer("warmup_steps", 0, "Warm-up steps.")
flags.DEFINE_float("learning_rate", 1e-5, "Peak learning rate.")
flags.DEFINE_float("lr_layer_decay_rate", 1.0,
                   "Layer l of n trains at lr * rate^(n - 1 - l).")
flags.DEFINE_float("min_lr_ratio", 0.0, "Final / peak learning rate.")
flags.DEFINE_float("clip", 1.0, "Global-norm gradient clipping.")
flags.DEFINE_integer("max_save", 0, "Checkpoints kept (0 = all).")
flags.DEFINE_integer("save_steps", None, "Checkpoint every this many steps.")
flags.DEFINE_integer("train_batch_size", 8, "Training batch size.")
flags.DEFINE_float("weight_decay", 0.0, "AdamW weight decay.")
flags.DEFINE_float("adam_epsilon", 1e-8, "Adam epsilon.")
flags.DEFINE_enum("decay_method", "poly", ["poly", "cos"], "LR decay.")
# Evaluation and prediction.
flags.DEFINE_bool("do_eval", False, "Evaluate.")
flags.DEFINE_bool("do_predict", False, "Predict the test split.")
flags.DEFINE_float("predict_threshold", 0.0,
                   "Binary tasks: class 1 when p(1) > threshold (0 = argmax).")
flags.DEFINE_enum("eval_split", "dev", ["dev", "test", "train"],
                  "Split to evaluate.")
flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 32, "Prediction batch size.")
flags.DEFINE_string("predict_dir", None, "Prediction files.")
flags.DEFINE_bool("eval_all_ckpt", False, "Evaluate every checkpoint.")
flags.DEFINE_string("predict_ckpt", None, "Checkpoint to predict with.")
# Task.
flags.DEFINE_string("task_name", None, "Task (see --helpfull).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("shuffle_buffer", 2048, "Training shuffle buffer.")
flags.DEFINE_integer("num_passes", 1, "Repeat the training data.")
flags.DEFINE_bool("uncased", False, "Lower-case the text.")
flags.DEFINE_string("cls_scope", None, "Classifier scope (default task name).")
flags.DEFINE_bool("is_regression", False, "Regression task.")
flags.DEFINE_integer("seed", 0, "Shuffling seed.")
# Your own data (task_name=generic).
flags.DEFINE_integer("text_a_column", 0, "generic: text column.")
flags.DEFINE_integer("text_b_column", None, "generic: second text column.")
flags.DEFINE_integer("label_column", 1, "generic: label column.")
flags.DEFINE_list("label_list", None, "generic: the labels, in order.")
flags.DEFINE_bool("has_header", True, "generic: first row is a header.")
flags.DEFINE_enum("delimiter", "tab", ["tab", "comma"], "generic: separator.")

flags.mark_flags_as_required(["task_name", "model_config_path",
                              "spiece_model_file", "data_dir", "output_dir",
                              "model_dir"])


def main(argv):
  del argv
  import xlnet_tf
  from data_utils.classifier_data import GenericSpec, TaskDataError
  from data_utils.tokenization import TokenizerError
  from xlnet_tf.checkpoint import CheckpointError
  from xlnet_tf.training import TrainOptions, split_cpu
  from xlnet_tf.workflows import classifier

  f = FLAGS
  split_cpu(f.num_cpu_devices)
  try:
    if not (f.do_train or f.do_eval or f.do_predict):
      raise ValueError("nothing to do: pass --do_train, --do_eval and/or "
                       "--do_predict")
    opts = classifier.ClassifierOptions(
        config=xlnet_tf.XLNetConfig.from_json(f.model_config_path),
        run=xlnet_tf.RunOptions(
            dropout=f.dropout, dropatt=f.dropatt, init=f.init,
            init_std=f.init_std, init_range=f.init_range,
            clamp_len=f.clamp_len, use_bfloat16=f.use_bfloat16),
        train=TrainOptions(
            model_dir=f.model_dir, train_steps=f.train_steps,
            learning_rate=f.learning_rate, warmup_steps=f.warmup_steps,
            min_lr_ratio=f.min_lr_ratio, weight_decay=f.weight_decay,
            adam_epsilon=f.adam_epsilon, clip=f.clip,
            iterations=f.iterations, save_steps=f.save_steps,
            max_save=f.max_save or 10 ** 6, strategy=f.strategy, tpu=f.tpu,
            init_checkpoint=f.init_checkpoint, decay_method=f.decay_method,
            lr_layer_decay_rate=f.lr_layer_decay_rate),
        task_name=f.task_name, data_dir=f.data_dir, output_dir=f.output_dir,
        spiece_model_file=f.spiece_model_file,
        max_seq_length=f.max_seq_length, is_regression=f.is_regression,
        cls_scope=f.cls_scope, summary_type=f.summary_type,
        use_summ_proj=f.use_summ_proj, uncased=f.uncased,
        do_train=f.do_train, do_eval=f.do_eval, do_predict=f.do_predict,
        train_batch_size=f.train_batch_size,
        eval_batch_size=f.eval_batch_size,
        predict_batch_size=f.predict_batch_size, eval_split=f.eval_split,
        eval_all_ckpt=f.eval_all_ckpt, predict_ckpt=f.predict_ckpt,
        predict_dir=f.predict_dir, predict_threshold=f.predict_threshold,
        num_passes=f.num_passes, shuffle_buffer=f.shuffle_buffer,
        overwrite_data=f.overwrite_data, export_dir=f.export_dir,
        generic=GenericSpec(
            text_a=f.text_a_column, text_b=f.text_b_column,
            label=f.label_column, labels=f.label_list,
            header=f.has_header,
            delimiter="\t" if f.delimiter == "tab" else ","),
        seed=f.seed)
    result = classifier.run(opts)
  except (xlnet_tf.ConfigError, TaskDataError, TokenizerError,
          CheckpointError, ValueError) as e:
    sys.stderr.write(f"run_classifier: {e}\n")
    return 2
  if "eval" in result:
    best = result["eval"]["best"]
    print("best checkpoint: step {step}: {metrics}".format(
        step=best["step"], metrics={k: round(v, 4) for k, v in best.items()
                                    if isinstance(v, float)}))
  return 0


if __name__ == "__main__":
  app.run(main)
