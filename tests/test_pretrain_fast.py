"""The fast pretraining record builder equals the reference, byte for byte.

`fast_examples` (the kernels) against `reference_examples` (the readable
statement)
serialized by `records.example_bytes`: the same records and the same
generator state afterwards, on the shared corpus and on synthetic streams
built to hit the edge cases (long sentences, no boundary, tiny segments).
"""

import numpy as np
import pytest

from conftest import corpus_slice
from data_utils.example_wire import record_bytes, records_bytes
from data_utils.pretraining import examples as ex
from data_utils.pretraining import fast_examples as fx
from data_utils.pretraining import reference_examples as ref
from data_utils.records import example_bytes, float_feature, int_feature


def _reference_bytes(example: dict) -> bytes:
  """What the builder wrote before the fast path."""
  return example_bytes({
      k: float_feature(v.tolist()) if v.dtype.kind == "f"
      else int_feature(v.tolist()) for k, v in example.items()})


def _assert_same_records(data, sent_ids, cfg, is_start, max_steps=0, seed=3):
  """Both paths over the same stream; returns the number of steps."""
  rng_ref, rng_fast = np.random.default_rng(seed), np.random.default_rng(seed)
  fast = fx.host_step_records(data, sent_ids, cfg, is_start, rng_fast)
  n = 0
  for step in ref.host_steps(data, sent_ids, cfg, is_start, rng_ref):
    got = next(fast)
    assert len(got) == cfg.bsz_per_host
    for s, example in enumerate(step):
      assert got[s] == _reference_bytes(example), (n, s)
    n += 1
    if n == max_steps:
      break
  else:
    assert next(fast, None) is None      # both end at the same step
  assert rng_fast.bit_generator.state == rng_ref.bit_generator.state
  return n


@pytest.fixture(scope="module")
def corpus(shared, sp_tokenizer, tmp_path_factory):
  """`(ids [N] int64, sent_ids [N] bool, is_start [vocab])` of the first
  1200 lines of the shared corpus (about 100k pieces; sentences up to
  about 1000 pieces)."""
  path = corpus_slice(shared, tmp_path_factory.mktemp("fast"), 1200)
  with open(path, encoding="utf-8") as f:
    data, sent_ids = ref.lines_to_ids(f, sp_tokenizer.encode_ids, True)
  is_start = ex.start_piece_table([sp_tokenizer.id_to_piece(i)
                                   for i in range(sp_tokenizer.vocab_size)])
  return data, sent_ids, is_start


_SMALL = dict(seq_len=64, reuse_len=32, perm_size=16, num_predict=11)


@pytest.mark.parametrize("changes", [
    dict(bsz_per_host=4, bi_data=True),
    dict(bsz_per_host=4, bi_data=True, original_ngram_count=True),
    dict(bsz_per_host=4, bi_data=False),
    dict(bsz_per_host=4, bi_data=False, original_ngram_count=True),
    dict(bsz_per_host=8, bi_data=True, num_core_per_host=2),
    dict(bsz_per_host=6, bi_data=False, num_core_per_host=2, perm_size=8,
         mask_alpha=4, mask_beta=2, max_gram=3),
    dict(bsz_per_host=2, bi_data=True, seq_len=16, reuse_len=8, perm_size=4,
         num_predict=1),
], ids=["bi", "bi-pieces", "uni", "uni-pieces", "2cores", "uni-2cores-alpha",
        "tiny-one-target"])
def test_small_shape_whole_stream(corpus, changes):
  data, sent_ids, is_start = corpus
  cfg = ex.PretrainDataConfig(**dict(_SMALL, **changes))
  # a stream short enough to run to its end (where the split gives up)
  n = 4000 * cfg.bsz_per_host
  steps = _assert_same_records(data[:n], sent_ids[:n], cfg, is_start)
  assert steps > 100


@pytest.mark.parametrize("pieces", [False, True], ids=["words", "pieces"])
def test_base_shape(corpus, pieces):
  data, sent_ids, is_start = corpus
  cfg = ex.PretrainDataConfig(bsz_per_host=2, original_ngram_count=pieces)
  assert _assert_same_records(data, sent_ids, cfg, is_start,
                              max_steps=120) == 120


def test_base_shape_memory_mapped_int32(corpus, tmp_path):
  """As the builder passes it: int32 ids and bool sentence ids, memory
  maps of files."""
  data, sent_ids, is_start = corpus
  ids = np.memmap(tmp_path / "ids", np.int32, "w+", shape=data.shape)
  ids[:] = data
  sent = np.memmap(tmp_path / "sent", bool, "w+", shape=sent_ids.shape)
  sent[:] = sent_ids
  cfg = ex.PretrainDataConfig(bsz_per_host=4, bi_data=False)
  _assert_same_records(ids, sent, cfg, is_start, max_steps=40)


