"""Long documents read segment by segment with Transformer-XL memory
(`mems_mask`, `PooledTaskModel(segment_length=S)`): the recurrence equals one
pass over the whole document under the block mask it implies, padding and
leading empty segments change nothing, one window is today's model, bad
settings are refused in one line, and the model serializes.
Gradients (`bptt_segments`, recompute, mixed precision): test_segments_grad.py.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from xlnet_tf import masks
from xlnet_tf.tasks import ClassifierTask
from conftest import assert_close

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
S, N, B = 4, 3, 2
L = N * S
RNG = np.random.RandomState(19)
IDS = RNG.randint(5, 50, [B, L]).astype(np.int32)
# Row 1 is left padded over a whole segment and half of the next.
PAD = np.zeros([B, L], np.float32)
PAD[1, :6] = 1.0
# Earlier segments hold text A (segment 0, as memory counts); the last mixes.
SEGS = np.zeros([B, L], np.int32)
SEGS[:, -S:] = RNG.randint(0, 2, [B, S])
_WEIGHTS = {}


def _options(**overrides):
  return xt.RunOptions(**{"dropout": 0.0, "dropatt": 0.0, **overrides})


def _encoder(**overrides):
  """An encoder with shared weights (the same for every option set)."""
  model = xt.XLNetModel(CONFIG, _options(**overrides))
  model(IDS[:, :S])
  if "weights" not in _WEIGHTS:
    _WEIGHTS["weights"] = model.get_weights()
  model.set_weights(_WEIGHTS["weights"])
  return model


def recurrence_mask(mem_len, uni, same_length, pad):
  """`[B, L, L]`, 1 = query q may not see key p, written from the
  recurrence: q sees its own segment and the `mem_len` positions before the
  segment starts, never a later segment nor padding; 'uni' adds "not after
  q" and `same_length` "not more than mem_len behind q"."""
  q = np.arange(L)[:, None]
  p = np.arange(L)[None, :]
  start = (q // S) * S
  hidden = (p >= start + S) | (p < start - mem_len)
  if uni:
    hidden |= p > q
    if same_length:
      hidden |= q - p > mem_len
  return (hidden[None] | (pad[:, None, :] > 0)).astype(np.float32)


def _by_segments(encoder, mem_len):
  """Sequence output `[B, L, D]` of the segments read in order, memory
  starting as zeros with every position hidden; its mask written out."""
  mems = [tf.zeros([B, mem_len, CONFIG.d_model])] * CONFIG.n_layer
  mems_mask = np.ones([B, mem_len], np.float32)
  outputs = []
  for k in range(N):
    cut = slice(k * S, (k + 1) * S)
    out = encoder(IDS[:, cut], segment_ids=SEGS[:, cut],
                  input_mask=PAD[:, cut], mems=mems, mems_mask=mems_mask)
    outputs.append(out["sequence_output"])
    mems = out["new_mems"]
    mems_mask = np.concatenate([mems_mask, PAD[:, cut]], 1)[:, -mem_len:]
  return tf.concat(outputs, axis=1)


# M < S, = S, > S on the fast path; the reference path with M > S (memory
# spanning two earlier segments) only, to keep the file fast.
GRID = [(m, a, s, True) for m in (2, 4, 6) for a in ("bi", "uni")
        for s in (False, True)] + [(6, a, s, False) for a in ("bi", "uni")
                                   for s in (False, True)]


@pytest.mark.parametrize("mem_len,attn_type,same_length,fast", GRID)
def test_segments_equal_one_pass_under_block_mask(mem_len, attn_type,
                                                  same_length, fast):
  recurrent = _encoder(mem_len=mem_len, attn_type=attn_type,
                       same_length=same_length, fast_kernels=fast)
  whole = _encoder(attn_type=attn_type, fast_kernels=fast)
  block = recurrence_mask(mem_len, attn_type == "uni", same_length, PAD)
  want = whole(IDS, segment_ids=SEGS, perm_mask=block)["sequence_output"]
  assert_close(_by_segments(recurrent, mem_len), want)


def test_recurrence_mask_example():
  """The reference mask itself, for M = 2 'bi' without padding (row = query
  position 0..11, 1 = hidden)."""
  block = recurrence_mask(2, False, False, np.zeros([1, L]))[0].astype(int)
  assert block[0].tolist() == [0] * 4 + [1] * 8
  assert block[5].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
  assert block[11].tolist() == [1] * 6 + [0] * 6


def test_memory_mask_is_the_tail_of_memory_and_padding():
  got = masks.memory_mask(tf.constant([[1., 0., 0.]]),
                          tf.constant([[1., 0.]]), 4)
  assert got.numpy().tolist() == [[0., 0., 1., 0.]]
  assert masks.memory_mask(None, tf.zeros([2, 2]), 3).numpy().tolist() == [
      [1., 0., 0.]] * 2


def test_mems_mask_hides_memory_like_removing_it():
  encoder = _encoder(mem_len=3)
  mems = [tf.constant(RNG.randn(B, 3, 16), tf.float32)] * 2
  hide_first = np.array([[1., 0., 0.]] * B, np.float32)
  out = encoder(IDS[:, :S], mems=mems, mems_mask=hide_first)
  # Without the hidden position the relative distances are the same.
  want = encoder(IDS[:, :S], mems=[m[:, 1:] for m in mems])
  assert_close(out["sequence_output"], want["sequence_output"])
  with pytest.raises(ValueError, match="mems_mask: given without mems\n"):
    encoder(IDS[:, :S], mems_mask=hide_first)


def _classifier(mem_len=6, summary_type="last", attn_type="bi", fast=True,
                **head):
  model = xt.XLNetClassifier(
      _encoder(mem_len=mem_len, attn_type=attn_type, fast_kernels=fast),
      n_class=3, summary_type=summary_type, **head)
  model.build()
  for layer in model.heads:
    layer.set_weights([RNG.randn(*w.shape).astype(np.float32) * 0.3
                       for w in layer.get_weights()])
  return model


def _document(pieces, n_segments):
  """One LEFT-padded row of `n_segments * S`: `pieces` (ids) and its
  features; segment 0, the last piece as <cls> (segment 2)."""
  length = n_segments * S
  ids = np.zeros([length], np.int32)
  pad = np.ones([length], np.float32)
  segs = np.full([length], 4, np.int32)
  ids[-len(pieces):] = pieces
  pad[-len(pieces):] = 0.0
  segs[-len(pieces):] = 0
  segs[-1] = 2
  return ids, segs, pad


def _features(rows):
  ids, segs, pad = (np.stack(parts) for parts in zip(*rows))
  return {"input_ids": ids, "segment_ids": segs, "input_mask": pad}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
@pytest.mark.parametrize("summary_type,attn_type,mem_len", [
    ("last", "bi", 6), ("attn", "bi", 3), ("mean", "uni", 4)])
def test_document_logits_do_not_depend_on_padding_or_batch(
    summary_type, attn_type, mem_len, fast):
  model = _classifier(mem_len, summary_type, attn_type, fast,
                      segment_length=S)
  short = RNG.randint(5, 50, [6])  # spans 2 segments, the first one partly
  alone_2 = model(_features([_document(short, 2)]))["logits"]
  alone_4 = model(_features([_document(short, 4)]))["logits"]
  batch = _features([_document(RNG.randint(5, 50, [15]), 4),
                     _document(short, 4),
                     _document(RNG.randint(5, 50, [11]), 4)])
  in_batch = model(batch)["logits"][1:2]
  assert_close(alone_4, alone_2)
  assert_close(in_batch, alone_2)
  # And one segment: a document that fits in it reads as the plain model.
  one = _features([_document(short[:S], 1)])
  plain = _classifier(mem_len, summary_type, attn_type, fast)
  plain.set_weights(model.get_weights())
  assert_close(model(_features([_document(short[:S], 3)]))["logits"],
               plain(one)["logits"])


def test_read_segment_streams_what_call_computes():
  model = _classifier(mem_len=5, segment_length=S)
  features = _features([_document(RNG.randint(5, 50, [10]), N),
                        _document(RNG.randint(5, 50, [12]), N)])
  mems, mems_mask = model.initial_memory(2)
  assert [m.shape for m in mems] == [(2, 5, 16)] * 2
  assert mems_mask.numpy().tolist() == [[1.0] * 5] * 2
  for k in range(N):
    segment = {key: v[:, k * S:(k + 1) * S] for key, v in features.items()}
    out, mems, mems_mask = model.read_segment(segment, mems, mems_mask)
  assert mems_mask.numpy().tolist() == [[0.0] * 5] * 2
  want = model(features)
  assert_close(out["logits"], want["logits"], atol=1e-6)
  assert_close(out["probabilities"], want["probabilities"], atol=1e-6)


@pytest.mark.parametrize("regression,key", [(False, "cls_logits"),
                                            (True, "reg_logits")])
def test_golden_outputs_with_one_window_and_with_one_segment(golden,
                                                             regression, key):
  """`segment_length=None` is today's model; a single segment of the whole
  length after an all-hidden memory computes the same too."""
  case = golden("case_finetune")
  features = {"input_ids": case["input_ids_bm"],
              "segment_ids": case["seg_ids_bm"],
              "input_mask": case["input_mask_bm"]}
  out_key = "score" if regression else "logits"
  for mem_len, segment_length in ((0, None), (6, 12)):
    task = ClassifierTask(case.config, case.options(mem_len=mem_len), 3,
                          "sts", regression, seq_len=12,
                          segment_length=segment_length)
    model = task.build_model()
    xt.load_original_checkpoint(model, case.ckpt)
    assert model.segment_length == segment_length
    assert_close(model(features)[out_key], case[key])


def _refused(make, message):
  """`make()` raises ValueError with `message` as one line of its own
  (errors raised inside `call` come wrapped in Keras's context lines)."""
  with pytest.raises(ValueError) as info:
    make()
  assert message in str(info.value).splitlines()


def test_bad_segment_settings_are_refused_in_one_line():
  features = _features([_document([7, 8, 9], N)])
  _refused(lambda: _classifier(mem_len=0, segment_length=S),
           "segment_length=4 needs RunOptions mem_len > 0 (the memory "
           "between segments), got 0")
  _refused(lambda: _classifier(segment_length=S, bptt_segments=0),
           "bptt_segments must be an integer >= 1, got 0")
  _refused(lambda: _classifier(bptt_segments=2),
           "bptt_segments=2 needs segment_length (one window is one segment)")
  _refused(lambda: _classifier(segment_length=5)(features),
           "segment_length=5: features of length 12 are not a whole number "
           "of segments")
  _refused(lambda: _classifier(segment_length=S, bptt_segments=4)(features),
           "bptt_segments=4 must be in [1, 3] (the features hold 3 segments)")
  _refused(lambda: xt.XLNetClassifier(_encoder(mem_len=2, reuse_len=2),
                                      segment_length=S),
           "segment_length=4 needs RunOptions reuse_len 0 (whole segments in "
           "memory), got 2")


def test_serialization_round_trip_keeps_segments():
  model = _classifier(mem_len=3, segment_length=S, bptt_segments=2)
  features = _features([_document(RNG.randint(5, 50, [9]), N)])
  want = model(features)["logits"]
  serialized = keras.layers.serialize(model)
  assert serialized["registered_name"] == "xlnet_tf>XLNetClassifier"
  rebuilt = keras.layers.deserialize(serialized)
  assert rebuilt.get_config() == model.get_config()
  assert (rebuilt.segment_length, rebuilt.bptt_segments) == (S, 2)
  assert (model.get_config()["segment_length"],
          model.get_config()["bptt_segments"]) == (S, 2)
  assert "segment_length" not in _classifier().get_config()
  rebuilt.build()
  rebuilt.set_weights(model.get_weights())
  assert_close(rebuilt(features)["logits"], want, atol=1e-6)
