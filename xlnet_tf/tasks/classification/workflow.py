"""Text classification / regression: the options and data hooks of
`run_classifier.py` (model, loss and signatures: `xlnet_tf/tasks/
classification.py`; data: `data_utils/classification/`).

Long documents: with `max_segments` N > 1 a record holds N segments of
`max_seq_length` S (record length L = N*S, layout in `data_utils/
classification/features.py`) and the model reads them in order with
`run.mem_len` tokens of memory (`segment_length=S`), back-propagating
through the last `bptt_segments` of them."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import numpy as np
from absl import logging

from data_utils import paths
from data_utils.classification import reader as cd
from data_utils.classification.features import example_features
from data_utils.errors import UsageError, UserError
from xlnet_tf.tasks.classification import metrics
from xlnet_tf.tasks.classification.model import ClassifierTask
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.finetuning.driver import FinetuneOptions
from xlnet_tf.finetuning.records import RecordsWorkflow

# File names the GLUE server expects.
GLUE_SUBMISSION = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC",
                   "sts-b": "STS-B", "qqp": "QQP", "mnli": "MNLI-m",
                   "mnli-mm": "MNLI-mm", "qnli": "QNLI", "rte": "RTE",
                   "wnli": "WNLI"}


@dataclasses.dataclass(frozen=True)
class ClassifierOptions(FinetuneOptions):
  is_regression: bool = False
  cls_scope: Optional[str] = None
  predict_threshold: float = 0.0
  generic: Optional[cd.GenericSpec] = None
  max_segments: int = 1
  keep_end: bool = False
  bptt_segments: int = 1


def check_segment_options(max_segments: int, mem_len: int,
                          bptt_segments: int, keep_end: bool) -> None:
  """A one-line `UsageError` naming the flag when --max_segments,
  --mem_len, --bptt_segments and --keep_end cannot work together.

  Example:
    >>> check_segment_options(4, 128, 2, True)
    >>> check_segment_options(4, 0, 1, False)
    Traceback (most recent call last):
    ...
    data_utils.errors.UsageError: --mem_len=0: must be positive with \
