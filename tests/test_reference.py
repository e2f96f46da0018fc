"""`XLNetModel` and `SequenceSummary` against an independent NumPy
transcription of the original (time-major, float64) in reference_numpy.py.

The TF side runs in float32, batch-major, on the fast path and on the
reference path (`RunOptions.fast_kernels`); every weight gets random values
through `original_weights()` and the same values go to the reference.
Layouts: API `[B, L, ...]` <-> reference `[L, B, ...]`; perm_mask `[B, L, L]`
<-> `[L, L, B]`; target_mapping `[B, P, L]` <-> `[P, L, B]`.
"""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
import reference_numpy as ref
from conftest import assert_close

N_LAYER, D_MODEL, N_HEAD, D_HEAD, D_INNER, N_TOKEN = 2, 32, 4, 8, 64, 120
B = 4
BOTH_PATHS = pytest.mark.parametrize("fast", [True, False],
                                     ids=["fast", "reference"])


# ----------------------------------------------------------------- helpers


def _config(untie_r=True, ff_activation="gelu"):
  return xt.XLNetConfig(n_layer=N_LAYER, d_model=D_MODEL, n_head=N_HEAD,
                        d_head=D_HEAD, d_inner=D_INNER, n_token=N_TOKEN,
                        ff_activation=ff_activation, untie_r=untie_r)


def _randomize(layer, seed):
  """Assigns random float32 values to every original-named variable of a
  built layer; returns name -> numpy array (the same values)."""
  rng = np.random.default_rng(seed)
  values = {}
  for name, var in sorted(layer.original_weights().items()):
    shape = var.shape.as_list()
    if name.endswith("/gamma"):
      value = 1.0 + 0.1 * rng.standard_normal(shape)
    elif name.endswith("/beta") or name.endswith("/bias"):
      value = 0.1 * rng.standard_normal(shape)
    elif name.endswith("lookup_table") or name.endswith("mask_emb"):
      value = 0.5 * rng.standard_normal(shape)
    else:  # projection kernels, r_*_bias, seg_embed, summary_bias
      value = 0.3 * rng.standard_normal(shape)
    value = value.astype(np.float32)
    var.assign(value)
    values[name] = value
  return values


def _model(fast_kernels, seed=0, untie_r=True, ff_activation="gelu",
           **options):
  """A built `XLNetModel` with random weights, its weights and its options;
  `fast_kernels` picks its path."""
  opts = xt.RunOptions(dropout=0.0, dropatt=0.0, fast_kernels=fast_kernels,
                       **options)
  model = xt.XLNetModel(_config(untie_r, ff_activation), opts)
  model.build(None)
  return model, _randomize(model, seed), opts


def _tm(x):
  """Batch-major `[B, L, ...]` -> time-major `[L, B, ...]` (None passes)."""
  return None if x is None else np.swapaxes(np.asarray(x), 0, 1)


def _reference(w, model, opts, input_ids, segment_ids=None, input_mask=None,
               mems=None, perm_mask=None, target_mapping=None, input_q=None):
  """Runs the reference on batch-major inputs; returns time-major outputs."""
  cfg = model.config
  return ref.transformer_xl(
      w, cfg.n_layer, cfg.n_head, cfg.d_head, cfg.untie_r, cfg.ff_activation,
      inp_k=_tm(input_ids), seg_id=_tm(segment_ids), input_mask=_tm(input_mask),
      mems=mems,
      perm_mask=None if perm_mask is None else perm_mask.transpose(1, 2, 0),
      target_mapping=(None if target_mapping is None
                      else target_mapping.transpose(1, 2, 0)),
      inp_q=_tm(input_q), attn_type=opts.attn_type, bi_data=opts.bi_data,
      clamp_len=opts.clamp_len, same_length=opts.same_length,
      mem_len=opts.mem_len, reuse_len=opts.reuse_len)


def _compare(out, expected_output, expected_mems, what=""):
  """TF outputs (batch-major) vs reference outputs (time-major)."""
  assert_close(out["sequence_output"], _tm(expected_output),
               name=f"{what} sequence_output")
  if expected_mems is None:
    assert out["new_mems"] is None
    return
  assert len(out["new_mems"]) == len(expected_mems)
  for i, (got, want) in enumerate(zip(out["new_mems"], expected_mems)):
    assert_close(got, _tm(want), name=f"{what} new_mems[{i}]")


