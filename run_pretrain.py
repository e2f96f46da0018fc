"""Pretrains XLNet on records from `data_utils.create_pretrain_data`.

    python run_pretrain.py --record_info_dir=proc/tfrecords --model_dir=ckpt \
        --train_batch_size=32 --seq_len=512 --reuse_len=256 --mem_len=384 \
        --perm_size=256 --num_predict=85 --bi_data --n_layer=24 ... \
        --strategy=mirrored

Flags follow the original's `train.py` / `train_gpu.py`. Checkpoints go to
`model_dir` every `save_steps` (a re-run resumes from the newest); at the end
the weights are also written in the original layout
(`model_dir/original/xlnet_model.ckpt` + `xlnet_config.json`), which the
fine-tuning scripts and the original code load.
"""

import os

from absl import app, flags, logging

import xlnet_tf
from data_utils.errors import run_main
from data_utils.pretrain_data import PretrainDataConfig
from data_utils.pretrain_reader import load_record_infos, pretrain_dataset
from xlnet_tf.checkpoint import save_original_checkpoint
from xlnet_tf.cli import define_performance_flags
from xlnet_tf.config import ConfigError
from xlnet_tf.tasks import PretrainTask
from xlnet_tf.training import (TrainOptions, Trainer, split_cpu,
                               write_run_files)

FLAGS = flags.FLAGS

# Data.
flags.DEFINE_string("record_info_dir", None,
                    "Directory (or comma list) with record_info-*.json.")
flags.DEFINE_string("split", "train", "Records' split.")
flags.DEFINE_integer("num_passes", None, "Use only passes < num_passes.")
flags.DEFINE_integer("train_batch_size", 16, "Batch size per host.")
flags.DEFINE_integer("seq_len", None, "Sequence length.")
flags.DEFINE_integer("reuse_len", None, "Tokens reused as memory next step.")
flags.DEFINE_integer("perm_size", 0, "Permutation block size (records').")
flags.DEFINE_bool("bi_data", True, "Records hold reversed streams too.")
flags.DEFINE_integer("mask_alpha", 6, "Records' span context size.")
flags.DEFINE_integer("mask_beta", 1, "Records' tokens per span group.")
flags.DEFINE_integer("num_predict", None, "Predictions per example.")
flags.DEFINE_bool("uncased", False, "Records were lower-cased.")
flags.DEFINE_integer("seed", 0, "File-order shuffling seed.")
# Model.
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
flags.DEFINE_enum("ff_activation", "relu", ["relu", "gelu"], "FFN activation.")
flags.DEFINE_bool("untie_r", False, "Untie attention biases across layers.")
flags.DEFINE_float("dropout", 0.0, "Dropout.")
flags.DEFINE_float("dropatt", 0.0, "Attention dropout.")
# Optimization and loop.
flags.DEFINE_string("model_dir", None, "Checkpoints and summaries.")
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


def _pretrain(f) -> int:
  if f.d_embed is not None and f.d_embed != f.d_model:
    raise ConfigError(f"--d_embed ({f.d_embed}) must equal --d_model "
                      f"({f.d_model}): XLNet ties them")
  config = xlnet_tf.XLNetConfig(
      n_layer=f.n_layer, d_model=f.d_model, n_head=f.n_head,
      d_head=f.d_head, d_inner=f.d_inner, n_token=f.n_token,
      ff_activation=f.ff_activation, untie_r=f.untie_r)
  options = xlnet_tf.RunOptions(
      dropout=f.dropout, dropatt=f.dropatt, init=f.init,
      init_std=f.init_std, init_range=f.init_range,
      mem_len=f.mem_len or None, reuse_len=f.reuse_len, attn_type="bi",
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
      grad_accum_steps=f.grad_accum_steps, jit_compile=f.jit_compile)
  trainer = Trainer(PretrainTask(config, options, f.seq_len), train_opts)
  replicas = trainer.strategy.num_replicas_in_sync
  workers = trainer.strategy.extended._num_workers if hasattr(  # pylint: disable=protected-access
      trainer.strategy.extended, "_num_workers") else 1
  replicas_per_host = replicas // workers
  if f.train_batch_size % replicas_per_host:
    raise ConfigError(f"--train_batch_size ({f.train_batch_size}) must be "
                      f"divisible by the {replicas_per_host} replicas per "
                      "host")
  data_cfg = PretrainDataConfig(
      seq_len=f.seq_len, reuse_len=f.reuse_len,
      bsz_per_host=f.train_batch_size, num_core_per_host=replicas_per_host,
      bi_data=f.bi_data, mask_alpha=f.mask_alpha, mask_beta=f.mask_beta,
      num_predict=f.num_predict, perm_size=f.perm_size or f.reuse_len,
      uncased=f.uncased)
  expected = {k: v for k, v in data_cfg.to_dict().items()
              if k not in ("use_eod", "max_gram", "original_ngram_count")}
  info = load_record_infos(f.record_info_dir, f.split, expected,
                           num_passes=f.num_passes)
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
  # Its own directory: the original layout's `checkpoint` state file must
  # not shadow the training checkpoints'.
  export_dir = os.path.join(f.model_dir, "original")
  prefix = save_original_checkpoint(
      trainer.model, os.path.join(export_dir, "xlnet_model.ckpt"))
  config.to_json(os.path.join(export_dir, "xlnet_config.json"))
  logging.info("final loss %s; original-layout weights: %s (+ "
               "xlnet_config.json)", logs.get("loss"), prefix)
  return 0


if __name__ == "__main__":
  app.run(main)
