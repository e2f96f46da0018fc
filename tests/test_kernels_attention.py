"""The attention kernels (`xlnet_tf/kernels/attention.py`, `rows.py`) equal
the reference path (`xlnet_tf/layers/relative_attention.py`): values and
gradients, for one and two streams, with masks, memory, segments,
target_mapping, output rows and per-example positional encodings."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf.encoder import XLNetBlock
from xlnet_tf.kernels import add_head_bias, shift_rows
from xlnet_tf.layers import RelativeAttention
from xlnet_tf.masks import attention_masks, segment_matrix
from xlnet_tf.positions import relative_positional_encoding
from conftest import assert_close

B, L, M, P, D, N, H = 2, 5, 3, 2, 8, 2, 4
RNG = np.random.default_rng(0)


def _t(*shape, scale=1.0):
  return tf.constant(scale * RNG.standard_normal(shape), tf.float32)


H_IN, G_IN, G_ALL, MEMS = _t(B, L, D), _t(B, P, D), _t(B, L, D), _t(B, M, D)
BIASES = (_t(N, H), _t(N, H), _t(N, H), _t(2, N, H))
SEG = segment_matrix(tf.constant([[0, 0, 1, 1, 1], [1, 0, 0, 1, 2]]), M)
PERM = tf.constant(RNG.integers(0, 2, [B, L, L]), tf.float32)
PAD = tf.constant([[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]], tf.float32)
# Example 1 predicts one target only: its second row is padding (zeros).
TARGETS = tf.constant([[[0, 0, 0, 1, 0], [1, 0, 0, 0, 0]],
                       [[0, 1, 0, 0, 0], [0, 0, 0, 0, 0]]], tf.float32)
OUTPUT_POSITIONS = tf.constant([[4, 0], [2, 2]], tf.int32)


def _pair(cls, *args, **kwargs):
  """The same layer on the fast and on the reference path, equal weights."""
  fast = cls(*args, fast_kernels=True, **kwargs)
  ref = cls(*args, fast_kernels=False, **kwargs)
  for layer in (fast, ref):
    layer.build(None)
  for var in fast.weights:
    var.assign(0.3 * RNG.standard_normal(var.shape))
  ref.set_weights(fast.get_weights())
  return fast, ref


def _outputs_and_grads(layer, inputs, run):
  """`run(layer, *inputs)` -> its outputs and the gradients of a weighted sum
  of them w.r.t. the inputs and the layer's weights."""
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    outs = [o for o in tf.nest.flatten(run(layer, *inputs)) if o is not None]
    loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * tf.cos(
        tf.reshape(tf.range(tf.size(o), dtype=tf.float32), o.shape)))
               for o in outs)
  grads = tape.gradient(loss, list(inputs) + layer.trainable_weights)
  return outs, grads


def _assert_paths_equal(fast, ref, inputs, run, atol=1e-5):
  outs_f, grads_f = _outputs_and_grads(fast, inputs, run)
  outs_r, grads_r = _outputs_and_grads(ref, inputs, run)
  assert len(outs_f) == len(outs_r)
  for a, b in zip(outs_f, outs_r):
    assert a.shape == b.shape
    assert_close(tf.cast(a, tf.float32), tf.cast(b, tf.float32), atol=atol,
                 rtol=atol)
  names = [f"input {i}" for i in range(len(inputs))] + [
      v.name for v in fast.trainable_weights]
  for name, a, b in zip(names, grads_f, grads_r):
    if a is None or b is None:
      assert a is None and b is None, name
      continue
    assert_close(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                 atol=10 * atol, rtol=10 * atol, name=name)


CASES = {
    # name: (attn_type, input_mask, perm_mask, memory, segments, stream)
    "bi plain": ("bi", None, None, False, False, None),
    "bi padded segments memory": ("bi", PAD, None, True, True, None),
    "uni memory rows": ("uni", PAD, None, True, True, "rows"),
    "two-stream target_mapping": ("bi", PAD, PERM, True, True, "targets"),
    "two-stream uni all rows": ("uni", None, PERM, False, True, "all"),
    "two-stream targets no mask": ("bi", None, None, False, False,
                                   "targets"),
}