def _inputs(rng, length, padding=True, segments=True):
  """input_ids `[B, L]` int32, segment_ids `[B, L]` int32 with several
  contiguous segments (ids 0, 1, 2), input_mask `[B, L]` float32 (1 = padding: left
  padding in example 0, right padding in example 2)."""
  input_ids = rng.integers(0, N_TOKEN, [B, length]).astype(np.int32)
  segment_ids = None
  if segments:
    segment_ids = np.sort(rng.integers(0, 3, [B, length]),
                          axis=1).astype(np.int32)
    segment_ids[1] = np.arange(length) % 3  # alternating segments
  input_mask = None
  if padding:
    input_mask = np.zeros([B, length], np.float32)
    input_mask[0, :2] = 1.0
    input_mask[2, -3:] = 1.0
  return input_ids, segment_ids, input_mask


def _permutation_inputs(rng, length, n_predict=4):
  """perm_mask `[B, L, L]`, target_mapping `[B, P, L]`, input_q `[B, L]` as the
  original pretraining pipeline builds them: a random factorization order over
  the targets; a target sees the non-targets and the targets before it (not
  itself, so the diagonal is 1 for targets); a non-target sees the
  non-targets. Examples 1 and 3 predict one fewer target (a zero row in
  target_mapping)."""
  perm_mask = np.zeros([B, length, length], np.float32)
  target_mapping = np.zeros([B, n_predict, length], np.float32)
  input_q = np.zeros([B, length], np.float32)
  for b in range(B):
    n_tgt = n_predict - (b % 2)
    targets = np.sort(rng.choice(length, n_tgt, replace=False))
    is_tgt = np.zeros(length, bool)
    is_tgt[targets] = True
    rank = np.full(length, -1)
    rank[targets] = rng.permutation(n_tgt)
    self_rank = np.where(is_tgt, rank, rank + 1)  # non-targets: 0
    perm_mask[b] = (self_rank[:, None] <= rank[None, :]) & is_tgt[None, :]
    target_mapping[b, np.arange(n_tgt), targets] = 1.0
    input_q[b] = is_tgt
  assert all(perm_mask[b, t, t] == 1 for b in range(B)
             for t in np.nonzero(input_q[b])[0])
  return perm_mask, target_mapping, input_q


# --------------------------------------------------------- single segment


ATTN_MODES = [("bi", False), ("uni", False), ("uni", True)]


@BOTH_PATHS
@pytest.mark.parametrize("attn_type,same_length", ATTN_MODES)
@pytest.mark.parametrize("untie_r", [True, False])
@pytest.mark.parametrize("clamp_len", [-1, 3])
@pytest.mark.parametrize("bi_data", [False, True])
@pytest.mark.parametrize("ff_activation", ["relu", "gelu"])
def test_single_segment(attn_type, same_length, untie_r, clamp_len, bi_data,
                        ff_activation, fast):
  """Padding, several segments, no memory in; mem_len=5 memory out."""
  model, w, opts = _model(fast, seed=1, untie_r=untie_r,
                          ff_activation=ff_activation, attn_type=attn_type,
                          same_length=same_length, clamp_len=clamp_len,
                          bi_data=bi_data, mem_len=5)
  rng = np.random.default_rng(2)
  input_ids, segment_ids, input_mask = _inputs(rng, 8)
  out = model(input_ids, segment_ids=segment_ids, input_mask=input_mask)
  expected, expected_mems = _reference(w, model, opts, input_ids, segment_ids,
                                       input_mask)
  _compare(out, expected, expected_mems)


@BOTH_PATHS
@pytest.mark.parametrize("attn_type", ["bi", "uni"])
@pytest.mark.parametrize("padding,segments", [(False, False), (True, False),
                                              (False, True)])
def test_without_mask_or_segments(attn_type, padding, segments, fast):
  """No input_mask ('bi': no mask at all) and/or no segment_ids (no ef term);
  mem_len None: no new memory."""
  model, w, opts = _model(fast, seed=3, attn_type=attn_type)
  input_ids, segment_ids, input_mask = _inputs(np.random.default_rng(4), 7,
                                           padding, segments)
  out = model(input_ids, segment_ids=segment_ids, input_mask=input_mask)
  expected, expected_mems = _reference(w, model, opts, input_ids, segment_ids,
                                       input_mask)
  assert expected_mems is None
  _compare(out, expected, None)


# ------------------------------------------------- two segments, memory


