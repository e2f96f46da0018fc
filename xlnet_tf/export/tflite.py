"""TFLite conversion of a features export, and a runner for the result.

`convert_features_export` turns the `serving_default` signature of a
SavedModel this project exported (classifier, regressor, token classifier,
multiple choice, SQuAD: every export has a features `serving_default`) into
a TFLite flatbuffer made of TFLite builtin ops only (no Select TF ops, no
custom ops), so that the plain LiteRT runtime runs it. The flatbuffer keeps
the signature: the same name, the same input names, dtypes and shapes (batch
dimension free), and ALL of the export's outputs, the string ones included
(`label` of a classifier, `tags` of a token classifier are a builtin GATHER
from a string table). Only `serving_default` is converted: the raw-text
signatures (`serve_text`...) need the in-graph tokenizer, TF Text custom
ops; the streaming ones (`serve_segment`, `initial_memory`) are not asked.

Variants (`TFLITE_VARIANTS`):
  float32  the export's float32 graph as builtin ops; outputs equal the
           SavedModel's to float rounding (the kernels differ)
  int8     dynamic-range quantization (`tf.lite.Optimize.DEFAULT`):
           constant tensors of 1024 elements or more (dense kernels, per
           output channel; the word embedding and the constant-folded
           relative-position projections, one scale each) stored as int8,
           activations float (the dense layers run int8 hybrid kernels);
           about a quarter of the float32 file. Logits move by ~1e-2, so a
           class decision near a tie may differ from the SavedModel's
           (measured agreement: tests/test_tflite.py, benchmarks/README.md).

`TFLiteModel` runs the signature on numpy arrays of any batch size, with
the SavedModel signature's calling convention (keyword inputs, a dict of
outputs). It uses the LiteRT interpreter (`ai_edge_litert`, which
`tf.lite.Interpreter` is deprecated in favour of).
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple, Union

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

TFLITE_VARIANTS = ("float32", "int8")
SIGNATURE = "serving_default"


def convert_features_export(saved_model_dir: str, variant: str) -> bytes:
  """serving_default of a features SavedModel -> TFLite flatbuffer bytes,
  builtin ops only.

  `variant` is one of `TFLITE_VARIANTS` (ValueError otherwise). A
  conversion failure raises (the converter's error, naming the op it could
  not convert): for this project's exports it is a bug, not a fallback to
  Select TF ops. Writing the bytes to disk is the caller's job.
  """
  if variant not in TFLITE_VARIANTS:
    raise ValueError(f"TFLite variant {variant!r}: use one of "
                     f"{', '.join(TFLITE_VARIANTS)}")
  if not tf.saved_model.contains_saved_model(saved_model_dir):
    raise ValueError(f"{saved_model_dir}: no SavedModel there")
  converter = tf.lite.TFLiteConverter.from_saved_model(
      saved_model_dir, signature_keys=[SIGNATURE])
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if variant == "int8":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


class TFLiteModel:
  """A converted features export, called as its SavedModel signature:
  `model(input_ids=..., segment_ids=..., input_mask=...)` -> `{output name:
  numpy array}` (string outputs as numpy `bytes` arrays, as
  `tensor.numpy()` gives them).

  `model` is the flatbuffer (bytes) or a path to a `.tflite` file;
  `num_threads` the interpreter's CPU threads (None: LiteRT's default).
  Inputs are checked against the signature (names, dtype kind, every
  dimension but the batch) and cast to its dtypes; the batch dimension may
  change from call to call (the interpreter's tensors are resized). One
  instance is not safe to call from several threads at once.
  """

  def __init__(self, model: Union[bytes, str, os.PathLike],
               num_threads: Optional[int] = None):
    if isinstance(model, (bytes, bytearray)):
      self._interpreter = Interpreter(model_content=bytes(model),
                                      num_threads=num_threads)
    else:
      self._interpreter = Interpreter(model_path=os.fspath(model),
                                      num_threads=num_threads)
    signatures = self._interpreter.get_signature_list()
    if SIGNATURE not in signatures:
      raise ValueError(f"the TFLite model has no {SIGNATURE} signature; it "
                       f"has: {', '.join(sorted(signatures)) or 'none'}")
    self._runner = self._interpreter.get_signature_runner(SIGNATURE)
    details = self._runner.get_input_details()
    self._specs = {name: (d["dtype"], tuple(int(x) for x in
                                            d["shape_signature"]))
                   for name, d in details.items()}
    outputs = self._runner.get_output_details()
    self._output_names = tuple(sorted(outputs))
    # Zero-row results, which the runtime does not compute (a batch of 0
    # fails to resize): strings as object arrays, as the runtime gives them.
    self._empty = {name: np.empty(
        [max(int(x), 0) for x in d["shape_signature"]],
        object if d["dtype"] == np.bytes_ else d["dtype"])
        for name, d in outputs.items()}

  @property
  def input_names(self) -> Tuple[str, ...]:
    """The signature's input names, sorted."""
    return tuple(sorted(self._specs))

  @property
  def output_names(self) -> Tuple[str, ...]:
    """The signature's output names, sorted."""
    return self._output_names

  def input_spec(self, name: str) -> Tuple[np.dtype, Tuple[int, ...]]:
    """(numpy dtype, shape with -1 for the free batch dimension)."""
    return self._specs[name]

  def _checked(self, name: str, value) -> np.ndarray:
    dtype, shape = self._specs[name]
    array = np.asarray(value)
    # Same kind only (int64 ids -> int32 is fine, floats for ids are not),
    # as a SavedModel signature refuses a float tensor for an int input.
    if not np.can_cast(array.dtype, dtype, casting="same_kind"):
      raise ValueError(f"input {name!r} has {array.dtype} values, the "
                       f"signature takes {np.dtype(dtype).name}")
    fixed = [None if d < 0 else d for d in shape]
    if array.ndim != len(shape) or any(
        want is not None and got != want
        for got, want in zip(array.shape, fixed)):
      raise ValueError(f"input {name!r} has shape {list(array.shape)}, the "
                       f"signature takes {fixed}")
    return np.ascontiguousarray(array, dtype=dtype)

  def __call__(self, **inputs: np.ndarray) -> Dict[str, np.ndarray]:
    """Runs serving_default on any batch size (resizing inputs as needed):
    every input `[B, ...]` with the same B; returns every output, `[B,
    ...]`."""
    if set(inputs) != set(self._specs):
      missing = sorted(set(self._specs) - set(inputs))
      extra = sorted(set(inputs) - set(self._specs))
      raise ValueError(f"{SIGNATURE} takes inputs "
                       f"{', '.join(self.input_names)}; missing: "
                       f"{missing}, unknown: {extra}")
    arrays = {k: self._checked(k, v) for k, v in inputs.items()}
    batches = {a.shape[0] for a in arrays.values()}
    if len(batches) != 1:
      raise ValueError("inputs of different batch sizes: " + ", ".join(
          f"{k} {a.shape[0]}" for k, a in sorted(arrays.items())))
    if batches == {0}:
      return {k: v.copy() for k, v in self._empty.items()}
    # The runner resizes every input to the given shape and reallocates,
    # so each call may take its own batch size.
    return dict(self._runner(**arrays))
