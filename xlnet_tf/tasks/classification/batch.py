"""Batch prediction with a classifier or regressor export: a row's text
(and second text) -> features as `run_classifier.py` makes them
(`convert_example`, or `convert_document` for a model read in segments)
-> `label`, `class_id`, `probabilities`, `logits` (classifier) or `score`
(regressor)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from data_utils.classification.features import (convert_document,
                                                convert_example)
from xlnet_tf.tasks.batch import (BatchKind, Padding, Prepared, left_padded,
                                  numpy_outputs, real_length, trimmed)


class ClassifierBatch(BatchKind):
  pairs = True

  @classmethod
  def bfloat16_problem(cls, meta: dict) -> Optional[str]:
    if meta.get("segment_length"):
      return ("a model read in segments with memory runs them in a loop "
              "that the bfloat16 rewrite does not reach; use float32")
    return None

  def prepare(self, fields: dict) -> Prepared:
    encode = self.tokenizer.encode_ids
    ids_a = encode(fields["text"])
    ids_b = encode(fields["text_b"]) if fields.get("text_b") else None
    meta = self.meta
    segment_length = meta.get("segment_length")
    if segment_length:
      features = convert_document(
          ids_a, ids_b, segment_length,
          meta["max_seq_length"] // segment_length, meta.get("keep_end",
                                                             False))
    else:
      features = convert_example(ids_a, ids_b, meta["max_seq_length"])
    features = trimmed(features)
    return Prepared(real_length(features), features)

  def infer(self, signature, payloads: List[dict]
            ) -> Tuple[List[dict], List[Padding]]:
    longest = max(real_length(p) for p in payloads)
    # Only `serve_features` takes any length; the others the record's.
    length = longest if self.signature == "serve_features" \
        else self.meta["max_seq_length"]
    features = left_padded(payloads, length)
    out = numpy_outputs(signature(**{k: tf.constant(v)
                                     for k, v in features.items()}))
    rows = [{k: v[b] for k, v in out.items()} for b in range(len(payloads))]
    return rows, [Padding(real_length(p), length) for p in payloads]

  def row(self, fields: dict, payload: dict, output: dict) -> dict:
    del fields, payload
    if "score" in output:  # a regressor's only output
      return {"score": float(output["score"])}
    label = output["label"]
    return {"label": label.decode() if isinstance(label, bytes) else
            str(label),
            "class_id": int(output["class_id"]),
            "probabilities": [float(x) for x in np.asarray(
                output["probabilities"], np.float32)],
            "logits": [float(x) for x in np.asarray(output["logits"],
                                                    np.float32)]}
