"""Features read as segments with memory (`PooledTaskModel(segment_length=
S)`): cutting `[B, n * S]` features into segments, checking the settings,
and reading the segments whose memory is not back-propagated through as one
graph loop.

Why a loop (issue 28): a Python loop over the segments traces one encoder
per segment, so the graph, the time to trace and compile it and the memory
grow with n. `read_memory` traces the encoder of one segment and runs it n
times inside a `tf.while_loop`; only the segments back-propagation goes
through stay unrolled (`PooledTaskModel.bptt_segments`). Eagerly the loop is
a Python loop.
"""

from __future__ import annotations

from typing import Callable, List, Tuple

import tensorflow as tf

from xlnet_tf.config import RunOptions

FEATURE_KEYS = ("input_ids", "segment_ids", "input_mask")
# `(segment [B, S] dict, mems, mems_mask) -> (new_mems, new_mems_mask)`
ReadFn = Callable[[dict, List[tf.Tensor], tf.Tensor],
                  Tuple[List[tf.Tensor], tf.Tensor]]


def segment_features(features) -> dict:
  """The encoder's features of `features` as tensors (`segment_ids` only if
  present), `input_mask` zeros (no padding) when missing."""
  present = {k: tf.convert_to_tensor(features[k]) for k in FEATURE_KEYS
             if features.get(k) is not None}
  if "input_mask" not in present:
    present["input_mask"] = tf.zeros(tf.shape(present["input_ids"]),
                                     tf.float32)
  return present


def count_segments(features, segment_length: int) -> int:
  """n, the number of segments of `segment_length` in `features[
  "input_ids"] [B, n * S]`; ValueError (one line) when the length is unknown
  at tracing or not a whole number of segments."""
  length = tf.convert_to_tensor(features["input_ids"]).shape[1]
  if length is None:
    raise ValueError(f"segment_length={segment_length}: the features' length "
                     "must be known when the model is traced (n * S)")
  if length % segment_length:
    raise ValueError(f"segment_length={segment_length}: features of length "
                     f"{length} are not a whole number of segments")
  return length // segment_length


def segment_at(present: dict, segment_length: int, i: int) -> dict:
  """Segment i (0-based, a Python int) of `present` (`[B, n * S]` each):
  `[B, S]` slices.

  Example:
    >>> got = segment_at({"input_ids": tf.constant([[1, 2, 3, 4]])}, 2, 1)
    >>> got["input_ids"].numpy().tolist()
    [[3, 4]]
  """
  start = i * segment_length
  return {k: v[:, start:start + segment_length] for k, v in present.items()}


def stack_segments(present: dict, segment_length: int, count: int) -> dict:
  """The first `count` segments of `present` (`[B, n * S]` each), stacked
  segment-major: `[count, B, S]` each, `[i]` being `segment_at(..., i)`.

  Example:
    >>> got = stack_segments({"input_ids": tf.constant([[1, 2, 3, 4, 5, 6]])},
    ...                      2, 2)
    >>> got["input_ids"].numpy().tolist()
    [[[1, 2]], [[3, 4]]]
  """
  def stacked(v):
    head = v[:, :count * segment_length]
    return tf.transpose(tf.reshape(head, [-1, count, segment_length]),
                        [1, 0, 2])
  return {k: stacked(v) for k, v in present.items()}


def read_memory(read: ReadFn, stacked: dict, mems: List[tf.Tensor],
                mems_mask: tf.Tensor) -> Tuple[List[tf.Tensor], tf.Tensor]:
  """The memory after `read` (`(segment, mems, mems_mask) -> (new_mems,
  new_mems_mask)`) has read the segments of `stacked` (`[n, B, S]` each) in
  order from `(mems, mems_mask)` (n_layer `[B, M, D]`, `[B, M]` 1 = hidden),
  as one `tf.while_loop`: the traced graph holds one `read` whatever n.
  The memory comes out as a stop-gradient (what `read` gives must be one:
  nothing here is back-propagated through). Eagerly it is a Python loop.

  Example:
    >>> add = lambda seg, m, mask: ([m[0] + tf.reduce_sum(
    ...     tf.cast(seg["input_ids"], tf.float32))], mask)
    >>> m, _ = read_memory(add, {"input_ids": tf.constant([[[1]], [[2]]])},
    ...                    [tf.zeros([1, 1, 1])], tf.ones([1, 1]))
    >>> float(m[0][0, 0, 0])
    3.0
  """
  n = next(iter(stacked.values())).shape[0]

  def body(i, mems, mems_mask):
    segment = {k: tf.gather(v, i) for k, v in stacked.items()}
    new_mems, new_mask = read(segment, mems, mems_mask)
    return i + 1, list(new_mems), new_mask

  def any_batch(t):
    return tf.TensorShape([None]).concatenate(t.shape[1:])

  # parallel_iterations=1: an iteration starts when the previous one is
  # done, so the random draws of the iterations (`seeds.next_seed`, Keras's
  # stateful dropout) happen in segment order and training stays a function
  # of the seed. Running ahead could only overlap the work that does not
  # need the memory (embeddings, masks); its cost: benchmarks/README.md.
  _, new_mems, new_mask = tf.while_loop(
      lambda i, *_: i < n, body, (tf.constant(0), list(mems), mems_mask),
      shape_invariants=(tf.TensorShape([]), [any_batch(m) for m in mems],
                        any_batch(mems_mask)),
      parallel_iterations=1)
  # The loop keeps the batch size: give its static value back.
  return ([tf.stop_gradient(tf.ensure_shape(m, old.shape))
           for m, old in zip(new_mems, mems)],
          tf.stop_gradient(tf.ensure_shape(new_mask, mems_mask.shape)))


def check_segments(options: RunOptions, segment_length, bptt_segments):
  """ValueError (one line, naming the argument) for settings the segment
  recurrence cannot run."""
  if not isinstance(bptt_segments, int) or bptt_segments < 1:
    raise ValueError(f"bptt_segments must be an integer >= 1, got "
                     f"{bptt_segments!r}")
  if segment_length is None:
    if bptt_segments != 1:
      raise ValueError(f"bptt_segments={bptt_segments} needs segment_length "
                       "(one window is one segment)")
    return
  if not isinstance(segment_length, int) or segment_length < 1:
    raise ValueError(f"segment_length must be a positive integer or None, "
                     f"got {segment_length!r}")
  if not options.mem_len:
    raise ValueError(f"segment_length={segment_length} needs RunOptions "
                     "mem_len > 0 (the memory between segments), got 0")
  if 0 < options.reuse_len < segment_length:
    raise ValueError(f"segment_length={segment_length} needs RunOptions "
                     f"reuse_len 0 (whole segments in memory), got "
                     f"{options.reuse_len}")
