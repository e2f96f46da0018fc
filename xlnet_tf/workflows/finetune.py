"""The fine-tuning workflow every task shares: cached features, training
with the shared loop, evaluation of the last (or every) checkpoint,
predictions, SavedModel export. A task subclass supplies its reader, its
features, its model/loss (`TrainTask`), its metrics and its prediction rows.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
from absl import logging

from data_utils.errors import UserError, check_positive, check_writable_dir
from data_utils.feature_records import build_features, classifier_dataset
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.checkpoint import check_init_checkpoint, load_native_checkpoint
from xlnet_tf.config import RunOptions, XLNetConfig, check_vocab
from xlnet_tf.export_dir import check_export_dir
from xlnet_tf.tasks import ClassifierTask, MultipleChoiceTask, SquadTask
from xlnet_tf.training import (TrainOptions, Trainer, TrainTask,
                               checkpoint_number)
from xlnet_tf.workflows.common import (run_inference, training_checkpoints,
                                       write_json_atomic, write_text_atomic)


@dataclasses.dataclass(frozen=True)
class FinetuneOptions:
  """Settings every fine-tuning script has (the original flags)."""
  config: XLNetConfig
  run: RunOptions
  train: TrainOptions
  task_name: str
  data_dir: str
  output_dir: str
  spiece_model_file: str
  max_seq_length: int = 128
  summary_type: str = "last"
  use_summ_proj: bool = True
  uncased: bool = False
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 8
  eval_batch_size: int = 32
  predict_batch_size: int = 32
  train_split: str = "train"
  eval_split: str = "dev"
  eval_all_ckpt: bool = False
  predict_ckpt: Optional[str] = None
  predict_dir: Optional[str] = None
  num_passes: int = 1
  shuffle_buffer: int = 2048
  overwrite_data: bool = False
  export_dir: Optional[str] = None
  seed: int = 0


def task_export_kind(task) -> str:
  """The export kind of a fine-tuning `TrainTask`."""
  if isinstance(task, SquadTask):
    return "squad"
  if isinstance(task, MultipleChoiceTask):
    return "multiple_choice"
  if isinstance(task, ClassifierTask):
    return "regressor" if task.regression else "classifier"
  raise ValueError(f"no SavedModel export for {type(task).__name__}")


def default_export_dir(opts) -> str:
  """Where a fine-tuning run (`FinetuneOptions`) exports."""
  return opts.export_dir or os.path.join(opts.train.model_dir, "saved_model")


def check_finetune_export(opts, task) -> None:
  """The preflight check of a fine-tuning run's export (only a training run
  exports): see `check_export_dir`."""
  if not opts.do_train:
    return
  model_dir = opts.train.model_dir
  check_export_dir(default_export_dir(opts), task_export_kind(task), keep={
      "model_dir": model_dir, "output_dir": opts.output_dir,
      "data_dir": opts.data_dir,
      "predict_dir": opts.predict_dir or os.path.join(model_dir,
                                                      "predictions"),
      "spiece_model_file": opts.spiece_model_file,
      "init_checkpoint": opts.train.init_checkpoint}, model_dir=model_dir)


def check_finetune_training(opts, vocab_size: int) -> None:
  """The training side of a fine-tuning run's preflight (`opts`: the
  workflow's FinetuneOptions; `vocab_size`: its SentencePiece model's): the
  model config can embed every piece, and with --do_train the batch size
  and the loop's options can work and model_dir can be written (--do_eval
  writes its results there too). One-line `UserError`s naming the flag."""
  check_vocab(opts.config, vocab_size, opts.spiece_model_file)
  if opts.do_train:
    check_positive(opts.train_batch_size, "train_batch_size")
    opts.train.validate()
  if opts.do_train or opts.do_eval:
    check_writable_dir(opts.train.model_dir, "model_dir")


class FinetuneWorkflow:
  """Subclasses set `task` (a TrainTask), `regression`, `record_length` and
  implement `read`, `featurize`, `feature_settings`, `score`,
  `prediction_rows`, `prediction_file`, `export_model`."""

  task: TrainTask
  regression: bool = False
  output_keys: Sequence[str] = ("logits", "probabilities")

  def __init__(self, opts: FinetuneOptions):
    self.opts = opts
    self.task_name = opts.task_name.lower()
    self.tokenizer = SentencePieceTokenizer(opts.spiece_model_file,
                                            lower=opts.uncased)

  # Hooks ----------------------------------------------------------------
  @property
  def record_length(self) -> int:
    return self.opts.max_seq_length

  def read(self, split: str) -> list:
    raise NotImplementedError

  def featurize(self, example) -> dict:
    raise NotImplementedError

  def feature_settings(self) -> dict:
    """Task settings that shape features (beyond length/casing/model)."""
    return {}

  def score(self, out: Dict[str, np.ndarray], examples: list) -> dict:
    """Metrics; must include "main" (higher is better)."""
    raise NotImplementedError

  def prediction_rows(self, out: Dict[str, np.ndarray],
                      examples: list) -> List[str]:
    raise NotImplementedError

  def prediction_file(self) -> str:
    return f"{self.task_name}.tsv"

  def export_model(self, model, export_dir: str) -> str:
    raise NotImplementedError

  def check_inputs(self) -> None:
    """The task's flags and every data file this run will read (preflight):
    a one-line `UserError` naming the flag or file."""

  # Shared steps ---------------------------------------------------------
  def features(self, split: str, pad_to: int = 1, passes: int = 1) -> dict:
    examples = self.read(split)
    if not examples:
      raise UserError(f"{self.opts.data_dir}: the {split} split of "
                      f"{self.task_name} has no example")
    # The cache is keyed by content: the parsed examples and the
    # SentencePiece model's bytes (not their paths or times), plus settings.
    settings = dict(self.feature_settings(), task=self.task_name, split=split,
                    uncased=self.opts.uncased,
                    max_seq_length=self.opts.max_seq_length)
    info = build_features(examples, self.featurize, self.record_length,
                          self.regression, self.opts.output_dir, settings,
                          pad_to_multiple=pad_to, num_passes=passes,
                          overwrite=self.opts.overwrite_data,
                          seed=self.opts.seed,
                          input_files={"spiece": self.opts.spiece_model_file})
    info["examples"] = examples
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return classifier_dataset(
        info["path"], self.record_length, batch_size,
        regression=self.regression, is_training=training,
        shuffle_buffer=self.opts.shuffle_buffer, seed=self.opts.seed,
        skip_batches=skip, input_context=ctx)

  def train(self) -> Trainer:
    opts = self.opts
    info = self.features(opts.train_split, passes=opts.num_passes)
    logging.info("train: %d examples", info["num_examples"])
    trainer = Trainer(self.task, opts.train)
    # train_batch_size is the batch of one optimizer step: split over the
    # replicas and the accumulated micro-batches.
    parts = trainer.strategy.num_replicas_in_sync * opts.train.grad_accum_steps
    if opts.train_batch_size % parts:
      raise UserError(f"train_batch_size ({opts.train_batch_size}) must be "
                      f"divisible by replicas x grad_accum_steps ({parts})")
    per_replica = opts.train_batch_size // parts
    trainer.train(lambda ctx, skip: self.dataset(
        info, per_replica, training=True, skip=skip, ctx=ctx), per_replica)
    return trainer

  def load_model(self, checkpoint: Optional[str] = None):
    """The task model with the weights of `checkpoint` (default: newest)."""
    checkpoint = checkpoint or (training_checkpoints(
        self.opts.train.model_dir) or [None])[-1]
    if checkpoint is None:
      raise UserError(f"{self.opts.train.model_dir}: no checkpoint (train "
                      "first, or pass a checkpoint)")
    model = self.task.build_model()
    load_native_checkpoint(model, checkpoint)
    return model

  def outputs(self, checkpoint: str, info: dict, batch_size: int
              ) -> Dict[str, np.ndarray]:
    """Model outputs and labels of the real (non-padding) records."""
    model = self.load_model(checkpoint)
    total = -(-info["num_records"] // batch_size)
    out = run_inference(lambda b: model(b, training=False),
                        self.dataset(info, batch_size),
                        list(self.output_keys) + ["label", "is_real_example"],
                        total, what=f"{self.task_name} inference")
    real = out.pop("is_real_example") > 0
    return {k: v[real] for k, v in out.items()}

  def evaluate(self) -> dict:
    opts = self.opts
    info = self.features(opts.eval_split, pad_to=opts.eval_batch_size)
    ckpts = training_checkpoints(opts.train.model_dir)
    if not ckpts:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to evaluate")
    results: List[dict] = []
    for ckpt in ckpts if opts.eval_all_ckpt else ckpts[-1:]:
      result = self.score(self.outputs(ckpt, info, opts.eval_batch_size),
                          info["examples"])
      result.update(checkpoint=ckpt, step=checkpoint_number(ckpt),
                    num_examples=info["num_examples"])
      logging.info("eval %s step %d: %s", opts.eval_split, result["step"],
                   {k: round(v, 4) for k, v in result.items()
                    if isinstance(v, float)})
      results.append(result)
    summary = {"task": self.task_name, "split": opts.eval_split,
               "results": results,
               "best": max(results, key=lambda r: r["main"])}
    write_json_atomic(os.path.join(opts.train.model_dir,
                                   f"eval_results_{opts.eval_split}.json"),
                      summary)
    return summary

  def predict(self, split: str = "test") -> str:
    opts = self.opts
    info = self.features(split, pad_to=opts.predict_batch_size)
    ckpt = opts.predict_ckpt or (training_checkpoints(opts.train.model_dir)
                                 or [None])[-1]
    if ckpt is None:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to predict "
                      "with (or pass --predict_ckpt)")
    rows = self.prediction_rows(
        self.outputs(ckpt, info, opts.predict_batch_size), info["examples"])
    predict_dir = opts.predict_dir or os.path.join(opts.train.model_dir,
                                                   "predictions")
    path = os.path.join(predict_dir, self.prediction_file())
    write_text_atomic(path, "\n".join(rows) + "\n")
    logging.info("wrote %d predictions to %s", len(rows) - 1, path)
    return path

  def export(self, checkpoint: Optional[str] = None) -> str:
    path = self.export_model(self.load_model(checkpoint),
                             default_export_dir(self.opts))
    logging.info("exported SavedModel to %s", path)
    return path

  def preflight(self) -> None:
    """Checks every input this run will read and every place it will write
    before any long work or any write; each check raises a one-line
    `UserError` naming the file or flag."""
    check_init_checkpoint(self.opts.train, will_train=self.opts.do_train)
    check_finetune_training(self.opts, self.tokenizer.vocab_size)
    check_finetune_export(self.opts, self.task)
    self.check_inputs()

  def run(self) -> dict:
    """Does what the options ask; returns `{"eval", "predictions",
    "export"}` for what ran."""
    self.preflight()
    result = {}
    if self.opts.do_train:
      if not self.train().is_chief:
        return result  # multi-worker: the chief evaluates and exports
      # Exported from the saved checkpoint, outside the training strategy.
      result["export"] = self.export()
    if self.opts.do_eval:
      result["eval"] = self.evaluate()
    if self.opts.do_predict:
      result["predictions"] = self.predict()
    return result
