"""Adapter: Model Garden's XLNet (`official.nlp.modeling.networks.XLNetBase`)
in a benchmark mode, with the heads and losses its XLNet trainer puts on
it: a dense head on the last token for classification, the LM logits
against the word embedding (plus a bias) for pretraining."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras
import official
from official.nlp.modeling import networks

import step_tf
from bench_common import MODES, SIZES

SOURCE = official.__file__


def _network(size: str, mode: str):
  s, m = SIZES[size], MODES[mode]
  return networks.XLNetBase(
      vocab_size=s["n_token"], num_layers=s["n_layer"],
      hidden_size=s["d_model"], num_attention_heads=s["n_head"],
      head_size=s["d_head"], inner_size=s["d_inner"], dropout_rate=0.1,
      attention_dropout_rate=0.1, attention_type="bi",
      bi_data=mode == "pretrain",
      initializer=keras.initializers.RandomNormal(stddev=0.02),
      two_stream=mode == "pretrain", tie_attention_biases=False,
      memory_length=m.get("mem"), reuse_length=m.get("reuse"),
      inner_activation="gelu")


def _loss(net, inputs: dict, size: str, mode: str, rng):
  """The loss callable of `mode` and the variables it adds to `net`'s
  (completes `inputs` for pretraining)."""
  s, m = SIZES[size], MODES[mode]
  b, l = m["batch"], m["seq"]
  if mode != "pretrain":
    head = keras.layers.Dense(2)
    labels = tf.zeros([b], tf.int32)

    def loss_fn():
      out, _ = net(**inputs, training=True)
      logits = tf.cast(head(out[:, -1]), tf.float32)
      return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=labels, logits=logits))
    return loss_fn, []
  p = m["num_predict"]
  perm_mask, target_mapping = step_tf.permutation(rng)
  inputs.update(state=[tf.zeros([b, m["mem"], s["d_model"]])] * s["n_layer"],
                permutation_mask=perm_mask, target_mapping=target_mapping,
                masked_tokens=tf.zeros([b, l]))
  bias = tf.Variable(tf.zeros([s["n_token"]]))
  targets = inputs["input_ids"][:, :p]

  def loss_fn():
    out, _ = net(**inputs, training=True)
    table = net.get_embedding_lookup_table()
    logits = tf.einsum("bpd,nd->bpn", tf.cast(out, tf.float32),
                       tf.cast(table, tf.float32)) + bias
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=targets, logits=logits))
  return loss_fn, [bias]


def make_step(args, mode: str):
  """A callable running one step of `mode` (and waiting for it)."""
  step_tf.set_threads(args.threads, 1 if args.inter1 else 0)
  rng = np.random.default_rng(0)
  if args.bf16:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:  # the layers keep the policy they were built with
    net = _network(args.size, mode)
    ids, seg, mask = step_tf.inputs(mode, SIZES[args.size]["n_token"], rng)
    inputs = {"input_ids": ids, "segment_ids": seg, "input_mask": 1.0 - mask,
              "state": None, "permutation_mask": None,
              "target_mapping": None, "masked_tokens": None}
    loss_fn, extra = _loss(net, inputs, args.size, mode, rng)
    loss_fn()  # builds
  finally:  # another variant may be built next in this process
    keras.mixed_precision.set_global_policy("float32")
  if not MODES[mode]["train"]:
    return step_tf.compiled(lambda: net(**inputs)[0], args.xla)
  holder = keras.Model()
  holder.net, holder.extra = net, extra
  # As Model Garden's XLNet trainer applies them: the embedding's gradient
  # as IndexedSlices (official/legacy/xlnet/training_utils.py).
  return step_tf.train_step(loss_fn, holder,
                            keras.optimizers.legacy.Adam(1e-5), args.xla)
