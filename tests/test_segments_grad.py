"""Gradients of the segment recurrence (`PooledTaskModel(segment_length=S,
bptt_segments=k)`): the memory is a stop-gradient except what the last k
segments produce, equal to encoder calls written out by hand with
`memory_gradient` set per segment; recomputation and compilation change
nothing; 16-bit compute keeps the memory in the compute dtype."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf.tasks import classification_loss
from conftest import assert_close, shared_weights

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
S, M, B = 4, 6, 2
RNG = np.random.RandomState(7)
LABELS = tf.constant([0, 2])
_WEIGHTS = {}


def _features(n):
  """`[B, n * S]`: ids 5..24 before the last segment, 25..49 in it (so the
  embedding rows of the earlier segments are told apart); row 1 LEFT padded
  over the first segment and a half."""
  ids = np.concatenate([RNG.randint(5, 25, [B, (n - 1) * S]),
                        RNG.randint(25, 50, [B, S])], 1).astype(np.int32)
  pad = np.zeros([B, n * S], np.float32)
  pad[1, :S + 2] = 1.0
  segs = np.where(pad > 0, 4, 0).astype(np.int32)
  segs[:, -1] = 2
  return {"input_ids": ids, "segment_ids": segs, "input_mask": pad}


def _classifier(**options_and_head):
  head = {k: options_and_head.pop(k) for k in ("segment_length",
                                               "bptt_segments")
          if k in options_and_head}
  options = {"dropout": 0.0, "dropatt": 0.0, "mem_len": M, **options_and_head}
  model = xt.XLNetClassifier(xt.XLNetModel(CONFIG, xt.RunOptions(**options)),
                             n_class=3, **head)
  return shared_weights(model, _WEIGHTS, RNG)


def _grads(model, logits_of, training=False):
  """Summed loss and dense gradients of every trainable variable."""
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(classification_loss(logits_of(training), LABELS))
  grads = tape.gradient(loss, model.trainable_variables)
  return float(loss), [np.zeros(v.shape, np.float32) if g is None
                       else tf.convert_to_tensor(g).numpy()
                       for g, v in zip(grads, model.trainable_variables)]


def _unrolled_logits(model, features, memory_gradients):
  """The recurrence written out: one encoder call per segment, the memory
  starting as zeros with every position hidden, its mask the tail of
  (old mask, segment padding), `memory_gradients[i]` for segment i's
  memory; the head on the last segment's last position (<cls>)."""
  encoder = model.encoder
  mems = [tf.zeros([B, M, CONFIG.d_model])] * CONFIG.n_layer
  mems_mask = np.ones([B, M], np.float32)
  cuts = [slice(i * S, (i + 1) * S) for i in range(len(memory_gradients) + 1)]
  for cut, keep in zip(cuts[:-1], memory_gradients):
    out = encoder(features["input_ids"][:, cut],
                  segment_ids=features["segment_ids"][:, cut],
                  input_mask=features["input_mask"][:, cut], mems=mems,
                  mems_mask=mems_mask, memory_gradient=keep)
    mems = out["new_mems"]
    mems_mask = np.concatenate([mems_mask, features["input_mask"][:, cut]],
                               1)[:, -M:]
  last = encoder(features["input_ids"][:, cuts[-1]],
                 segment_ids=features["segment_ids"][:, cuts[-1]],
                 input_mask=features["input_mask"][:, cuts[-1]], mems=mems,
                 mems_mask=mems_mask)
  return model.logit(model.summary(last["sequence_output"][:, -1:]))


