"""Text classification / regression: train, evaluate, predict, export.

`run(opts)` does what the original `run_classifier.py` does with its flags:
features cached as TFRecords in `output_dir`, training with the shared loop
in `model_dir`, evaluation of the last (or every) checkpoint with the task's
official metric, predictions in the GLUE submission format, and a SavedModel
with feature and raw-text signatures.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional

import numpy as np
from absl import logging

from data_utils import classifier_data as cd
from data_utils.classifier_records import build_features, classifier_dataset
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf import metrics
from xlnet_tf.checkpoint import load_native_checkpoint
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer
from xlnet_tf.workflows.common import (checkpoint_step, run_inference,
                                       training_checkpoints, write_json_atomic,
                                       write_text_atomic)

# File names the GLUE server expects.
GLUE_SUBMISSION = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC",
                   "sts-b": "STS-B", "qqp": "QQP", "mnli": "MNLI-m",
                   "mnli-mm": "MNLI-mm", "qnli": "QNLI", "rte": "RTE",
                   "wnli": "WNLI"}


@dataclasses.dataclass(frozen=True)
class ClassifierOptions:
  """The workflow's settings (the original run_classifier flags)."""
  config: XLNetConfig
  run: RunOptions
  train: TrainOptions
  task_name: str
  data_dir: str
  output_dir: str
  spiece_model_file: str
  max_seq_length: int = 128
  is_regression: bool = False
  cls_scope: Optional[str] = None
  summary_type: str = "last"
  use_summ_proj: bool = True
  uncased: bool = False
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 8
  eval_batch_size: int = 32
  predict_batch_size: int = 32
  eval_split: str = "dev"
  eval_all_ckpt: bool = False
  predict_ckpt: Optional[str] = None
  predict_dir: Optional[str] = None
  predict_threshold: float = 0.0
  num_passes: int = 1
  shuffle_buffer: int = 2048
  overwrite_data: bool = False
  export_dir: Optional[str] = None
  generic: Optional[cd.GenericSpec] = None
  seed: int = 0


