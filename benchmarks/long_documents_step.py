"""Worker of `bench_long_documents.py`: one training step of an XLNet
classifier reading a long document one of three ways (a variant), or
(`make_segments_step`, the `--first_step` mode) of a classifier (tiny
by default) reading n segments.

Loaded only by the child process that times the variant, so the driver
stays free of TensorFlow and each variant's peak RSS is its own.

Variants (batch `--batch`, every document full length, no padding: the
cost of a step does not depend on the mask, and a full document is the
case the reading mode exists for):
  segments_4x128_mem128  features of 512 tokens read as 4 segments of 128,
                         each attending to itself plus a memory of 128
                         (`segment_length=128`, `RunOptions(mem_len=128)`);
                         gradients through the last segment only (the
                         default `bptt_segments=1`)
  segments_4x128_bptt4   the same, back-propagating through all 4 segments
                         (not run by default)
  window_512             one window of 512 tokens (today's classifier)
  truncate_128           one window of 128 tokens (the document truncated)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras
import xlnet_tf as xt
from data_utils.tokenization import CLS_ID, SEG_ID_A, SEG_ID_CLS, SEP_ID
from xlnet_tf.training import dense_gradients

import step_tf
from bench_common import SIZES

SOURCE = xt.__file__
# Issue 28's model: 2 layers of d_model 16, the released vocabulary.
TINY = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
            n_token=32000)
VARIANTS = {
    "segments_4x128_mem128": dict(seq=512, segment_length=128, mem_len=128,
                                  bptt_segments=1),
    "segments_4x128_bptt4": dict(seq=512, segment_length=128, mem_len=128,
                                 bptt_segments=4),
    "window_512": dict(seq=512),
    "truncate_128": dict(seq=128),
}


def document_batch(batch: int, seq: int, n_token: int,
                   rng: np.random.Generator):
  """Single-text features of `batch` documents filling all `seq` positions:
  random pieces then `<sep> <cls>` (as `convert_example` lays out a text of
  seq - 2 pieces or more). input_ids / segment_ids `[B, seq]` int32,
  input_mask `[B, seq]` float32 zeros (1 = padding: none)."""
  ids = rng.integers(10, n_token, (batch, seq))
  ids[:, -2:] = [SEP_ID, CLS_ID]
  seg = np.full((batch, seq), SEG_ID_A)
  seg[:, -1] = SEG_ID_CLS
  return {"input_ids": tf.constant(ids, tf.int32),
          "segment_ids": tf.constant(seg, tf.int32),
          "input_mask": tf.zeros([batch, seq], tf.float32)}


def make_step(variant: str, size: str, batch: int, threads: int):
  """A callable running one training step of `variant` (and waiting for
  it): the classifier's loss, dense gradients, clipping to global norm 1
  and the legacy fused Adam, as `Trainer` and `bench_train_step.py` take
  it. Returns `(step, tokens_per_example)`."""
  step_tf.set_threads(threads)
  v = VARIANTS[variant]
  cfg = xt.XLNetConfig(**SIZES[size], ff_activation="gelu", untie_r=True)
  opts = xt.RunOptions(dropout=0.1, dropatt=0.1,
                       mem_len=v.get("mem_len", 0))
  head = {}
  if "segment_length" in v:
    head = dict(segment_length=v["segment_length"],
                bptt_segments=v["bptt_segments"])
  model = xt.XLNetClassifier(xt.XLNetModel(cfg, opts), n_class=2, **head)
  feats = document_batch(batch, v["seq"], cfg.n_token,
                         np.random.default_rng(0))
  return _classifier_step(model, feats, batch, False), v["seq"]


def make_segments_step(size: str, n_segments: int, segment_length: int,
                       mem_len: int, bptt_segments: int, batch: int,
                       threads: int, xla: bool = False):
  """A callable running one training step (as `make_step`) of a classifier
  of `size` ('tiny' or one of `SIZES`; dropout 0.1) reading `n_segments`
  segments of `segment_length` with a memory of `mem_len`, on full-length
  documents `[batch, n_segments * segment_length]`; nothing is traced
  before its first call."""
  step_tf.set_threads(threads)
  cfg = xt.XLNetConfig(**(TINY if size == "tiny" else SIZES[size]),
                       ff_activation="gelu", untie_r=True)
  opts = xt.RunOptions(dropout=0.1, dropatt=0.1, mem_len=mem_len)
  model = xt.XLNetClassifier(xt.XLNetModel(cfg, opts), n_class=2,
                             segment_length=segment_length,
                             bptt_segments=bptt_segments)
  feats = document_batch(batch, n_segments * segment_length, cfg.n_token,
                         np.random.default_rng(0))
  return _classifier_step(model, feats, batch, xla)


def _classifier_step(model, feats, batch: int, xla: bool):
  """One Adam training step of classifier `model` on `feats` (label 0 for
  every document), built as `step_tf.train_step` builds the others."""
  labels = tf.zeros([batch], tf.int32)

  def loss_fn():
    logits = tf.cast(model(feats, training=True)["logits"], tf.float32)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
  model.build(None)
  return step_tf.train_step(loss_fn, model,
                            keras.optimizers.legacy.Adam(1e-5), xla,
                            dense_gradients)