@pytest.mark.parametrize("bi_data", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_relative_attention_fast_equals_reference(case, bi_data):
  attn_type, input_mask, perm_mask, memory, segments, stream = CASES[case]
  mlen = M if memory else 0
  content, query = attention_masks(L, mlen, attn_type, False, input_mask,
                                   perm_mask)
  pos = relative_positional_encoding(L, L + mlen, D, attn_type, 3, bi_data,
                                     B)
  seg_mat = SEG[:, :, M - mlen:] if segments else None
  g = {"targets": G_IN, "all": G_ALL}.get(stream)
  inputs = [H_IN, pos] + [MEMS] * memory + [g] * (g is not None)
  biases = BIASES if segments else BIASES[:2] + (None, None)

  def run(layer, h, pos, *rest):
    rest = list(rest)
    mems = rest.pop(0) if memory else None
    g_in = rest.pop(0) if rest else None
    return layer(h, pos, biases, g=g_in, mems=mems, seg_mat=seg_mat,
                 content_mask=content, query_mask=query,
                 target_mapping=TARGETS if stream == "targets" else None,
                 output_positions=(OUTPUT_POSITIONS if stream == "rows"
                                   else None))
  fast, ref = _pair(RelativeAttention, D, N, H)
  _assert_paths_equal(fast, ref, inputs, run)


@pytest.mark.bfloat16_compute
def test_relative_attention_bfloat16_paths_agree():
  fast, ref = _pair(RelativeAttention, D, N, H, dtype="mixed_bfloat16")
  content, query = attention_masks(L, M, "bi", False, PAD, PERM)
  pos = relative_positional_encoding(L, L + M, D, "bi")

  def run(layer, h, g):
    return layer(h, pos, BIASES, g=g, mems=MEMS, seg_mat=SEG,
                 content_mask=content, query_mask=query,
                 target_mapping=TARGETS)
  _assert_paths_equal(fast, ref, [H_IN, G_IN], run, atol=5e-2)


@pytest.mark.parametrize("two_stream", [False, True])
def test_block_fast_equals_reference(two_stream):
  """The block batches both streams through the shared FFN on the fast path,
  one after the other on the reference path."""
  fast, ref = _pair(XLNetBlock, D, N, H, 16, "gelu")
  content, query = attention_masks(L, 0, "bi", False, PAD, PERM)
  pos = relative_positional_encoding(L, L, D, "bi")

  def run(layer, h, *g):
    return layer(h, pos, BIASES, g=g[0] if g else None, seg_mat=SEG[:, :, M:],
                 content_mask=content, query_mask=query,
                 target_mapping=TARGETS if two_stream else None,
                 training=True)
  _assert_paths_equal(fast, ref, [H_IN] + [G_IN] * two_stream, run)


def test_encoder_fast_equals_reference_pretraining():
  """The whole encoder, two-stream with memory, bi_data and untied biases:
  outputs, memories and every weight's gradient."""
  config = xt.XLNetConfig(n_layer=2, d_model=D, n_head=N, d_head=H,
                          d_inner=16, n_token=30, ff_activation="gelu")
  models = []
  for fast in (True, False):
    options = xt.RunOptions(dropout=0.0, dropatt=0.0, mem_len=3,
                            bi_data=True, clamp_len=4, fast_kernels=fast)
    models.append(xt.XLNetModel(config, options))
  ids = tf.constant(RNG.integers(0, 30, [B, L]), tf.int32)
  models[0](ids)
  models[1](ids)
  for var in models[0].weights:
    var.assign(0.3 * RNG.standard_normal(var.shape))
  models[1].set_weights(models[0].get_weights())
  features = dict(segment_ids=tf.constant([[0, 0, 1, 1, 1]] * B),
                  mems=[MEMS, MEMS], perm_mask=PERM, target_mapping=TARGETS,
                  input_q=tf.reduce_sum(TARGETS, axis=1), training=True)
  _assert_paths_equal(models[0], models[1], [],
                      lambda m: m(ids, **features))


def test_add_head_bias_gradient_equals_autodiff():
  q, bias = _t(B, N, L, H), _t(N, H)
  weights = _t(B, N, L, H)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([q, bias])
    got = add_head_bias(q, bias)
    plain = q + bias[:, None]
    loss, loss_plain = (tf.reduce_sum(t * weights) for t in (got, plain))
  assert_close(got, plain, atol=0)
  for a, b in zip(tape.gradient(loss, [q, bias]),
                  tape.gradient(loss_plain, [q, bias])):
    assert_close(a, b, atol=1e-5)


@pytest.mark.parametrize("clamped", [False, True])
def test_shift_rows_values_and_gradient(clamped):
  """shift_rows reads x[b, n, p, offset + j]; its gather-based gradient equals
  the gradient of the plain gather. Clamped indices (past the last row) get
  zero upstream gradient, as the mask gives them."""
  rng = np.random.default_rng(0)
  b, n, p, rows, klen = 2, 3, 4, 9, 5
  x = tf.constant(rng.standard_normal([b, n, p, rows]), tf.float32)
  offsets = rng.integers(0, rows - klen + 1, [b, p])
  if clamped:
    offsets[0, 1] = rows - 2  # columns 2.. of this row run past the end
  index = np.minimum(offsets[:, None, :, None] + np.arange(klen), rows - 1)
  expected = np.take_along_axis(x.numpy(),
                                np.broadcast_to(index, [b, n, p, klen]), -1)
  weights = rng.standard_normal([b, n, p, klen]).astype(np.float32)
  if clamped:
    weights[0, :, 1, 2:] = 0.0
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    got = shift_rows(x, offsets, klen)
    plain = tf.gather(x, tf.broadcast_to(index, [b, n, p, klen]),
                      batch_dims=3)
    loss, loss_plain = (tf.reduce_sum(t * weights) for t in (got, plain))
  np.testing.assert_array_equal(got.numpy(), expected)
  np.testing.assert_allclose(tape.gradient(loss, x),
                             tape.gradient(loss_plain, x), atol=1e-6)