class Workflow:
  """Holds the tokenizer, labels and task of one run."""

  def __init__(self, opts: ClassifierOptions):
    self.opts = opts
    self.task_name = opts.task_name.lower()
    self.labels = cd.labels_of(self.task_name, opts.generic)
    self.regression = opts.is_regression or self.labels is None
    if not self.regression and not self.labels:
      raise cd.TaskDataError(f"task {self.task_name}: no label list (pass "
                             "--label_list or --is_regression)")
    self.tokenizer = SentencePieceTokenizer(opts.spiece_model_file,
                                            lower=opts.uncased)
    self.task = ClassifierTask(
        opts.config, opts.run, 1 if self.regression else len(self.labels),
        opts.cls_scope or self.task_name, self.regression, opts.summary_type,
        opts.use_summ_proj, opts.max_seq_length)

  def features(self, split: str, pad_to: int = 1, passes: int = 1) -> dict:
    examples = cd.read_examples(self.task_name, self.opts.data_dir, split,
                                self.opts.generic)
    if not examples:
      raise cd.TaskDataError(f"{self.opts.data_dir}: the {split} split of "
                             f"{self.task_name} has no example")
    settings = {"task": self.task_name, "split": split,
                "data_dir": os.path.abspath(self.opts.data_dir),
                "num_source_examples": len(examples),
                "spiece": os.path.abspath(self.opts.spiece_model_file),
                "uncased": self.opts.uncased,
                "generic": dataclasses.asdict(self.opts.generic)
                if self.opts.generic else None}
    info = build_features(examples, self.tokenizer.encode_ids,
                          self.opts.max_seq_length,
                          None if self.regression else self.labels,
                          self.opts.output_dir, settings,
                          pad_to_multiple=pad_to, num_passes=passes,
                          overwrite=self.opts.overwrite_data,
                          seed=self.opts.seed)
    info["examples"] = examples
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return classifier_dataset(
        info["path"], self.opts.max_seq_length, batch_size,
        regression=self.regression, is_training=training,
        shuffle_buffer=self.opts.shuffle_buffer, seed=self.opts.seed,
        skip_batches=skip, input_context=ctx)

  # ---------------------------------------------------------------- train
  def train(self) -> Trainer:
    opts = self.opts
    info = self.features("train", passes=opts.num_passes)
    logging.info("train: %d examples", info["num_examples"])
    trainer = Trainer(self.task, opts.train)
    replicas = trainer.strategy.num_replicas_in_sync
    if opts.train_batch_size % replicas:
      raise ValueError(f"train_batch_size ({opts.train_batch_size}) must be "
                       f"divisible by the {replicas} replicas")
    per_replica = opts.train_batch_size // replicas
    trainer.train(lambda ctx, skip: self.dataset(
        info, per_replica, training=True, skip=skip, ctx=ctx), per_replica)
    return trainer

  # ------------------------------------------------------------- predict
  def _outputs(self, checkpoint: str, info: dict, batch_size: int
               ) -> Dict[str, np.ndarray]:
    model = self.task.build_model()
    load_native_checkpoint(model, checkpoint)
    keys = ["score"] if self.regression else ["logits", "probabilities"]
    total = -(-info["num_records"] // batch_size)
    out = run_inference(lambda b: model(b, training=False),
                        self.dataset(info, batch_size),
                        keys + ["label", "is_real_example"], total,
                        what=f"{self.task_name} inference")
    real = out.pop("is_real_example") > 0
    return {k: v[real] for k, v in out.items()}

  def evaluate(self) -> dict:
    opts = self.opts
    info = self.features(opts.eval_split, pad_to=opts.eval_batch_size)
    ckpts = training_checkpoints(opts.train.model_dir)
    if not ckpts:
      raise ValueError(f"{opts.train.model_dir}: no checkpoint to evaluate")
    if not opts.eval_all_ckpt:
      ckpts = ckpts[-1:]
    results: List[dict] = []
    for ckpt in ckpts:
      out = self._outputs(ckpt, info, opts.eval_batch_size)
      if self.regression:
        result = metrics.regression_metrics(out["label"], out["score"])
      else:
        result = metrics.classification_metrics(
            self.task_name, out["label"], out["logits"].argmax(-1))
        result["majority_baseline"] = metrics.majority_baseline(out["label"])
      result.update(checkpoint=ckpt, step=checkpoint_step(ckpt),
                    num_examples=int(len(out["label"])))
      logging.info("eval %s step %d: %s", opts.eval_split, result["step"],
                   {k: round(v, 4) for k, v in result.items()
                    if isinstance(v, float)})
      results.append(result)
    best = max(results, key=lambda r: r["main"])
    summary = {"task": self.task_name, "split": opts.eval_split,
               "results": results, "best": best}
    write_json_atomic(os.path.join(opts.train.model_dir,
                                   f"eval_results_{opts.eval_split}.json"),
                      summary)
    return summary

  def predict(self) -> str:
    opts = self.opts
    info = self.features("test", pad_to=opts.predict_batch_size)
    ckpt = opts.predict_ckpt or (training_checkpoints(opts.train.model_dir)
                                 or [None])[-1]
    if ckpt is None:
      raise ValueError(f"{opts.train.model_dir}: no checkpoint to predict "
                       "with (or pass --predict_ckpt)")
    out = self._outputs(ckpt, info, opts.predict_batch_size)
    rows = ["index\tprediction"]
    examples = info["examples"]
    for k, example in enumerate(examples):
      if self.regression:
        value = f"{float(out['score'][k]):.3f}"
      else:
        probs = out["probabilities"][k]
        if opts.predict_threshold and len(self.labels) == 2:
          cls = int(probs[1] > opts.predict_threshold)
        else:
          cls = int(probs.argmax())
        value = self.labels[cls]
      rows.append(f"{example.guid}\t{value}")
    predict_dir = opts.predict_dir or os.path.join(opts.train.model_dir,
                                                   "predictions")
    name = GLUE_SUBMISSION.get(self.task_name, self.task_name)
    path = os.path.join(predict_dir, f"{name}.tsv")
    write_text_atomic(path, "\n".join(rows) + "\n")
    logging.info("wrote %d predictions to %s", len(examples), path)
    return path

  def export(self, model=None, checkpoint: Optional[str] = None) -> str:
    from xlnet_tf.export import export_classifier
    if model is None:
      model = self.task.build_model()
      load_native_checkpoint(model, checkpoint or training_checkpoints(
          self.opts.train.model_dir)[-1])
    export_dir = self.opts.export_dir or os.path.join(
        self.opts.train.model_dir, "saved_model")
    path = export_classifier(
        model, export_dir, self.opts.max_seq_length, self.regression,
        labels=None if self.regression else self.labels,
        sp_model_path=self.opts.spiece_model_file, lower=self.opts.uncased)
    logging.info("exported SavedModel to %s", path)
    return path


def run(opts: ClassifierOptions) -> dict:
  """Does what `opts` asks; returns `{"eval": ..., "predictions": path,
  "export": path}` for what ran."""
  flow = Workflow(opts)
  result = {}
  if opts.do_train:
    flow.train()
    # From the saved checkpoint, outside the training strategy.
    result["export"] = flow.export()
  if opts.do_eval:
    result["eval"] = flow.evaluate()
  if opts.do_predict:
    result["predictions"] = flow.predict()
  return result