# Synthetic streams: sentence lengths drawn from `mean` (0 = one sentence).
def _stream(rng, n, mean):
  if mean == 0:
    return rng.integers(10, 50, n), np.zeros(n, bool)
  lengths = rng.geometric(1 / mean, n)
  sent_ids = np.repeat(np.arange(len(lengths)) % 2 == 0, lengths)[:n]
  return rng.integers(10, 50, n), sent_ids


@pytest.mark.parametrize("mean", [0, 1, 3, 40, 900])
def test_split_equals_reference(mean):
  rng = np.random.default_rng(mean)
  for trial in range(60):
    n = int(rng.integers(20, 6000))
    _, sent_ids = _stream(rng, n, mean)  # ids unused, drawn: same trials
    total_len = int(rng.integers(1, 300))
    begin = int(rng.integers(0, n))
    seed = int(rng.integers(1 << 30))
    r_ref, r_fast = np.random.default_rng(seed), np.random.default_rng(seed)
    want = ref.split_a_and_b(sent_ids, begin, total_len, r_ref)
    got = fx.split_a_and_b(sent_ids, begin, total_len, r_fast)
    assert r_fast.bit_generator.state == r_ref.bit_generator.state
    assert got == want, trial


@pytest.mark.parametrize("pieces", [False, True], ids=["words", "pieces"])
@pytest.mark.parametrize("density", [0.0, 0.05, 0.5, 1.0])
def test_span_sampler_equals_reference(pieces, density):
  rng = np.random.default_rng(int(density * 100) + pieces)
  is_start = rng.random(64) < density
  for trial in range(80):
    cfg = ex.PretrainDataConfig(
        original_ngram_count=pieces, max_gram=int(rng.integers(1, 7)),
        mask_beta=int(rng.integers(1, 3)), mask_alpha=int(rng.integers(2, 8)))
    seg_len = int(rng.integers(1, 200))
    goal = int(rng.integers(1, seg_len + 1))
    tokens = rng.integers(0, 64, seg_len)
    reverse = bool(trial % 2)
    seed = int(rng.integers(1 << 30))
    r_ref, r_fast = np.random.default_rng(seed), np.random.default_rng(seed)
    want = ref.sample_span_mask(tokens, goal, cfg, is_start, r_ref, reverse)
    mask = bytearray(seg_len + 7)        # the segment at offset 5
    read = tokens[::-1] if reverse else tokens
    fx._SpanSampler(cfg)(mask, 5, seg_len,
                         np.flatnonzero(is_start[read]).tolist(), goal, r_fast,
                         reverse)
    np.testing.assert_array_equal(np.frombuffer(mask, bool)[5:5 + seg_len],
                                  want)
    assert mask[:5] == bytes(5) and mask[-2:] == bytes(2)
    assert r_fast.bit_generator.state == r_ref.bit_generator.state


_EDGE_INTS = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**31 - 1,
              2**31, 2**32 - 1, 2**32, 2**35, 2**56, 2**63 - 1, -1, -2, -128,
              -2**31, -2**32, -2**63]
_EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, -1e-30, 1e-40, 1e-45,
                3.4028235e38, -3.4028235e38, np.inf, -np.inf, 1 / 3]


def test_record_bytes_equals_example_bytes():
  rng = np.random.default_rng(0)
  keys = ["input", "label", "a", "B", "z" * 200, "t\u00e9te", "_", "0"]
  for trial in range(300):
    example = {}
    for key in rng.choice(keys, int(rng.integers(0, 6)), replace=False):
      n = int(rng.choice([0, 1, 2, 17, 200]))
      kind = trial % 5
      if kind == 0:
        value = rng.choice(_EDGE_INTS, n).astype(np.int64)
      elif kind == 1:
        value = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64,
                             endpoint=True)
      elif kind == 2:
        value = rng.integers(0, 1 << int(rng.integers(1, 40)), n).astype(
            [np.int32, np.int64, np.uint32, np.uint64][trial % 4])
      elif kind == 3:
        value = np.array(rng.choice(_EDGE_FLOATS, n), np.float32)
      else:
        value = rng.standard_normal(n) * 10.0 ** float(rng.integers(-30, 30))
      example[str(key)] = value
    assert record_bytes(example) == _reference_bytes(example), example


def test_records_bytes_batch_equals_rows():
  rng = np.random.default_rng(1)
  features = {"ids": rng.integers(-5, 40000, (7, 30)),
              "mask": rng.random((7, 4)).astype(np.float32),
              "one": rng.integers(0, 2, (7, 1)), "none": np.zeros((7, 0), int)}
  got = records_bytes(features)
  assert got == [_reference_bytes({k: v[r] for k, v in features.items()})
                 for r in range(7)]
  assert record_bytes({}) == _reference_bytes({})
