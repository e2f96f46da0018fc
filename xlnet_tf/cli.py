"""Flag definitions the fine-tuning entry scripts share, and their mapping to
options objects. The scripts pass their FlagValues in; nothing here reads
global flags."""

from __future__ import annotations

from typing import Callable

from absl import flags

from data_utils.errors import UsageError, run_main
from data_utils.path_checks import check_store, tf_path
import xlnet_tf
from xlnet_tf import model_folder
from xlnet_tf.precision import dtype_policy
from xlnet_tf.tasks import SUMMARY_TYPES
from xlnet_tf.training import TrainOptions, split_cpu


def define_performance_flags(grad_accum_help: str) -> None:
  """Initializer, precision, memory and distribution flags every entry
  script shares."""
  flags.DEFINE_enum("init", "normal", ["normal", "uniform"], "Initializer.")
  flags.DEFINE_float("init_std", 0.02, "Normal initializer stddev.")
  flags.DEFINE_float("init_range", 0.1, "Uniform initializer range.")
  flags.DEFINE_bool("use_bfloat16", False, "Compute in bfloat16.")
  flags.DEFINE_bool("use_float16", False,
                    "Compute in float16 with dynamic loss scaling (GPU).")
  flags.DEFINE_bool("recompute", False,
                    "Recompute each layer in the backward pass: less memory.")
  flags.DEFINE_integer("grad_accum_steps", 1, grad_accum_help)
  flags.DEFINE_bool("jit_compile", None,
                    "XLA for the forward/backward pass. Unset: whichever "
                    "trains faster on this machine (XLA on a CPU without "
                    "AVX-512, else TensorFlow's graph); --nojit_compile "
                    "forces the graph.")
  flags.DEFINE_enum("strategy", "default",
                    ["default", "mirrored", "multi_worker", "tpu"],
                    "tf.distribute strategy.")
  flags.DEFINE_string("tpu", None, "TPU name or address (strategy=tpu).")
  flags.DEFINE_integer("num_cpu_devices", 0,
                       "Split the CPU into this many logical devices (to try "
                       "--strategy=mirrored without accelerators); 0 = off.")


def define_finetune_flags(defaults: dict) -> None:
  """The original fine-tuning flags (run_classifier / run_race / run_squad),
  with per-script `defaults` overriding ours."""
  d = dict(dict(
      max_seq_length=128, train_steps=1000, learning_rate=1e-5,
      train_batch_size=8, eval_batch_size=32, predict_batch_size=32,
      adam_epsilon=1e-8), **defaults)
  # Model.
  model_folder.define_model_flags()
  flags.DEFINE_float("dropout", 0.1, "Dropout.")
  flags.DEFINE_float("dropatt", 0.1, "Attention dropout.")
  flags.DEFINE_integer("clamp_len", -1, "Clamp relative distances.")
  flags.DEFINE_enum("summary_type", "last", list(SUMMARY_TYPES),
                    "How to summarize the sequence.")
  flags.DEFINE_bool("use_summ_proj", True, "Tanh projection in the summary.")
  # I/O.
  flags.DEFINE_bool("overwrite_data", False, "Rebuild cached features.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace prediction and result files that exist but are "
                    "not this project's unchanged output (by default such a "
                    "file stops the run before any work).")
  flags.DEFINE_string("output_dir", None, "Cached feature TFRecords.")
  flags.DEFINE_string("model_dir", None, "Fine-tuned checkpoints.")
  flags.DEFINE_string("data_dir", None, "Task data.")
  flags.DEFINE_string("export_dir", None,
                      "Root of the versioned exports, <export_dir>/features|"
                      "text|tflite/<step>/ (default model_dir/saved_model).")
  flags.DEFINE_bool("export_tflite", False,
                    "Also export the features model as TFLite, float32 and "
                    "dynamic-range int8.")
  flags.DEFINE_integer("iterations", 100, "Steps per loop and log line.")
  define_performance_flags("Micro-batches per optimizer step "
                           "(train_batch_size is split over them).")
  flags.DEFINE_integer("freeze_layers", 0,
                       "Keep the embeddings and the lowest n layers fixed.")
  # Training.
  flags.DEFINE_bool("do_train", False, "Train.")
  flags.DEFINE_integer("train_steps", d["train_steps"], "Training steps.")
  flags.DEFINE_integer("warmup_steps", 0, "Warm-up steps.")
  flags.DEFINE_float("learning_rate", d["learning_rate"], "Peak rate.")
  flags.DEFINE_float("lr_layer_decay_rate", 1.0,
                     "Layer l of n trains at lr * rate^(n - 1 - l).")
  flags.DEFINE_float("min_lr_ratio", 0.0, "Final / peak learning rate.")
  flags.DEFINE_float("clip", 1.0, "Global-norm gradient clipping.")
  flags.DEFINE_integer("max_save", 0, "Checkpoints kept (0 = all).")
  flags.DEFINE_integer("save_steps", None, "Checkpoint every this many steps.")
  flags.DEFINE_integer("train_batch_size", d["train_batch_size"],
                       "Training batch size.")
  flags.DEFINE_float("weight_decay", 0.0, "AdamW weight decay.")
  flags.DEFINE_float("adam_epsilon", d["adam_epsilon"], "Adam epsilon.")
  flags.DEFINE_enum("decay_method", "poly", ["poly", "cos"], "LR decay.")
  # Evaluation and prediction.
  flags.DEFINE_bool("do_eval", False, "Evaluate.")
  flags.DEFINE_bool("do_predict", False, "Write predictions.")
  flags.DEFINE_string("train_split", "train", "Split to train on.")
  flags.DEFINE_string("eval_split", "dev", "Split to evaluate.")
  flags.DEFINE_integer("eval_batch_size", d["eval_batch_size"],
                       "Evaluation batch size.")
  flags.DEFINE_integer("predict_batch_size", d["predict_batch_size"],
                       "Prediction batch size.")
  flags.DEFINE_string("predict_dir", None, "Prediction files.")
  flags.DEFINE_bool("eval_all_ckpt", False, "Evaluate every checkpoint.")
  flags.DEFINE_string("predict_ckpt", None, "Checkpoint to predict with.")
  # Data.
  flags.DEFINE_string("task_name", defaults.get("task_name"), "Task.")
  flags.DEFINE_integer("max_seq_length", d["max_seq_length"],
                       "Sequence length.")
  flags.DEFINE_integer("shuffle_buffer", 2048, "Training shuffle buffer.")
  flags.DEFINE_integer("num_passes", 1, "Repeat the training data.")
  flags.DEFINE_bool("uncased", False, "Lower-case the text.")
  flags.DEFINE_integer("seed", 0,
                       "Seeds the new weights (the task head, and the whole "
                       "model without --init_checkpoint), dropout and the "
                       "training-data shuffling: the same command gives the "
                       "same run.")


