"""RACE multiple-choice reading comprehension: the options and data hooks
of `run_race.py` (model, loss and signature: `xlnet_tf/tasks/
multiple_choice.py`; reader and feature layout: `data_utils/race/`).

Accuracy is reported overall and for middle and high school separately;
predictions go to `race_predictions.tsv` (id, predicted letter, gold letter,
level).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

import numpy as np

from data_utils.classification.reader import check_split_files
from data_utils.race import reader as race_reader
from data_utils.race.features import race_features
from data_utils.errors import UsageError, UserError
from xlnet_tf.tasks.multiple_choice.model import MultipleChoiceTask
from xlnet_tf.tasks.multiple_choice.serving import export_multiple_choice
from xlnet_tf.finetuning.driver import FinetuneOptions
from xlnet_tf.finetuning.records import RecordsWorkflow


@dataclasses.dataclass(frozen=True)
class RaceOptions(FinetuneOptions):
  max_qa_length: int = 128
  high_only: bool = False
  middle_only: bool = False
  original_context_aliasing: bool = False


class RaceWorkflow(RecordsWorkflow):
  text_export = False  # the features signature only

  def __init__(self, opts: RaceOptions):
    super().__init__(opts)
    self.task = MultipleChoiceTask(opts.config, opts.run, race_reader.N_CHOICE,
                                   opts.summary_type, opts.use_summ_proj,
                                   opts.max_seq_length)

  @property
  def record_length(self) -> int:
    return race_reader.N_CHOICE * self.opts.max_seq_length

  def check_inputs(self) -> None:
    opts = self.opts
    if opts.max_qa_length < 1:
      raise UsageError(f"--max_qa_length={opts.max_qa_length}: must be at "
                       "least 1")
    least = opts.max_qa_length + 4
    if opts.max_seq_length < least:
      raise UsageError(
          f"--max_seq_length={opts.max_seq_length}: must be at least {least} "
          f"with --max_qa_length={opts.max_qa_length} (question and option, "
          "<sep> <sep> <cls> and one context token)")
    if opts.high_only and opts.middle_only:
      raise UsageError("--high_only and --middle_only exclude each other")
    # --do_predict answers the evaluation split (see `predict`).
    needed = [(action, split) for action, split, on in (
        ("--do_train", opts.train_split, opts.do_train),
        ("--do_eval", opts.eval_split, opts.do_eval),
        ("--do_predict", opts.eval_split, opts.do_predict)) if on]
    for action, split in needed:
      check_split_files(opts.data_dir, race_reader.split_files(
          split, opts.high_only, opts.middle_only), split, action)
    if opts.do_train:
      # Read the later splits now: a bad passage fails before training.
      for split in dict.fromkeys(s for _, s in needed):
        if split != opts.train_split and not self.read(split):
          raise UserError(f"{opts.data_dir}: the {split} split of race has "
                          "no example")

  def read(self, split):
    return race_reader.read_race(self.opts.data_dir, split,
                                 self.opts.high_only, self.opts.middle_only)

  def featurize(self, example):
    return race_features(
        example, self.tokenizer.encode_ids, self.opts.max_seq_length,
        self.opts.max_qa_length, self.opts.original_context_aliasing)

  def feature_settings(self):
    return {"max_qa_length": self.opts.max_qa_length,
            "high_only": self.opts.high_only,
            "middle_only": self.opts.middle_only,
            "original_context_aliasing":
                self.opts.original_context_aliasing}

  def score(self, out: Dict[str, np.ndarray], examples) -> dict:
    right = out["logits"].argmax(-1) == out["label"]
    levels = np.array([e.level for e in examples])
    result = {"accuracy": float(right.mean())}
    for level in race_reader.LEVELS:
      if (levels == level).any():
        result[f"accuracy_{level}"] = float(right[levels == level].mean())
        result[f"num_{level}"] = int((levels == level).sum())
    result["main"] = result["accuracy"]
    return result

  def prediction_rows(self, out, examples) -> List[str]:
    rows = ["id\tprediction\tanswer\tlevel"]
    for example, pred in zip(examples, out["logits"].argmax(-1)):
      rows.append(f"{example.guid}\t{'ABCD'[int(pred)]}\t"
                  f"{'ABCD'[example.label]}\t{example.level}")
    return rows

  def prediction_file(self) -> str:
    return "race_predictions.tsv"

  @property
  def predict_split(self) -> str:
    # RACE's test split has answers too; predict the evaluation split.
    return self.opts.eval_split

  def export_model(self, model, export_dir, text=False):
    return export_multiple_choice(model, export_dir, race_reader.N_CHOICE,
                                  self.opts.max_seq_length)


def run(opts: RaceOptions) -> dict:
  return RaceWorkflow(opts).run()
