"""The segments before the last `bptt_segments` are read in ONE graph loop
(issue 28): the traced training step is the same graph for 4 and for 64
segments, and inside `tf.function` (with and without XLA, 16-bit compute
too) its outputs and gradients equal encoder calls written out one per
segment; each segment draws a dropout seed of its own."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf import seeds
from xlnet_tf.tasks import classification_loss
from conftest import assert_close, shared_weights

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
S, M, B = 4, 6, 3
RNG = np.random.RandomState(28)
LABELS = tf.constant([0, 2, 1])
_WEIGHTS = {}


def _features(n):
  """`[B, n * S]`, LEFT padded: row 0 full, row 1 over its first segment and
  a half, row 2 over all but its last segment and a half (leading empty
  segments inside the loop)."""
  ids = RNG.randint(5, 50, [B, n * S]).astype(np.int32)
  pad = np.zeros([B, n * S], np.float32)
  pad[1, :S + 2] = 1.0
  pad[2, :(n - 2) * S + 2] = 1.0
  segs = np.where(pad > 0, 4, RNG.randint(0, 2, [B, n * S])).astype(np.int32)
  segs[:, -1] = 2
  return {"input_ids": ids, "segment_ids": segs, "input_mask": pad}


def _classifier(n_bptt=1, **options):
  options = {"dropout": 0.0, "dropatt": 0.0, "mem_len": M, **options}
  model = xt.XLNetClassifier(xt.XLNetModel(CONFIG, xt.RunOptions(**options)),
                             n_class=3, segment_length=S,
                             bptt_segments=n_bptt)
  return shared_weights(model, _WEIGHTS, RNG)


def _loss_and_grads(model, logits_of):
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(classification_loss(logits_of(), LABELS))
  grads = tape.gradient(loss, model.trainable_variables)
  return loss, [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(grads, model.trainable_variables)]


def _step(model, jit_compile=False):
  """The training step's loss and dense gradients, as one tf.function."""
  return tf.function(lambda f: _loss_and_grads(
      model, lambda: model(f, training=True)["logits"]),
                     jit_compile=jit_compile)


def _written_out(model, features, n_bptt):
  """Eager encoder calls, one per segment: the memory starts as zeros, all
  hidden; its mask is the tail of (mask, segment padding); segment i's
  memory is differentiable iff i >= n - n_bptt; the head reads the last
  segment's last row."""
  n = features["input_ids"].shape[1] // S
  mems = [tf.zeros([B, M, CONFIG.d_model])] * CONFIG.n_layer
  mems_mask = tf.ones([B, M])
  for i in range(n):
    cut = {k: v[:, i * S:(i + 1) * S] for k, v in features.items()}
    out = model.encoder(cut["input_ids"], segment_ids=cut["segment_ids"],
                        input_mask=cut["input_mask"], mems=mems,
                        mems_mask=mems_mask, training=True,
                        memory_gradient=i >= n - n_bptt)
    mems = out["new_mems"]
    mems_mask = tf.concat([mems_mask, cut["input_mask"]], 1)[:, -M:]
  return model.logit(model.summary(out["sequence_output"][:, -1:]))


def _graph_nodes(concrete):
  """Nodes of a traced function: its graph plus every function it calls
  (a loop body among them)."""
  graph = concrete.graph.as_graph_def()
  return len(graph.node) + sum(len(f.node_def)
                               for f in graph.library.function)


def test_traced_step_does_not_grow_with_segments():
  model = _classifier(n_bptt=2)
  sizes, loops = {}, {}
  for n in (4, 64):
    features = {k: tf.constant(v) for k, v in _features(n).items()}
    concrete = _step(model).get_concrete_function(features)
    sizes[n] = _graph_nodes(concrete)
    loops[n] = [op.type for op in concrete.graph.get_operations()
                if "While" in op.type]
  assert sizes[4] == sizes[64]
  assert loops == {4: ["While"], 64: ["While"]}


@pytest.mark.parametrize("n,n_bptt,jit_compile", [
    (5, 2, False), (5, 1, True), (3, 3, False)])
def test_graph_loop_equals_segments_written_out(n, n_bptt, jit_compile):
  features = _features(n)
  model = _classifier(n_bptt)
  loss, grads = _step(model, jit_compile)(
      {k: tf.constant(v) for k, v in features.items()})
  want_loss, want_grads = _loss_and_grads(
      model, lambda: _written_out(model, features, n_bptt))
  assert_close(loss, want_loss)
  for g, w, v in zip(grads, want_grads, model.trainable_variables):
    assert_close(g, w, atol=1e-5, rtol=1e-4, name=v.name)


@pytest.mark.parametrize("flag,dtype,atol", [
    pytest.param("use_bfloat16", tf.bfloat16, 5e-2, marks=pytest.mark.bfloat16_compute),
    ("use_float16", tf.float16, 5e-3)])
def test_sixteen_bit_memory_loops_in_the_compute_dtype(flag, dtype, atol):
  """The loop carries the memory (n_layer `[B, M, D]`) in the compute dtype;
  traced, the model stays within 16-bit rounding of float32 written out."""
  features = _features(6)
  mixed = _classifier(**{flag: True})
  run = tf.function(lambda f: mixed(f)["logits"])
  tensors = {k: tf.constant(v) for k, v in features.items()}
  loop = [op for op in run.get_concrete_function(tensors).graph
          .get_operations() if op.type == "While"]
  assert len(loop) == 1
  carried = [t.shape.as_list() for t in loop[0].outputs if t.dtype == dtype]
  assert carried == [[None, M, CONFIG.d_model]] * CONFIG.n_layer  # any B
  full = _classifier()
  assert_close(run(tensors), _written_out(full, features, 1), atol=atol,
               rtol=0)


def test_each_segment_in_the_loop_draws_its_dropout_seed():
  """Under a training step's seed (`seeds.dropout_seeds`, as the Trainer
  opens it) every segment the loop reads draws a seed of its own, in order:
  the step's dropout is a function of that seed alone."""
  model = _classifier(dropout=0.3, dropatt=0.3)
  draws = tf.Variable(0)

  @tf.function
  def step(features, seed):
    with seeds.dropout_seeds(seed, draws):
      logits = model(features, training=True)["logits"]
      return tf.reduce_sum(classification_loss(logits, LABELS))
  counts, losses = {}, {}
  for n in (3, 7):
    features = {k: tf.constant(v) for k, v in _features(n).items()}
    losses[n] = [float(step(features, tf.constant(s)))
                 for s in ([1, 2], [1, 2], [1, 3])]
    counts[n] = int(draws.numpy())
  assert counts[7] - counts[3] == 4  # one per segment, loop included
  for n in (3, 7):
    assert losses[n][0] == losses[n][1] != losses[n][2]