def finetune_options(f, options_cls, **extra):
  """`options_cls` (a FinetuneOptions subclass) from parsed flags `f`."""
  return options_cls(
      config=model_folder.read_config(f.model_config_path),
      run=xlnet_tf.RunOptions(
          dropout=f.dropout, dropatt=f.dropatt, init=f.init,
          init_std=f.init_std, init_range=f.init_range,
          clamp_len=f.clamp_len, use_bfloat16=f.use_bfloat16,
          use_float16=f.use_float16, recompute=f.recompute),
      train=TrainOptions(
          model_dir=f.model_dir, train_steps=f.train_steps,
          learning_rate=f.learning_rate, warmup_steps=f.warmup_steps,
          min_lr_ratio=f.min_lr_ratio, weight_decay=f.weight_decay,
          adam_epsilon=f.adam_epsilon, clip=f.clip, iterations=f.iterations,
          save_steps=f.save_steps, max_save=f.max_save or 10 ** 6,
          strategy=f.strategy, tpu=f.tpu, init_checkpoint=f.init_checkpoint,
          decay_method=f.decay_method,
          lr_layer_decay_rate=f.lr_layer_decay_rate,
          grad_accum_steps=f.grad_accum_steps, jit_compile=f.jit_compile,
          freeze_layers=f.freeze_layers, seed=f.seed),
      task_name=f.task_name, data_dir=f.data_dir, output_dir=f.output_dir,
      spiece_model_file=f.spiece_model_file, max_seq_length=f.max_seq_length,
      summary_type=f.summary_type, use_summ_proj=f.use_summ_proj,
      uncased=f.uncased, do_train=f.do_train, do_eval=f.do_eval,
      do_predict=f.do_predict, train_batch_size=f.train_batch_size,
      eval_batch_size=f.eval_batch_size,
      predict_batch_size=f.predict_batch_size, train_split=f.train_split,
      eval_split=f.eval_split,
      eval_all_ckpt=f.eval_all_ckpt, predict_ckpt=f.predict_ckpt,
      predict_dir=f.predict_dir, num_passes=f.num_passes,
      shuffle_buffer=f.shuffle_buffer, overwrite_data=f.overwrite_data,
      overwrite=f.overwrite,
      export_dir=f.export_dir, export_tflite=f.export_tflite, seed=f.seed,
      **extra)


# The path flags of the fine-tuning scripts. TensorFlow reads and writes the
# first group itself (checkpoints, SavedModels, the cached feature records
# its datasets read), so they take local paths and gs:// only; the project
# reads and writes the others (any store `data_utils.paths` knows).
TF_PATH_FLAGS = ("model_dir", "init_checkpoint", "predict_ckpt", "output_dir",
                 "export_dir")
PATH_FLAGS = TF_PATH_FLAGS + ("data_dir", "spiece_model_file",
                              "model_config_path", "predict_dir")


def check_path_flags(f) -> None:
  """One line naming the flag, before anything is read or written, for a
  path flag on a scheme TF cannot use where TF uses it, or on a store that
  does not answer, lacks credentials or the bucket (`path_checks`)."""
  for flag in TF_PATH_FLAGS:
    if getattr(f, flag, None):
      tf_path(getattr(f, flag), flag)
  for flag in PATH_FLAGS:
    if getattr(f, flag, None):
      check_store(getattr(f, flag), flag)


def run_finetune_main(name: str, f, make_options: Callable, run: Callable
                      ) -> int:
  """Common body of a fine-tuning script's main (errors: `run_main`)."""
  split_cpu(f.num_cpu_devices)

  def body():
    if not (f.do_train or f.do_eval or f.do_predict):
      raise UsageError("nothing to do: pass --do_train, --do_eval and/or "
                       "--do_predict")
    check_path_flags(f)
    model_folder.fill_flags(f)
    options = make_options()
    dtype_policy(options.run)  # refuses a precision that would crash here
    result = run(options)
    for servable, path in result.get("export", {}).items():
      print(f"exported {servable}: {path}")
    if "eval" in result:
      best = result["eval"]["best"]
      print("best checkpoint: step {}: {}".format(
          best["step"], {k: round(v, 4) for k, v in best.items()
                         if isinstance(v, float)}))
  return run_main(name, body)


# The model's config and SentencePiece model are required too, from their
# flags or the --init_checkpoint folder (`model_folder.fill_flags`).
REQUIRED = ["data_dir", "output_dir", "model_dir"]
