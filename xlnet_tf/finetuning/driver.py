"""The fine-tuning driver every task shares: preflight, training with the
shared loop, evaluation of the last (or every) checkpoint, predictions,
versioned exports (`export/layout.py`). A task's workflow
(`tasks/<task>/workflow.py`) supplies its options, its `TrainTask`, its
features, metrics, prediction files and export; the model and loss live in
`tasks/<task>/model.py`, the signatures in `tasks/<task>/serving.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

from absl import logging

from data_utils import paths
from data_utils.errors import UsageError, UserError, check_positive
from data_utils.outputs import check_outputs, write_output
from data_utils.path_checks import check_writable_dir
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.io import (check_init_checkpoint, load_checkpoint,
                         load_native_checkpoint)
from xlnet_tf.config import RunOptions, XLNetConfig, check_vocab
from xlnet_tf.export.layout import (check_export_root, prepare_export_root,
                                    version_dir, write_tflite)
from xlnet_tf.training import (TrainOptions, Trainer, TrainTask,
                               checkpoint_number, training_checkpoints,
                               write_eval_scalars)


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
  # Replace prediction and result files that exist but are not this
  # project's unchanged output (`data_utils/outputs.py`).
  overwrite: bool = False
  export_dir: Optional[str] = None
  export_tflite: bool = False
  seed: int = 0


def default_export_dir(opts) -> str:
  """The root of a fine-tuning run's (`FinetuneOptions`) versioned exports
  (`export/layout.py`)."""
  return opts.export_dir or paths.join(opts.train.model_dir, "saved_model")


def default_predict_dir(opts) -> str:
  """Where a fine-tuning run (`FinetuneOptions`) writes its predictions."""
  return opts.predict_dir or paths.join(opts.train.model_dir, "predictions")


def check_finetune_export(opts, task) -> None:
  """The preflight check of a fine-tuning run's exports (only a training
  run exports): see `check_export_root`."""
  if not opts.do_train:
    if opts.export_tflite:
      raise UsageError("--export_tflite: a run exports after training; add "
                       "--do_train")
    return
  model_dir = opts.train.model_dir
  check_export_root(default_export_dir(opts), task.export_kind, keep={
      "model_dir": model_dir, "output_dir": opts.output_dir,
      "data_dir": opts.data_dir,
      "predict_dir": default_predict_dir(opts),
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
  """The steps (`run`: preflight, train, export, evaluate, predict) around
  a task's hooks. A task's workflow sets `task` (an `XLNetTask`) and
  implements the hooks below; `RecordsWorkflow` (finetuning/records.py)
  implements the data hooks for tasks on the classifier's feature records."""

  task: TrainTask
  predict_split: str = "test"
  # Whether the task has raw-text signatures (a `text` export beside the
  # features one).
  text_export: bool = True

  def __init__(self, opts: FinetuneOptions):
    self.opts = opts
    self.task_name = opts.task_name.lower()
    self.tokenizer = SentencePieceTokenizer(opts.spiece_model_file,
                                            lower=opts.uncased)

  # Hooks ----------------------------------------------------------------
  def check_inputs(self) -> None:
    """The task's flags and every data file this run will read (preflight):
    a one-line `UserError` naming the flag or file."""

  def features(self, split: str, pad_to: int = 1, passes: int = 1,
               training: bool = False) -> dict:
    """The cached features of `split`: at least `num_examples`; training
    records (`training`: what `train` reads) repeated `passes` times,
    others padded to `pad_to` records."""
    raise NotImplementedError

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    """The `tf.data` batches of `features(...)`'s records."""
    raise NotImplementedError

  def check_evaluable(self, info: dict) -> None:
    """A one-line `UserError` if the evaluation split has no gold labels."""

  def evaluate_checkpoint(self, checkpoint: str, info: dict) -> dict:
    """Metrics of `checkpoint` on `info`; "main" is the one to maximize."""
    raise NotImplementedError

  def after_evaluate(self, info: dict, best: dict) -> None:
    """Runs once the best checkpoint is known (e.g. writes its answers)."""

  def write_predictions(self, checkpoint: str, info: dict) -> str:
    """Writes the predictions of `checkpoint` on `info` (each file with
    `write_prediction`); returns the path of the main one."""
    raise NotImplementedError

  def prediction_source(self) -> str:
    """The input the predictions are made from (the file, or for a task
    read from --data_dir, its split there)."""
    return paths.join(self.opts.data_dir or "", self.predict_split)

  def prediction_names(self) -> List[str]:
    """Every file name `write_predictions` may write in predict_dir."""
    raise NotImplementedError

  def result_names(self) -> List[str]:
    """Every file name evaluation writes in predict_dir besides model_dir's
    `eval_results_<split>.json` (SQuAD writes its answers there)."""
    return []

  def export_model(self, model, export_dir: str, text: bool) -> str:
    """Exports `model` to the version directory `export_dir`: the features
    signatures, and with `text` the raw-text ones too. Returns the path."""
    raise NotImplementedError

  # Steps ----------------------------------------------------------------
  def train(self) -> Trainer:
    opts = self.opts
    info = self.features(opts.train_split, passes=opts.num_passes,
                         training=True)
    logging.info("train: %d examples", info["num_examples"])
    trainer = Trainer(self.task, opts.train, init_fn=load_checkpoint)
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

  def newest_checkpoint(self) -> str:
    """The newest checkpoint in model_dir (a one-line UserError if none)."""
    checkpoint = (training_checkpoints(self.opts.train.model_dir)
                  or [None])[-1]
    if checkpoint is None:
      raise UserError(f"{self.opts.train.model_dir}: no checkpoint (train "
                      "first, or pass a checkpoint)")
    return checkpoint

  def load_model(self, checkpoint: Optional[str] = None):
    """The task model with the weights of `checkpoint` (default: newest)."""
    model = self.task.build_model()
    load_native_checkpoint(model, checkpoint or self.newest_checkpoint())
    return model

  def evaluate(self) -> dict:
    """Scores the newest (or, with eval_all_ckpt, every) checkpoint; writes
    `eval_results_<split>.json` to model_dir, and each checkpoint's metrics
    as TensorBoard scalars at its step to `model_dir/eval_<split>`."""
    opts = self.opts
    info = self.features(opts.eval_split, pad_to=opts.eval_batch_size)
    self.check_evaluable(info)
    ckpts = training_checkpoints(opts.train.model_dir)
    if not ckpts:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to evaluate")
    results: List[dict] = []
    for ckpt in ckpts if opts.eval_all_ckpt else ckpts[-1:]:
      result = self.evaluate_checkpoint(ckpt, info)
      result.update(checkpoint=ckpt, step=checkpoint_number(ckpt),
                    num_examples=info["num_examples"])
      logging.info("eval %s step %d: %s", opts.eval_split, result["step"],
                   {k: round(v, 4) for k, v in result.items()
                    if isinstance(v, float)})
      results.append(result)
      write_eval_scalars(opts.train.model_dir, opts.eval_split,
                         result["step"], result)
    summary = {"task": self.task_name, "split": opts.eval_split,
               **self.eval_fields(info), "results": results,
               "best": max(results, key=lambda r: r["main"])}
    write_output(self.eval_results_path(), summary, "model_dir",
                 opts.overwrite)
    self.after_evaluate(info, summary["best"])
    return summary

  def eval_fields(self, info: dict) -> dict:
    """What the evaluation summary says besides task, split and results."""
    return {}

  def eval_results_path(self) -> str:
    return paths.join(self.opts.train.model_dir,
                      f"eval_results_{self.opts.eval_split}.json")

  def predict(self, split: Optional[str] = None) -> str:
    opts = self.opts
    info = self.features(split or self.predict_split,
                         pad_to=opts.predict_batch_size)
    ckpt = opts.predict_ckpt or (training_checkpoints(opts.train.model_dir)
                                 or [None])[-1]
    if ckpt is None:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to predict "
                      "with (or pass --predict_ckpt)")
    return self.write_predictions(ckpt, info)

  def predict_dir(self) -> str:
    return default_predict_dir(self.opts)

  def write_prediction(self, name: str, data) -> str:
    """Writes `data` (text, or JSON for a `.json` name) as `name` in
    predict_dir, atomically, where `check_outputs` allows; returns the path."""
    source = self.prediction_source()
    return write_output(paths.join(self.predict_dir(), name), data,
                        "predict_dir", self.opts.overwrite, source, [source])

  def check_output_files(self) -> None:
    """The preflight of every prediction and result file this run writes:
    none may replace an input or a file this project did not write
    (`data_utils/outputs.py`)."""
    opts = self.opts
    names = self.prediction_names() if opts.do_predict else []
    names += self.result_names() if opts.do_eval else []
    if names:
      source = self.prediction_source()
      check_outputs([paths.join(self.predict_dir(), n)
                     for n in dict.fromkeys(names)], "predict_dir",
                    opts.overwrite, source, [source])
    if opts.do_eval:
      check_outputs([self.eval_results_path()], "model_dir", opts.overwrite)

  def export(self, checkpoint: Optional[str] = None) -> Dict[str, str]:
    """Exports `checkpoint` (default: newest) as version `<step>` of the
    features export, the raw-text export (`text_export`) and, with
    --export_tflite, the TFLite files. Returns `{servable: directory}`."""
    checkpoint = checkpoint or self.newest_checkpoint()
    root, export_kind = default_export_dir(self.opts), self.task.export_kind
    step = checkpoint_number(checkpoint)
    prepare_export_root(root, export_kind)
    model = self.load_model(checkpoint)
    exports = {"features": self.export_model(
        model, version_dir(root, "features", step), text=False)}
    if self.text_export:
      exports["text"] = self.export_model(
          model, version_dir(root, "text", step), text=True)
    if self.opts.export_tflite:
      exports["tflite"] = write_tflite(
          exports["features"], version_dir(root, "tflite", step), export_kind)
    for servable, path in exports.items():
      logging.info("exported %s (step %d) to %s", servable, step, path)
    return exports

  def preflight(self) -> None:
    """Checks every input this run will read and every place it will write
    before any long work or any write; each check raises a one-line
    `UserError` naming the file or flag."""
    check_init_checkpoint(self.opts.train, will_train=self.opts.do_train,
                          config=self.opts.config)
    check_finetune_training(self.opts, self.tokenizer.vocab_size)
    check_finetune_export(self.opts, self.task)
    self.check_inputs()
    self.check_output_files()

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
