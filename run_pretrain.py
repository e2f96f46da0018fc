"""Pretrains XLNet on records from `data_utils.pretraining.create_pretrain_data`.

    python run_pretrain.py --record_info_dir=proc/tfrecords --model_dir=ckpt \
        --train_batch_size=32 --seq_len=512 --reuse_len=256 --mem_len=384 \
        --perm_size=256 --num_predict=85 --bi_data --n_layer=24 ... \
        --strategy=mirrored

Flags follow the original's `train.py` / `train_gpu.py`. Checkpoints go to
`model_dir` every `save_steps` (a re-run resumes from the newest, and must
use the model flags the run was started with: see `check_resume`); at the end
the weights are also written in the original layout
(`model_dir/original/xlnet_model.ckpt` + `xlnet_config.json`), which the
fine-tuning scripts and the original code load.
"""

import dataclasses
import re
from typing import Dict

import data_utils  # noqa: F401 (before TensorFlow: it keeps Keras 3 out)
import tensorflow as tf
from absl import flags, logging

import xlnet_tf
from data_utils.errors import (UsageError, UserError, check_positive,
                               run_app, run_main)
from data_utils import paths
from data_utils.fingerprint import file_sha256
from data_utils.path_checks import check_store, check_writable_dir, tf_path
from data_utils.pretraining.examples import (PERM_SIZE_FLAG_DEFAULT,
                                             PretrainDataConfig,
                                             flag_perm_size)
from data_utils.pretraining.reader import (check_record_files,
                                           load_record_infos,
                                           pretrain_dataset, read_record_info)
from data_utils.text_files import read_json
from xlnet_tf import model_folder
from xlnet_tf.cli import define_performance_flags
from xlnet_tf.config import MAX_N_TOKEN, ConfigError
from xlnet_tf.io import check_init_checkpoint, load_checkpoint
from xlnet_tf.tasks import PretrainTask
from xlnet_tf.tasks.language_model.original_export import (
    check_original_export, export_original)
from xlnet_tf.training import (TrainOptions, Trainer, num_workers, split_cpu,
                               write_run_files)

FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_pretrain.py's flags: the original's `train.py` ones and the
  shared performance ones."""
  # Data.
  flags.DEFINE_string("record_info_dir", None,
                      "Directory (or comma list) with record_info-*.json.")
  flags.DEFINE_string("split", "train", "Records' split.")
  flags.DEFINE_integer("num_passes", None, "Use only passes < num_passes.")
  flags.DEFINE_integer("train_batch_size", 16, "Batch size per host.")
  flags.DEFINE_integer("seq_len", None, "Sequence length.")
  flags.DEFINE_integer("reuse_len", None, "Tokens reused as memory next step.")
  flags.DEFINE_integer("perm_size", PERM_SIZE_FLAG_DEFAULT,
                       "Permutation block size (records').")
  flags.DEFINE_bool("bi_data", True, "Records hold reversed streams too.")
  flags.DEFINE_integer("mask_alpha", 6, "Records' span context size.")
  flags.DEFINE_integer("mask_beta", 1, "Records' tokens per span group.")
  flags.DEFINE_integer("num_predict", None, "Predictions per example.")
  flags.DEFINE_bool("uncased", False, "Records were lower-cased.")
  flags.DEFINE_integer("seed", 0,
                       "Seeds the initial weights (without --init_checkpoint), "
                       "dropout and the file-order shuffling: the same command "
                       "gives the same run.")
  # Model: a config by name or file, else the original's (tiny) flags.
  flags.DEFINE_string(
      "model_config_path", None,
      "The model's config: base, large, an xlnet_config.json or an HF "
      "config.json (default: the --init_checkpoint folder's, else the model "
      "flags below, whose defaults are the original's tiny model).")
  flags.DEFINE_string(
      "spiece_model_file", None,
      "The SentencePiece model the records were built with (checked against "
      "them): copied into model_dir/original/, which is then a whole model "
      "folder for --init_checkpoint of every other script.")
  flags.DEFINE_integer("n_token", 32000, "Vocabulary size.")
  flags.DEFINE_integer("mem_len", 0, "Memory length.")
  flags.DEFINE_bool("same_length", False, "Same length attention.")
  flags.DEFINE_integer("clamp_len", -1, "Clamp relative distances.")
  flags.DEFINE_integer("n_layer", 6, "Layers.")
  flags.DEFINE_integer("d_model", 32, "Model size.")
  flags.DEFINE_integer("d_embed", None, "Embedding size (must equal d_model).")
  flags.DEFINE_integer("n_head", 4, "Attention heads.")
  flags.DEFINE_integer("d_head", 8, "Head size.")
  flags.DEFINE_integer("d_inner", 32, "FFN inner size.")
  flags.DEFINE_enum("ff_activation", "relu", ["relu", "gelu"],
                    "FFN activation.")
  flags.DEFINE_bool("untie_r", False, "Untie attention biases across layers.")
  flags.DEFINE_float("dropout", 0.0, "Dropout.")
  flags.DEFINE_float("dropatt", 0.0, "Attention dropout.")
  # Optimization and loop.
  flags.DEFINE_string("model_dir", None, "Checkpoints and summaries.")
  flags.DEFINE_bool("overwrite", False, "Replace files in model_dir/original/ "
                    "(the final weights in the original's layout) that "
                    "xlnet-tf did not write.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Start from this checkpoint (original or native layout).")
  flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
  flags.DEFINE_integer("warmup_steps", 0, "Linear warm-up steps.")
  flags.DEFINE_integer("train_steps", 100000, "Total steps.")
  flags.DEFINE_float("min_lr_ratio", 0.001, "Final / peak learning rate.")
  flags.DEFINE_float("weight_decay", 0.0, "AdamW weight decay.")
  flags.DEFINE_float("adam_epsilon", 1e-8, "Adam epsilon.")
  flags.DEFINE_float("clip", 1.0, "Global-norm gradient clipping.")
  flags.DEFINE_integer("iterations", 100, "Steps per loop and log line.")
  flags.DEFINE_integer("save_steps", None, "Checkpoint every this many steps.")
  flags.DEFINE_integer("max_save", 5, "Checkpoints kept.")
  define_performance_flags("Consecutive segments of the streams whose "
                           "gradients make one optimizer step.")

  flags.mark_flags_as_required(["record_info_dir", "model_dir", "seq_len",
                                "reuse_len", "num_predict"])


def main(argv):
  del argv
  f = FLAGS
  split_cpu(f.num_cpu_devices)
  return run_main("run_pretrain", lambda: _pretrain(f))


# Flags that must be at least 1 (0 for the second group).
_POSITIVE = ("train_batch_size", "seq_len", "reuse_len", "num_predict",
             "train_steps", "iterations", "max_save", "n_layer", "d_model",
             "n_head", "d_head", "d_inner", "n_token", "grad_accum_steps")
_NON_NEGATIVE = ("mem_len", "perm_size", "warmup_steps")


def check_flags(f) -> None:
  """One-line UsageError naming the first flag whose value cannot work."""
  for name in _POSITIVE:
    check_positive(getattr(f, name), name)
  for name in _NON_NEGATIVE:
    check_positive(getattr(f, name), name, minimum=0)
  for name in ("save_steps", "num_passes"):
    if getattr(f, name) is not None:
      check_positive(getattr(f, name), name)
  if f.n_token > MAX_N_TOKEN:
    raise UsageError(f"--n_token={f.n_token}: must be at most {MAX_N_TOKEN} "
                     "(2**24; see xlnet_tf/config.py)")


# Recorded settings a resumed run may change: they change how a step is
# computed (memory, 16-bit matmuls on another machine), not the model, its
# data or its regularisation. Every other recorded setting must match, so the
# files keep describing the whole run: the model's shape (all of
# xlnet_config.json), memory and attention (mem_len, reuse_len, bi_data,
# attn_type, clamp_len, same_length), dropout, the initialiser (recorded as
# the run's), and use_float16 (loss scaling changes the optimizer's state).
# The learning-rate schedule and train_steps are not recorded: they may
# change.
RESUMABLE_CHANGES = ("recompute", "use_bfloat16", "fast_kernels")

_CKPT_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Native checkpoint keys (the Trainer's) -> the config keys of their dims.
_CKPT_DIMS = {
    "model/encoder/word_embedding.Slookup_table": ("n_token", "d_model"),
    "model/encoder/blocks/0/rel_attn/q.Skernel": ("d_model", "n_head",
                                                  "d_head"),
    "model/encoder/blocks/0/ff/layer_1/kernel": ("d_model", "d_inner"),
}


def config_from_checkpoint(prefix: str) -> Dict[str, object]:
  """What a native pretraining checkpoint says of the model's shape:
  `n_layer, d_model, n_head, d_head, d_inner, n_token, untie_r` (those its
  variables show; not ff_activation)."""
  shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  found: Dict[str, object] = {}
  for key, dims in _CKPT_DIMS.items():
    shape = shapes.get(key + _CKPT_VALUE)
    if shape is not None and len(shape) == len(dims):
      found.update(zip(dims, (int(d) for d in shape)))
  layers = {int(m.group(1)) for m in (
      re.match(r"model/encoder/blocks/(\d+)/", k) for k in shapes) if m}
  if layers:
    found["n_layer"] = max(layers) + 1
  bias = shapes.get("model/encoder/r_w_bias" + _CKPT_VALUE)
  if bias is not None:
    found["untie_r"] = len(bias) == 3  # [n_layer, n_head, d_head] if untied
  return found


def recorded_run(model_dir: str) -> Dict[str, object]:
  """The settings of the run model_dir holds: its xlnet_config.json and
  run_options.json, or the newest checkpoint's shapes where the config file
  is missing; {} for a new model_dir."""
  recorded: Dict[str, object] = {}
  for name in ("xlnet_config.json", "run_options.json"):
    path = paths.join(model_dir, name)
    if not paths.isfile(path):
      continue
    data = read_json(path)
    if not isinstance(data, dict):
      raise UserError(f"{path}: not a JSON object; it records the run in "
                      "this --model_dir")
    recorded.update(data)
  if not paths.isfile(paths.join(model_dir, "xlnet_config.json")):
    latest = tf.train.latest_checkpoint(model_dir)
    if latest:
      recorded.update(config_from_checkpoint(latest))
  return recorded


def _shown(key: str, value) -> str:
  if key in ("mem_len", "reuse_len") and value is None:
    value = 0  # runs recorded before RunOptions said 0
  return str(value).lower() if isinstance(value, bool) else str(value)


def check_resume(f, config: xlnet_tf.XLNetConfig,
                 options: xlnet_tf.RunOptions) -> None:
  """Refuses to run in a model_dir that holds another run (see
  `RESUMABLE_CHANGES` for what may differ): one line naming the flag and
  both values, before anything is written there."""
  recorded = recorded_run(f.model_dir)
  ours = [k.name for k in dataclasses.fields(config) if k.name in config.KEYS]
  current = dict(config.to_dict(), **options.to_dict())
  for key in ours + [k.name for k in dataclasses.fields(options)]:
    if key not in recorded or key in RESUMABLE_CHANGES:
      continue
    was, now = _shown(key, recorded[key]), _shown(key, current[key])
    if was != now:
      if key in config.KEYS and config.path:   # a named config or file's
        flag = f"{config.path}: {key}"
      else:
        flag = f"--{key}" if key in f else key
      raise UsageError(
          f"{flag}={now} but model_dir {f.model_dir} holds a run with "
          f"{key}={was} (use another --model_dir, or the same flags to "
          "resume)")


def check_vocab(f, config: xlnet_tf.XLNetConfig) -> None:
  """The model's n_token must cover the vocabulary the records were built
  with (each record-info names it); a smaller one fails mid-run on the
  first larger id."""
  where = (f"--n_token={config.n_token}" if config.path is None else
           f"{config.path}: n_token {config.n_token}")
  for directory in f.record_info_dir.split(","):
    for path in paths.glob(paths.join(
        directory, f"record_info-{f.split}-*.json")):
      vocab = read_record_info(path).get("vocab_size")
      if isinstance(vocab, int) and vocab > config.n_token:
        raise UsageError(f"{where}: smaller than the vocabulary the records "
                         f"were built with ({vocab} pieces, {path})")


def check_spiece(f) -> None:
  """--spiece_model_file must be the model every record-info names (by
  content), so the folder it joins holds the vocabulary of its weights."""
  if not f.spiece_model_file:
    return
  if not paths.isfile(f.spiece_model_file):
    raise UsageError(f"--spiece_model_file={f.spiece_model_file}: no such "
                     "file")
  sha = file_sha256(f.spiece_model_file)
  for directory in f.record_info_dir.split(","):
    for path in paths.glob(paths.join(
        directory, f"record_info-{f.split}-*.json")):
      built = read_record_info(path).get("sp_sha256")
      if built not in (None, sha):
        raise UsageError(f"--spiece_model_file={f.spiece_model_file}: not "
                         f"the SentencePiece model the records were built "
                         f"with ({path})")


def check_paths(f) -> None:
  """Every path flag, before any work or write: one line naming the flag
  for a scheme TensorFlow cannot read or write (it reads the records and
  the init checkpoint and writes model_dir itself: s3:// is refused), a
  store that does not answer or lacks the bucket, or a model_dir that
  cannot be written."""
  directories = f.record_info_dir.split(",")
  for flag, path in [("model_dir", f.model_dir)] + [
      ("record_info_dir", d) for d in directories] + [
          ("init_checkpoint", f.init_checkpoint)]:
    if path:
      tf_path(path, flag)
  for directory in directories:
    check_store(directory, "record_info_dir")
  for flag in ("init_checkpoint", "model_config_path", "spiece_model_file"):
    if f[flag].value:
      check_store(f[flag].value, flag)
  check_writable_dir(f.model_dir, "model_dir")


def model_config(f) -> xlnet_tf.XLNetConfig:
  """The model to pretrain: `--model_config_path` or the --init_checkpoint
  folder's config, with which every model flag given must agree, else the
  model flags (on the original's tiny defaults, said in the first line)."""
  if f.d_embed is not None and f.d_embed != f.d_model:
    raise ConfigError(f"--d_embed ({f.d_embed}) must equal --d_model "
                      f"({f.d_model}): XLNet ties them")
  named = model_folder.resolve(f.init_checkpoint, f.model_config_path, None,
                               need_config=False, need_spiece=False).config
  given = [k for k in xlnet_tf.XLNetConfig.KEYS if f[k].present]
  if named is None:
    config = xlnet_tf.XLNetConfig(**{k: f[k].value
                                     for k in xlnet_tf.XLNetConfig.KEYS})
    if not given:
      logging.warning(
          "training the original's tiny default model (%s); pass "
          "--model_config_path=base or large, or a config file, for a real "
          "size", ", ".join(f"{k} {v}" for k, v in config.to_dict().items()))
    return config
  for key in given:
    if f[key].value != getattr(named, key):
      raise UsageError(f"--{key}={_shown(key, f[key].value)} disagrees with "
                       f"{named.path}: {key} {_shown(key, getattr(named, key))}")
  return named


def _pretrain(f) -> int:
  check_flags(f)
  check_paths(f)
  config = model_config(f)
  options = xlnet_tf.RunOptions(
      dropout=f.dropout, dropatt=f.dropatt, init=f.init,
      init_std=f.init_std, init_range=f.init_range,
      mem_len=f.mem_len, reuse_len=f.reuse_len, attn_type="bi",
      bi_data=f.bi_data, clamp_len=f.clamp_len, same_length=f.same_length,
      use_bfloat16=f.use_bfloat16,
      use_float16=f.use_float16, recompute=f.recompute)
  train_opts = TrainOptions(
      model_dir=f.model_dir, train_steps=f.train_steps,
      learning_rate=f.learning_rate, warmup_steps=f.warmup_steps,
      min_lr_ratio=f.min_lr_ratio, weight_decay=f.weight_decay,
      adam_epsilon=f.adam_epsilon, clip=f.clip, iterations=f.iterations,
      save_steps=f.save_steps, max_save=f.max_save, strategy=f.strategy,
      tpu=f.tpu, init_checkpoint=f.init_checkpoint,
      grad_accum_steps=f.grad_accum_steps, jit_compile=f.jit_compile,
      seed=f.seed)
  train_opts.validate()
  check_resume(f, config, options)  # before anything is written there
  check_original_export(f.model_dir, f.overwrite)
  check_init_checkpoint(train_opts, config=config)
  trainer = Trainer(PretrainTask(config, options, f.seq_len), train_opts,
                    init_fn=load_checkpoint)
  replicas = trainer.strategy.num_replicas_in_sync
  replicas_per_host = replicas // num_workers(trainer.strategy)
  if f.train_batch_size % replicas_per_host:
    raise ConfigError(f"--train_batch_size ({f.train_batch_size}) must be "
                      f"divisible by the {replicas_per_host} replicas per "
                      "host")
  data_cfg = PretrainDataConfig(
      seq_len=f.seq_len, reuse_len=f.reuse_len,
      bsz_per_host=f.train_batch_size, num_core_per_host=replicas_per_host,
      bi_data=f.bi_data, mask_alpha=f.mask_alpha, mask_beta=f.mask_beta,
      num_predict=f.num_predict,
      perm_size=flag_perm_size(f.perm_size, f.reuse_len),
      uncased=f.uncased)
  expected = {k: v for k, v in data_cfg.to_dict().items()
              if k not in ("use_eod", "max_gram", "original_ngram_count")}
  info = load_record_infos(f.record_info_dir, f.split, expected,
                           num_passes=f.num_passes)
  check_record_files(info)  # a bad file: one line now, not mid-training
  check_vocab(f, config)
  check_spiece(f)
  logging.info("%d record files, %d batches per pass over them",
               len(info["filenames"]), info["num_batch"])
  per_replica = f.train_batch_size // replicas_per_host

  def dataset_fn(ctx, skip):
    return pretrain_dataset(info["filenames"], data_cfg, per_replica,
                            num_hosts=ctx.num_input_pipelines,
                            host_id=ctx.input_pipeline_id, seed=f.seed,
                            skip_batches=skip)

  write_run_files(f.model_dir, {"xlnet_config.json": config.to_dict(),
                                "run_options.json": options.to_dict()})
  logs = trainer.train(dataset_fn, per_replica)
  if not trainer.is_chief:
    return 0  # multi-worker: the chief exports
  prefix = export_original(trainer.model, config, f.model_dir,
                           f.spiece_model_file)
  logging.info("final loss %s; original-layout weights: %s (+ "
               "xlnet_config.json)", logs.get("loss"), prefix)
  return 0


def main_cli() -> None:
  """The command line: `python run_pretrain.py`,
  or `xlnet-tf-pretrain` installed."""
  define_flags()
  run_app("run_pretrain", main)


if __name__ == "__main__":
  main_cli()
