"""Positions, rel_shift, masks and absolute attention against small
hand-worked examples."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import masks, positions
from xlnet_tf.layers import AbsoluteAttention


def test_distances_bi_with_memory():
  # qlen 2, mlen 1 -> klen 3: rows from 3 down to -1.
  assert positions.relative_distances(2, 3, "bi").numpy().tolist() == [
      3, 2, 1, 0, -1]


def test_distances_uni_and_clamp():
  assert positions.relative_distances(3, 3, "uni").numpy().tolist() == [
      3, 2, 1, 0]
  assert positions.relative_distances(3, 5, "bi", clamp_len=2).numpy(
  ).tolist() == [2, 2, 2, 2, 1, 0, -1, -2]


def test_unknown_attn_type():
  with pytest.raises(ValueError, match="attn_type"):
    positions.relative_distances(2, 2, "left")


def test_sinusoid_values():
  enc = positions.sinusoid_encoding(tf.constant([1.0, -2.0]), 4).numpy()
  # d_model 4 -> frequencies 1 and 1/100.
  expected = [[np.sin(1), np.sin(0.01), np.cos(1), np.cos(0.01)],
              [np.sin(-2), np.sin(-0.02), np.cos(-2), np.cos(-0.02)]]
  np.testing.assert_allclose(enc, expected, rtol=1e-6)


def test_bi_data_halves():
  enc = positions.relative_positional_encoding(2, 2, 4, "bi", bi_data=True,
                                               batch_size=4).numpy()
  fwd = positions.sinusoid_encoding(tf.constant([2.0, 1.0, 0.0, -1.0]), 4)
  bwd = positions.sinusoid_encoding(tf.constant([-2.0, -1.0, 0.0, 1.0]), 4)
  np.testing.assert_allclose(enc[0], fwd)
  np.testing.assert_allclose(enc[1], fwd)
  np.testing.assert_allclose(enc[2], bwd)
  np.testing.assert_allclose(enc[3], bwd)


def test_rel_shift_with_memory():
  # qlen 2, mlen 1, klen 3, 'bi' rows = distances [3, 2, 1, 0, -1].
  # Score value = 10 * query + row, so we can read which row each key got.
  x = tf.constant([[[10.0 * i + r for r in range(5)] for i in range(2)]])
  shifted = positions.rel_shift(x, klen=3).numpy()[0]
  # query 0 sits at absolute position 1: distances to keys 0,1,2 = 1,0,-1
  # = rows 2,3,4; query 1 (position 2): distances 2,1,0 = rows 1,2,3.
  assert shifted.tolist() == [[2, 3, 4], [11, 12, 13]]


def test_rel_shift_matches_index_formula_on_4d():
  rng = np.random.RandomState(0)
  b, n, i_len, m = 2, 3, 4, 2
  klen = i_len + m
  r_len = klen + i_len
  x = rng.randn(b, n, i_len, r_len).astype(np.float32)
  got = positions.rel_shift(tf.constant(x), klen).numpy()
  want = np.empty((b, n, i_len, klen), np.float32)
  for i in range(i_len):
    for j in range(klen):
      want[:, :, i, j] = x[:, :, i, j + i_len - i]
  np.testing.assert_array_equal(got, want)


def test_bi_padding_mask_content_sees_itself():
  input_mask = tf.constant([[1.0, 0.0, 0.0]])  # first position is padding
  content, query = masks.attention_masks(3, 0, "bi", input_mask=input_mask)
  # only keys are masked: one row, broadcast over queries (as the original)
  assert query.numpy()[0].astype(int).tolist() == [[1, 0, 0]]
  assert content.numpy()[0].astype(int).tolist() == [
      [0, 0, 0], [1, 0, 0], [1, 0, 0]]


def test_bi_without_masks_is_none():
  assert masks.attention_masks(3, 2, "bi") == (None, None)


def test_uni_with_memory_and_padding():
  content, query = masks.attention_masks(
      2, 2, "uni", input_mask=tf.constant([[0.0, 1.0]]))
  # memory columns (2) always visible; key 1 is padding and in the future.
  assert query.numpy()[0].astype(int).tolist() == [[0, 0, 0, 1], [0, 0, 0, 1]]
  assert content.numpy()[0].astype(int).tolist() == [[0, 0, 0, 1],
                                                     [0, 0, 0, 0]]


def test_same_length_counts_keys():
  mask = masks.causal_mask(4, 2, same_length=True).numpy()
  # every query sees exactly mlen + 1 keys, ending at itself
  for i in range(4):
    visible = np.where(mask[i] == 0)[0].tolist()
    assert visible == [i, i + 1, i + 2]


def test_perm_mask_and_memory():
  perm = tf.constant([[[1.0, 1.0], [0.0, 1.0]]])
  content, query = masks.attention_masks(2, 1, "bi", perm_mask=perm)
  assert query.numpy()[0].astype(int).tolist() == [[0, 1, 1], [0, 0, 1]]
  assert content.numpy()[0].astype(int).tolist() == [[0, 0, 1], [0, 0, 0]]


def test_segment_matrix_memory_is_segment_zero():
  mat = masks.segment_matrix(tf.constant([[1, 1, 0]]), mlen=2).numpy()
  differ = mat[0, :, :, 1].astype(int).tolist()
  assert differ == [[1, 1, 0, 0, 1], [1, 1, 0, 0, 1], [0, 0, 1, 1, 0]]
  np.testing.assert_array_equal(mat.sum(-1), 1)


def test_absolute_attention_residual_is_the_value_input():
  layer = AbsoluteAttention(4, 2, 2, residual=True)
  layer.build(None)
  layer.o_kernel.assign(tf.zeros_like(layer.o_kernel))
  v = tf.constant([[[1.0, 2.0, 3.0, 4.0]]])
  out = layer(tf.zeros([1, 1, 4]), v, v).numpy()
  np.testing.assert_allclose(out[0, 0], (v[0, 0] - 2.5) / np.sqrt(1.25),
                             rtol=1e-5)