def _two_segments(model, w, opts, seed, len_1=8, len_2=6, two_stream=False):
  """Segment 1 (no memory) then segment 2 fed segment 1's new_mems, on both
  sides; compares both segments' outputs and memories."""
  rng = np.random.default_rng(seed)
  ids_1, seg_1, mask_1 = _inputs(rng, len_1)
  out_1 = model(ids_1, segment_ids=seg_1, input_mask=mask_1)
  exp_1, mems_1 = _reference(w, model, opts, ids_1, seg_1, mask_1)
  _compare(out_1, exp_1, mems_1, "segment 1")

  ids_2, seg_2, mask_2 = _inputs(rng, len_2)
  extra = {}
  if two_stream:
    perm_mask, target_mapping, input_q = _permutation_inputs(rng, len_2)
    extra = dict(perm_mask=perm_mask, target_mapping=target_mapping,
                 input_q=input_q)
  out_2 = model(ids_2, segment_ids=seg_2, input_mask=mask_2,
                mems=out_1["new_mems"], **extra)
  exp_2, mems_2 = _reference(w, model, opts, ids_2, seg_2, mask_2,
                             mems=mems_1, **extra)
  _compare(out_2, exp_2, mems_2, "segment 2")
  return out_1, out_2


@BOTH_PATHS
@pytest.mark.parametrize("mem_len,reuse_len", [(5, 0), (4, 3)])
@pytest.mark.parametrize("attn_type,same_length", ATTN_MODES)
@pytest.mark.parametrize("untie_r", [True, False])
def test_two_segments_with_memory(mem_len, reuse_len, attn_type, same_length,
                                  untie_r, fast):
  model, w, opts = _model(fast, seed=5, untie_r=untie_r, attn_type=attn_type,
                          same_length=same_length, mem_len=mem_len,
                          reuse_len=reuse_len, clamp_len=3 if untie_r else -1)
  out_1, out_2 = _two_segments(model, w, opts, seed=6)
  # Segment 1 starts from nothing: reuse_len (or all 8) positions, capped.
  assert out_1["new_mems"][0].shape == (B, min(mem_len, reuse_len or 8),
                                        D_MODEL)
  assert out_2["new_mems"][0].shape == (B, mem_len, D_MODEL)


@BOTH_PATHS
@pytest.mark.parametrize("bi_data", [False, True])
def test_uni_same_length_tied_biases_two_segments(bi_data, fast):
  """The case the maintainers check explicitly: 'uni' + same_length + tied
  [N, H] biases, over two segments with memory."""
  model, w, opts = _model(fast, seed=7, untie_r=False, ff_activation="relu",
                          attn_type="uni", same_length=True, mem_len=5,
                          bi_data=bi_data)
  assert w["model/transformer/r_w_bias"].shape == (N_HEAD, D_HEAD)
  _two_segments(model, w, opts, seed=8)


# ------------------------------------------------------------ two-stream


@BOTH_PATHS
@pytest.mark.parametrize("attn_type,same_length", ATTN_MODES)
@pytest.mark.parametrize("bi_data", [False, True])
@pytest.mark.parametrize("untie_r", [True, False])
def test_two_stream_with_target_mapping_and_memory(attn_type, same_length,
                                                   bi_data, untie_r, fast):
  """Segment 2 is two-stream (perm_mask + target_mapping + input_q) over
  segment 1's memory; the output is the query stream `[B, P, D]`."""
  model, w, opts = _model(fast, seed=9, untie_r=untie_r, attn_type=attn_type,
                          same_length=same_length, bi_data=bi_data,
                          mem_len=5, reuse_len=4)
  _, out_2 = _two_segments(model, w, opts, seed=10, two_stream=True)
  assert out_2["sequence_output"].shape == (B, 4, D_MODEL)


@BOTH_PATHS
@pytest.mark.parametrize("attn_type", ["bi", "uni"])
@pytest.mark.parametrize("with_perm_mask", [True, False])
@pytest.mark.parametrize("with_memory", [True, False])
def test_two_stream_without_target_mapping(attn_type, with_perm_mask,
                                           with_memory, fast):
  """input_q alone: the query stream starts as `input_q * mask_emb + (1 -
  input_q) * emb` and the output is `[B, L, D]`."""
  model, w, opts = _model(fast, seed=11, attn_type=attn_type, mem_len=4)
  rng = np.random.default_rng(12)
  mems_tf = mems_ref = None
  if with_memory:
    ids, seg, mask = _inputs(rng, 5)
    mems_tf = model(ids, segment_ids=seg, input_mask=mask)["new_mems"]
    _, mems_ref = _reference(w, model, opts, ids, seg, mask)
  ids, seg, mask = _inputs(rng, 7)
  perm_mask, _, input_q = _permutation_inputs(rng, 7)
  if not with_perm_mask:
    perm_mask = None
  out = model(ids, segment_ids=seg, input_mask=mask, mems=mems_tf,
              perm_mask=perm_mask, input_q=input_q)
  expected, expected_mems = _reference(w, model, opts, ids, seg, mask,
                                       mems=mems_ref, perm_mask=perm_mask,
                                       input_q=input_q)
  assert out["sequence_output"].shape == (B, 7, D_MODEL)
  _compare(out, expected, expected_mems)


