"""A long text's first window may be partial (`embeddings._segments`):
windows aligned from the right, the first holding T - (N - 1) * S
positions. Its states and poolings equal those of today's layout (whole
windows, the padding in the first), alone or batched with shorter and
longer texts; for T = N * S the windows are those of the reference loop;
and the batch kind pads to the longest row only for an export whose meta
says `partial_first_window` (`embed_length`, `LanguageModelBatch._embed`).

Shapes: features `[B, T]` LEFT padded (`window_features`, input_mask 1 =
padding); states `[B, K, T, D]`; pooled `[B, K, D]`. Tolerance: atol 1e-5
(float32, a tiny model with weights far from the initializer's)."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from batch_cases import varied_lm
from conftest import assert_close
from data_utils.lm.embedding_files import window_features
from xlnet_tf.masks import memory_mask
from xlnet_tf.tasks.batch import Padding
from xlnet_tf.tasks.language_model.batch import (LanguageModelBatch,
                                                 embed_length)
from xlnet_tf.tasks.language_model.embeddings import (SIGNATURE_POOLINGS,
                                                      encode_layers,
                                                      pool_states)

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000)
S = 8  # the window
LAYERS = [0, 1, 2]
FEATURES = ("input_ids", "segment_ids", "input_mask")


def _text(n, seed):
  return [int(x) for x in np.random.RandomState(seed).randint(10, 900, n)]


# Pieces (+ 2 markers): 19 -> 21 positions, 3 windows, r = 5; 5 -> 7, one
# window; 11 -> 13, 2 windows; 28 -> 30, 4 windows; 14 -> 16 = 2 * S.
LONG, SHORT, TWO, LONGER, EXACT = (_text(19, 1), _text(5, 2), _text(11, 3),
                                   _text(28, 4), _text(14, 5))


@pytest.fixture(scope="module")
def lm():
  return varied_lm(CONFIG)


@pytest.fixture(scope="module", params=[S, 5])
def embed(lm, request):
  """Features -> (states, pooled) through `encode_layers` with a memory of
  S or of 5 (< S: the memory holds part of a window), the graph the
  export's `embed_ids` runs (layers a run-time tensor)."""
  mem_len = request.param
  spec = [tf.TensorSpec([None, None], tf.int32)] * 2 + [
      tf.TensorSpec([None, None], tf.float32),
      tf.TensorSpec([None], tf.int32)]

  @tf.function(input_signature=spec, autograph=False)
  def run(input_ids, segment_ids, input_mask, layers):
    states = encode_layers(lm.encoder, input_ids, segment_ids, input_mask,
                           layers, S, mem_len)
    return dict(pool_states(states, input_mask, SIGNATURE_POOLINGS, S),
                states=states)

  def call(id_lists, length):
    f = window_features(id_lists, length)
    out = run(*(tf.constant(f[k]) for k in FEATURES), tf.constant(LAYERS))
    return {k: v.numpy() for k, v in out.items()}
  call.mem_len = mem_len
  return call


def _row(out, b, n):
  """Text b's (states `[K, n + 2, D]` of its pieces and markers, pooled)."""
  return (out["states"][b, :, -n - 2:],
          {k: out[k][b] for k in SIGNATURE_POOLINGS})


def _assert_same(got, want, what):
  assert got[0].shape == want[0].shape, what
  assert_close(got[0], want[0], atol=1e-5, rtol=0, name=f"{what} states")
  for name in SIGNATURE_POOLINGS:
    assert_close(got[1][name], want[1][name], atol=1e-5, rtol=0,
                 name=f"{what} {name}")


def test_partial_first_window_equals_whole_windows(embed):
  n = len(LONG)
  whole = embed([LONG], 3 * S)  # today's layout: 3 padding positions
  tight = embed([LONG], n + 2)  # first window of 5, no padding
  assert tight["states"].shape == (1, 3, n + 2, 16)
  _assert_same(_row(tight, 0, n), _row(whole, 0, n), "alone")


