"""Adapter: this project's XLNet (`xlnet_tf`) in a benchmark mode.

Loaded only by the measuring child process, so the `xlnet_tf` it times is
the first on that process's import path: `bench_old_vs_new.py` points it at
a worktree of an older commit. Older trees are served too: before issue 17
task models built their own encoder (`XLNetClassifier(config, options,
...)`) and the pretraining features named the ids `input_k` / `seg_id`.
"""

from __future__ import annotations

import inspect

import numpy as np
import tensorflow as tf
import tf_keras as keras
import xlnet_tf as xt
from xlnet_tf.training import dense_gradients

import step_tf
from bench_common import MODES, SIZES

SOURCE = xt.__file__


def task_model(cls, config, options, **kwargs):
  """A `cls` task model on a fresh encoder, built the way this tree's
  `cls` takes it: the encoder handed in as `network`, or (older trees) the
  config and options it builds the encoder from."""
  if "network" in inspect.signature(cls.__init__).parameters:
    return cls(xt.XLNetModel(config, options), **kwargs)
  return cls(config, options, **kwargs)


def make_step(args, mode: str):
  """A callable running one step of `mode` (and waiting for it)."""
  step_tf.set_threads(args.threads, 1 if args.inter1 else 0)
  rng = np.random.default_rng(0)
  m = MODES[mode]
  cfg = xt.XLNetConfig(**SIZES[args.size], ff_activation="gelu",
                       untie_r=True)
  opts = xt.RunOptions(dropout=0.1, dropatt=0.1, use_bfloat16=args.bf16,
                       recompute=args.recompute)
  ids, seg, mask = step_tf.inputs(mode, cfg.n_token, rng)
  if mode == "pretrain":
    opts = opts.replace(mem_len=m["mem"], reuse_len=m["reuse"], bi_data=True)
    model = task_model(xt.XLNetPretrainer, cfg, opts)
    b, p = m["batch"], m["num_predict"]
    perm_mask, target_mapping = step_tf.permutation(rng)
    feats = {"input_ids": ids, "segment_ids": seg,
             "input_k": ids, "seg_id": seg,  # the names of older trees
             "perm_mask": perm_mask, "target_mapping": target_mapping,
             "input_q": tf.zeros([b, m["seq"]]), "target": ids[:, :p],
             "target_mask": tf.ones([b, p])}
    mems = [tf.zeros([b, m["mem"], cfg.d_model])] * cfg.n_layer

    def loss_fn():
      return model(feats, mems=mems, training=True)["loss"]
  else:
    model = task_model(xt.XLNetClassifier, cfg, opts, n_class=2)
    feats = {"input_ids": ids, "segment_ids": seg, "input_mask": mask}
    labels = tf.zeros([m["batch"]], tf.int32)

    def loss_fn():
      logits = tf.cast(model(feats, training=True)["logits"], tf.float32)
      return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=labels, logits=logits))
  model.build(None)
  if not m["train"]:
    return step_tf.compiled(lambda: model(feats)["logits"], args.xla)
  # As `Trainer` applies them: dense, so the embedding takes Adam's fused
  # dense kernel. `xla` compiles the forward/backward pass only, as the
  # Trainer's `jit_compile` does; `xla_all` the clipping and update too.
  return step_tf.train_step(loss_fn, model, keras.optimizers.legacy.Adam(1e-5),
                            args.xla or args.xla_all, dense_gradients,
                            xla_update=args.xla_all)