@BOTH_PATHS
@pytest.mark.parametrize("attn_type,same_length", ATTN_MODES)
@pytest.mark.parametrize("bi_data", [False, True])
def test_output_positions_are_rows_of_the_full_output(attn_type, same_length,
                                                      bi_data, fast):
  """`output_positions` (the last layer computed at a few positions only) gives
  exactly those rows of the reference's full output, over memory, padding,
  segments and both attention types; the memories are unchanged."""
  model, w, opts = _model(fast, seed=17, attn_type=attn_type,
                          same_length=same_length, bi_data=bi_data,
                          mem_len=4, clamp_len=3)
  rng = np.random.default_rng(18)
  ids, seg, mask = _inputs(rng, 5)
  mems_tf = model(ids, segment_ids=seg, input_mask=mask)["new_mems"]
  _, mems_ref = _reference(w, model, opts, ids, seg, mask)
  ids, seg, mask = _inputs(rng, 7)
  output_positions = np.array([[6, 0], [2, 6], [3, 3], [0, 5]], np.int32)
  out = model(ids, segment_ids=seg, input_mask=mask, mems=mems_tf,
              output_positions=output_positions)
  expected, expected_mems = _reference(w, model, opts, ids, seg, mask,
                                       mems=mems_ref)
  expected_bm = _tm(expected)
  assert out["sequence_output"].shape == (B, 2, D_MODEL)
  assert_close(out["sequence_output"],
               np.take_along_axis(expected_bm, output_positions[:, :, None],
                                  axis=1),
               name="rows")
  for got, exp in zip(out["new_mems"], expected_mems):
    assert_close(got, _tm(exp), name="mems")


# --------------------------------------------------------------- summary


@pytest.mark.parametrize("summary_type", ["last", "first", "mean", "attn"])
@pytest.mark.parametrize("use_proj", [True, False])
@pytest.mark.parametrize("padded", [True, False])
def test_sequence_summary(summary_type, use_proj, padded):
  summary = xt.SequenceSummary(
      _config(), summary_type, use_summ_proj=use_proj,
      options=xt.RunOptions(dropout=0.0, dropatt=0.0))
  summary.build(None)
  w = _randomize(summary, seed=13)
  rng = np.random.default_rng(14)
  hidden = rng.standard_normal([B, 8, D_MODEL]).astype(np.float32)
  input_mask = None
  if padded:
    input_mask = np.zeros([B, 8], np.float32)
    input_mask[0, :3] = 1.0
    input_mask[2, -2:] = 1.0
  got = summary(hidden, input_mask=input_mask)
  expected = ref.summarize_sequence(w, summary_type, _tm(hidden),
                                    _tm(input_mask), N_HEAD, D_HEAD, use_proj)
  assert got.shape == (B, D_MODEL)
  assert_close(got, expected, name=summary_type)


def test_summary_attn_ignores_padding():
  """With 'attn', changing padded positions does not change the summary."""
  summary = xt.SequenceSummary(_config(), "attn", use_summ_proj=True,
                               options=xt.RunOptions(dropout=0.0, dropatt=0.0))
  summary.build(None)
  w = _randomize(summary, seed=15)
  rng = np.random.default_rng(16)
  hidden = rng.standard_normal([B, 6, D_MODEL]).astype(np.float32)
  input_mask = np.zeros([B, 6], np.float32)
  input_mask[:, :2] = 1.0
  changed = hidden.copy()
  changed[:, :2] += 5.0
  got = summary(changed, input_mask=input_mask)
  assert_close(got, summary(hidden, input_mask=input_mask))
  assert_close(got, ref.summarize_sequence(w, "attn", _tm(changed),
                                           _tm(input_mask), N_HEAD, D_HEAD))


@pytest.mark.parametrize("summary_type", ["last", "first"])
def test_pooled_model_computes_only_the_summarized_row(summary_type):
  """A classifier whose summary reads one position runs its last layer at
  that position only; its logits equal the summary of the full output."""
  model = xt.XLNetClassifier(xt.XLNetModel(_config(), xt.RunOptions(dropout=0.0,
                                                      dropatt=0.0)),
                             n_class=3, summary_type=summary_type)
  model.build(None)
  _randomize(model, seed=19)
  rng = np.random.default_rng(20)
  ids, seg, mask = _inputs(rng, 9)
  features = {"input_ids": ids, "segment_ids": seg, "input_mask": mask}
  full = model.encode(features)
  assert full.shape == (B, 9, D_MODEL)
  expected = model.logit(model.summary(full, input_mask=mask))
  assert_close(model(features)["logits"], expected, name=summary_type)