def test_batched_with_shorter_and_longer_texts(embed):
  texts = [SHORT, TWO, LONG, LONGER, EXACT]
  alone = [_row(embed([t], -(-(len(t) + 2) // S) * S), 0, len(t))
           for t in texts]
  # Same window count as LONG (a partial first window of 5), fewer, more.
  for batch in ([LONG, SHORT], [LONG, TWO], [LONG, LONGER],
                [SHORT, TWO, LONG, LONGER, EXACT]):
    length = max(len(t) for t in batch) + 2
    for layout in (length, -(-length // S) * S):  # tight, whole windows
      out = embed(batch, layout)
      for b, t in enumerate(batch):
        _assert_same(_row(out, b, len(t)), alone[texts.index(t)],
                     f"{len(t)} pieces in a batch of {layout}")


def _reference(lm, id_lists, length, mem_len):
  """Today's reading of T = N * S, eager: N whole windows in order, the
  first with an all-masked memory of `mem_len`."""
  f = window_features(id_lists, length)
  mems = [tf.zeros([len(id_lists), mem_len, CONFIG.d_model])
          for _ in range(CONFIG.n_layer)]
  mems_mask = tf.ones([len(id_lists), mem_len])
  states = []
  for start in range(0, length, S):
    ids, segs, mask = (tf.constant(f[k][:, start:start + S])
                       for k in FEATURES)
    out = lm.encoder(ids, segment_ids=segs, input_mask=mask, mems=mems,
                     mems_mask=mems_mask, mem_len=mem_len, reuse_len=0,
                     return_hidden_states=True)
    states.append(np.stack([out["hidden_states"][k].numpy()
                            for k in LAYERS], axis=1))
    mems, mems_mask = out["new_mems"], memory_mask(mems_mask, mask, mem_len)
  return np.concatenate(states, axis=2)


def test_whole_windows_are_todays_windows(lm, embed):
  # EXACT: 16 = 2 * S positions, no padding; LONG/SHORT in 24 = 3 * S.
  for batch, length in (([EXACT], 2 * S), ([LONG, SHORT], 3 * S)):
    got = embed(batch, length)["states"]
    assert_close(got, _reference(lm, batch, length, embed.mem_len),
                 atol=1e-5, rtol=0)


def test_embed_length():
  # One window: the longest row, or the window for `mean`.
  assert embed_length([3, 5], S, False) == 7
  assert embed_length([3, 5], S, True) == S
  assert embed_length([3, 5], S, True, True) == S
  # Past one window: whole windows, or the longest row with the flag
  # (`mean` then reads the whole last window either way).
  assert [embed_length([19, 5], S, m) for m in (False, True)] == [24, 24]
  assert [embed_length([19, 5], S, m, True) for m in (False, True)] == [
      21, 21]
  assert embed_length([14], S, False, True) == 16 == embed_length([14], S,
                                                                  False)


class _Signature:
  """The export's embed_ids as a batch job calls it; records each W, and
  refuses (as an export older than `partial_first_window`) a W past the
  window that is no multiple of it when `old`."""

  def __init__(self, embed, old):
    self.embed, self.old, self.lengths = embed, old, []

  def __call__(self, layers, input_ids, segment_ids, input_mask):
    length = int(input_ids.shape[1])
    self.lengths.append(length)
    if self.old and length > S and length % S:
      raise tf.errors.InvalidArgumentError(
          None, None, f"input_ids: length must be at most {S} or a multiple "
          f"of it, got {length}")
    assert layers.numpy().tolist() == LAYERS
    ids = [[int(x) for x in row[m < 0.5][:-2]]
           for row, m in zip(input_ids.numpy(), input_mask.numpy())]
    return {k: tf.constant(v) for k, v in self.embed(ids, length).items()}


@pytest.mark.parametrize("poolings", [["last", "masked_mean"],
                                      list(SIGNATURE_POOLINGS)])
def test_batch_kind_reads_the_meta_flag(embed, poolings):
  payloads = [{"ids": t} for t in (SHORT, LONG, TWO)]
  results = {}
  for name, meta in (("old", {"max_seq_length": S}),
                     ("new", {"max_seq_length": S,
                              "partial_first_window": True})):
    kind = LanguageModelBatch(meta, {"job": "embed", "layers": LAYERS,
                                     "poolings": poolings}, "", name="lm")
    signature = _Signature(embed, old=name == "old")
    results[name] = kind._embed(signature, payloads)
    # Old exports: whole windows (3 * S); new: the longest row (19 + 2).
    assert signature.lengths == [3 * S if name == "old" else 21]
  (old_rows, old_pad), (new_rows, new_pad) = results["old"], results["new"]
  assert old_pad == [Padding(len(p["ids"]) + 2, 24) for p in payloads]
  assert new_pad == [Padding(len(p["ids"]) + 2, 21) for p in payloads]
  for old, new, p in zip(old_rows, new_rows, payloads):
    assert new["vectors"].shape == (len(p["ids"]), 3, 16)
    assert_close(new["vectors"], old["vectors"], atol=1e-5, rtol=0)
    assert sorted(new["pooled"]) == sorted(poolings)
    for name in poolings:
      assert_close(new["pooled"][name], old["pooled"][name], atol=1e-5,
                   rtol=0, name=name)


def test_without_piece_vectors_the_outputs_carry_none(embed):
  """A job without --tfrecord (`piece_vectors` False): the same pooled
  vectors, and no per-piece vectors carried through the job."""
  payloads = [{"ids": t} for t in (SHORT, LONG, TWO)]
  meta = {"max_seq_length": S, "partial_first_window": True}
  outputs = {}
  for keep in (True, False):
    kind = LanguageModelBatch(meta, {"job": "embed", "layers": LAYERS,
                                     "poolings": ["masked_mean"],
                                     "piece_vectors": keep}, "", name="lm")
    outputs[keep], _ = kind._embed(_Signature(embed, old=False), payloads)
  for full, slim in zip(outputs[True], outputs[False]):
    assert full["vectors"] is not None and slim["vectors"] is None
    assert_close(slim["pooled"]["masked_mean"],
                 full["pooled"]["masked_mean"], atol=0, rtol=0)