--max_segments=4 (the memory carries the earlier segments)
  """
  if max_segments < 1:
    raise UsageError(f"--max_segments={max_segments}: must be at least 1")
  if mem_len < 0:
    raise UsageError(f"--mem_len={mem_len}: must be at least 0")
  if max_segments > 1 and mem_len == 0:
    raise UsageError(f"--mem_len=0: must be positive with --max_segments="
                     f"{max_segments} (the memory carries the earlier "
                     "segments)")
  if not 1 <= bptt_segments <= max_segments:
    raise UsageError(f"--bptt_segments={bptt_segments}: must be between 1 "
                     f"and --max_segments={max_segments}")
  if keep_end and max_segments == 1:
    raise UsageError("--keep_end: needs --max_segments > 1 (one window "
                     "keeps the beginning, as the original)")


class ClassifierWorkflow(RecordsWorkflow):

  stat_keys = ("longer_than_segment", "truncated")

  def __init__(self, opts: ClassifierOptions):
    check_segment_options(opts.max_segments, opts.run.mem_len,
                          opts.bptt_segments, opts.keep_end)
    super().__init__(opts)
    self.labels = cd.labels_of(self.task_name, opts.generic)
    if self.task_name == "generic" and self.labels is None and \
        not opts.is_regression:
      # Without either flag, 0/1 labels would train a regressor.
      raise UsageError("--task_name=generic: pass --label_list (the labels, "
                       "for classification) or --is_regression")
    if opts.is_regression and self.labels is not None:
      raise UsageError(f"--is_regression: {self.task_name} has labels "
                       f"({', '.join(self.labels)}); a regression task has "
                       "numeric scores and no --label_list")
    self.regression = opts.is_regression or self.labels is None
    if not self.regression and not self.labels:
      raise cd.TaskDataError(f"task {self.task_name}: no label list (pass "
                             "--label_list or --is_regression)")
    self.output_keys = ("score",) if self.regression else (
        "logits", "probabilities")
    # One segment (segment_length None): today's model, bit for bit.
    self.task = ClassifierTask(
        opts.config, opts.run, 1 if self.regression else len(self.labels),
        opts.cls_scope or self.task_name, self.regression, opts.summary_type,
        opts.use_summ_proj, self.record_length,
        segment_length=opts.max_seq_length if opts.max_segments > 1 else None,
        bptt_segments=opts.bptt_segments)

  @property
  def record_length(self) -> int:
    return self.opts.max_seq_length * self.opts.max_segments

  def check_inputs(self) -> None:
    opts = self.opts
    least = cd.min_seq_length(self.task_name, opts.generic)
    if opts.max_seq_length < least:
      room = ("a token of each text, two <sep> and <cls>" if least == 5
              else "one token, <sep> and <cls>")
      raise UsageError(f"--max_seq_length={opts.max_seq_length}: must be at "
                       f"least {least} for {self.task_name} ({room})")
    needed = [(action, flag, split) for action, flag, split, on in (
        ("--do_train", "train_split", opts.train_split, opts.do_train),
        ("--do_eval", "eval_split", opts.eval_split, opts.do_eval),
        ("--do_predict", None, "test", opts.do_predict)) if on]
    for action, flag, split in needed:
      if split not in cd.SPLITS:
        raise UsageError(f"--{flag}={split}: must be one of "
                         f"{', '.join(cd.SPLITS)}")
      cd.check_split_files(opts.data_dir, cd.split_files(
          self.task_name, split, opts.generic), split, action)
    if opts.do_train:
      # Read the later splits now: a bad row fails before training.
      for split in dict.fromkeys(s for _, _, s in needed):
        if split != opts.train_split and not self.read(split):
          raise UserError(f"{opts.data_dir}: the {split} split of "
                          f"{self.task_name} has no example")

  def read(self, split):
    return cd.read_examples(self.task_name, self.opts.data_dir, split,
                            self.opts.generic)

  def featurize(self, example):
    return example_features(example, self.tokenizer.encode_ids,
                            self.opts.max_seq_length,
                            None if self.regression else self.labels,
                            self.opts.max_segments, self.opts.keep_end)

  def feature_settings(self):
    settings = {"labels": None if self.regression else list(self.labels),
                "generic": dataclasses.asdict(self.opts.generic)
                if self.opts.generic else None}
    if self.opts.max_segments > 1:
      # Only then: one-segment caches keep the names they always had.
      settings.update(max_segments=self.opts.max_segments,
                      keep_end=self.opts.keep_end)
    return settings

  def documents(self, info: dict) -> dict:
    """How many examples of a split are longer than one segment and how
    many the records truncate (the features info's stats), with the
    settings that decide it."""
    return dict(info["stats"], segment_length=self.opts.max_seq_length,
                max_segments=self.opts.max_segments,
                keep_end=self.opts.keep_end)

  def eval_fields(self, info: dict) -> dict:
    return {"documents": self.documents(info)}

  def score(self, out: Dict[str, np.ndarray], examples) -> dict:
    if self.regression:
      return metrics.regression_metrics(out["label"], out["score"])
    result = metrics.classification_metrics(self.task_name, out["label"],
                                            out["logits"].argmax(-1))
    result["majority_baseline"] = metrics.majority_class_accuracy(
        out["label"])
    return result

  def prediction_rows(self, out, examples) -> List[str]:
    rows = ["index\tprediction"]
    for k, example in enumerate(examples):
      if self.regression:
        value = f"{float(out['score'][k]):.3f}"
      else:
        probs = out["probabilities"][k]
        if self.opts.predict_threshold and len(self.labels) == 2:
          cls = int(probs[1] > self.opts.predict_threshold)
        else:
          cls = int(probs.argmax())
        value = self.labels[cls]
      rows.append(f"{example.guid}\t{value}")
    return rows

  def prediction_file(self) -> str:
    # Named after the task as GLUE's submission format wants; the ledger
    # (`data_utils/outputs.py`) keeps another input's predictions from
    # being replaced.
    return f"{GLUE_SUBMISSION.get(self.task_name, self.task_name)}.tsv"

  def prediction_source(self) -> str:
    return paths.join(self.opts.data_dir, cd.split_files(
        self.task_name, self.predict_split, self.opts.generic)[0])

  def write_predictions(self, checkpoint: str, info: dict) -> str:
    docs = self.documents(info)
    logging.info("predict: %d examples, %d longer than one segment of %d "
                 "tokens, %d truncated to %d segment(s)",
                 info["num_examples"], docs["longer_than_segment"],
                 docs["segment_length"], docs["truncated"],
                 docs["max_segments"])
    return super().write_predictions(checkpoint, info)

  def export_model(self, model, export_dir, text):
    # The export reads whole records (L = N*S) and, with segments, builds
    # the same layout in the graph (keep_end included). Both exports carry
    # the SentencePiece model (for batch inference tokenizing in Python);
    # only the text one tokenizes in the graph.
    return export_classifier(
        model, export_dir, self.record_length, self.regression,
        labels=None if self.regression else self.labels,
        sp_model_path=self.opts.spiece_model_file, lower=self.opts.uncased,
        keep_end=self.opts.keep_end, text_signatures=text)


def run(opts: ClassifierOptions) -> dict:
  return ClassifierWorkflow(opts).run()