def _assert_same_grads(got, want):
  assert_close(got[0], want[0])
  for g, w in zip(got[1], want[1]):
    assert_close(g, w, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("n,k,memory_gradients", [
    (2, 1, [False]), (2, 2, [True]), (3, 2, [False, True]),
    (3, 3, [True, True])])
def test_bptt_gradients_equal_hand_unrolled_segments(n, k, memory_gradients):
  features = _features(n)
  model = _classifier(segment_length=S, bptt_segments=k)
  got = _grads(model, lambda t: model(features, training=t)["logits"])
  want = _grads(model, lambda t: _unrolled_logits(model, features,
                                                  memory_gradients))
  _assert_same_grads(got, want)


def test_bptt_segments_1_is_the_default_and_stops_earlier_segments():
  features = _features(2)
  default = _classifier(segment_length=S)
  one = _classifier(segment_length=S, bptt_segments=1)
  two = _classifier(segment_length=S, bptt_segments=2)
  run = lambda m: _grads(m, lambda t: m(features, training=t)["logits"])
  default_grads, one_grads, two_grads = run(default), run(one), run(two)
  for g, w in zip(one_grads[1], default_grads[1]):
    np.testing.assert_array_equal(g, w)
  # Embedding rows of ids only the first segment holds (5..24).
  table = [v.name for v in default.trainable_variables].index(
      default.encoder.word_embedding.name)
  early = sorted(set(features["input_ids"][:, :S][
      features["input_mask"][:, :S] == 0].tolist()))
  assert early and max(early) < 25
  assert np.all(one_grads[1][table][5:25] == 0.0)
  assert np.all(np.abs(two_grads[1][table][early]).sum(axis=1) > 0)
  assert one_grads[0] == two_grads[0]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_recompute_and_compiled_keep_bptt_gradients(fast):
  features = _features(3)
  plain = _classifier(segment_length=S, bptt_segments=2, fast_kernels=fast)
  recomputed = _classifier(segment_length=S, bptt_segments=2, recompute=True,
                           fast_kernels=fast)
  want = _grads(plain, lambda t: plain(features, training=t)["logits"], True)
  got = _grads(recomputed,
               lambda t: recomputed(features, training=t)["logits"], True)
  _assert_same_grads(got, want)
  early = [v.name for v in plain.trainable_variables].index(
      plain.encoder.word_embedding.name)
  assert np.abs(got[1][early][5:25]).sum() > 0
  if not fast:
    return  # compiling once is enough (and takes most of this test's time)
  step = tf.function(lambda: _grads_graph(recomputed, features))
  loss, grads = step()
  _assert_same_grads((float(loss), [g.numpy() for g in grads]), got)


def _grads_graph(model, features):
  """`_grads` inside a tf.function (tensors, no NumPy)."""
  with tf.GradientTape() as tape:
    logits = model(features, training=True)["logits"]
    loss = tf.reduce_sum(classification_loss(logits, LABELS))
  grads = tape.gradient(loss, model.trainable_variables)
  return loss, [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(grads, model.trainable_variables)]


@pytest.mark.parametrize("flag,dtype,atol", [
    pytest.param("use_bfloat16", tf.bfloat16, 5e-2, marks=pytest.mark.bfloat16_compute),
    ("use_float16", tf.float16, 5e-3)])
def test_sixteen_bit_memory_in_compute_dtype(flag, dtype, atol):
  features = _features(3)
  full = _classifier(segment_length=S)
  mixed = _classifier(segment_length=S, bptt_segments=2, **{flag: True})
  mems, mems_mask = mixed.initial_memory(B)
  assert {m.dtype for m in mems} == {dtype}
  assert mems_mask.dtype == tf.float32
  segment = {k: v[:, :S] for k, v in features.items()}
  out, new_mems, new_mask = mixed.read_segment(segment, mems, mems_mask,
                                               memory_gradient=True)
  assert {m.dtype for m in new_mems} == {dtype}
  assert [m.shape for m in new_mems] == [(B, M, 16)] * 2
  assert new_mask.numpy().tolist() == [[1, 1, 0, 0, 0, 0], [1] * 6]
  assert out["logits"].dtype == tf.float32
  assert_close(mixed(features)["logits"], full(features)["logits"],
               atol=atol, rtol=0)
  grads = _grads(mixed, lambda t: mixed(features, training=t)["logits"])[1]
  assert all(np.all(np.isfinite(g)) for g in grads)
