"""SQuAD v1.1 / v2.0 span extraction on the shared fine-tuning workflow.

Training reads `train_file`, evaluation and prediction `predict_file`
(features and records: `data_utils/squad/`). Inference keeps, per
feature, the beam `start_top_log_probs / start_top_index [S]`,
`end_top_log_probs / end_top_index [S * E]` and `cls_logits []`, which
`data_utils.squad.evaluate.predict_answers` turns into answers. Prediction
files, the original's, each named after predict_file's whole name
(`dev-v1.1.json.predictions.json`): `.predictions.json` (best span of every
question), `.nbest_predictions.json`, `.null_odds.json` (smallest
answer-class logit of a question's windows), for v2.0
`.predictions_best_thresh.json` (no answer where the null odds exceed the
best-F1 threshold), and `.results.json`, the metrics (when the file has
answers): the original's plus the official script's; the checkpoint score
is `target_eval_key`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np
from absl import logging

from data_utils.squad import evaluate as se
from data_utils.squad.features import FeatureSettings
from data_utils.squad.reader import SquadData, read_squad
from data_utils.squad.records import (cached_features, read_feature_meta,
                                      squad_dataset)
from data_utils.errors import UsageError, UserError, check_positive
from data_utils import paths
from data_utils.outputs import output_name
from data_utils.path_checks import check_store
from xlnet_tf.tasks.squad.model import SquadTask
from xlnet_tf.tasks.squad.serving import SQUAD_OUTPUTS, export_squad
from xlnet_tf.training import checkpoint_number
from xlnet_tf.finetuning.inference import run_inference
from xlnet_tf.finetuning.driver import FinetuneOptions, FinetuneWorkflow

# The prediction files, in `prediction_names`' order.
ANSWER_FILES = ("predictions", "nbest_predictions", "null_odds",
                "predictions_best_thresh", "results")
TARGET_KEYS = ("best_f1", "best_exact", "has_ans_f1", "has_ans_exact", "f1",
               "exact_match", "exact")


@dataclasses.dataclass(frozen=True)
class SquadOptions(FinetuneOptions):
  train_file: str = ""
  predict_file: str = ""
  max_query_length: int = 64
  doc_stride: int = 128
  max_answer_length: int = 64
  n_best_size: int = 5
  start_n_top: int = 5
  end_n_top: int = 5
  target_eval_key: str = "best_f1"
  num_proc: int = 1
  original_off_by_one: bool = False
  original_piece_snapping: bool = False
  split_digits: bool = True


class SquadWorkflow(FinetuneWorkflow):
  """Reads train_file / predict_file; answers and scores the predictions
  of predict_file (its evaluation split)."""
  text_export = False  # the features signature only

  def __init__(self, opts: SquadOptions):
    super().__init__(opts)
    if opts.target_eval_key not in TARGET_KEYS:
      raise UserError(f"target_eval_key must be one of {TARGET_KEYS}, got "
                      f"{opts.target_eval_key!r}")
    self.settings = FeatureSettings(
        max_seq_length=opts.max_seq_length, doc_stride=opts.doc_stride,
        max_query_length=opts.max_query_length, uncased=opts.uncased,
        original_piece_snapping=opts.original_piece_snapping,
        split_digits=opts.split_digits)
    self.settings.validate()
    self.task = SquadTask(opts.config, opts.run, opts.start_n_top,
                          opts.end_n_top, opts.max_seq_length)
    self._outputs_cache: Dict[str, Dict[str, np.ndarray]] = {}
    self._answers: Dict[str, tuple] = {}

  @property
  def predict_split(self) -> str:
    return self.opts.eval_split

  def check_inputs(self) -> None:
    opts = self.opts
    for flag in ("max_answer_length", "n_best_size", "start_n_top",
                 "end_n_top", "num_proc"):
      check_positive(getattr(opts, flag), flag)
    for flag in ("start_n_top", "end_n_top"):
      if getattr(opts, flag) > opts.max_seq_length:
        raise UsageError(f"--{flag}={getattr(opts, flag)}: must be at most "
                         f"--max_seq_length={opts.max_seq_length}")
    # --do_predict answers the evaluation split (see `predict`).
    needed = [(action, split) for action, split, on in (
        ("--do_train", opts.train_split, opts.do_train),
        ("--do_eval", opts.eval_split, opts.do_eval),
        ("--do_predict", opts.eval_split, opts.do_predict)) if on]
    for action, split in needed:
      flag = "train_file" if split == opts.train_split else "predict_file"
      path = getattr(opts, flag)
      if not path:
        raise UsageError(f"--{flag} is required by {action}")
      check_store(path, flag)
      if not paths.isfile(path):
        raise UsageError(f"--{flag}={path}: no such file (needed by "
                         f"{action})")
    # The file to answer is read now (it is small): a fault in it fails
    # before training and before its features are built.
    if any(split != opts.train_split for _, split in needed):
      data = read_squad(opts.predict_file)
      if opts.do_eval and opts.eval_split != opts.train_split and \
          not data.labeled:
        raise UserError(f"{data.path}: some questions have no answer (nor "
                        "is_impossible): nothing to evaluate against; use "
                        "--do_predict")

  # Features -------------------------------------------------------------
  def source(self, split: str) -> Tuple[str, bool]:
    """The file of `split` (the training split reads train_file, any other
    predict_file) and whether it is for training."""
    training = split == self.opts.train_split
    path = self.opts.train_file if training else self.opts.predict_file
    if not path:
      raise UserError(f"the {split} split needs --"
                      f"{'train_file' if training else 'predict_file'}")
    return path, training

  def features(self, split: str, pad_to: int = 1, passes: int = 1,
               training: bool = False) -> dict:
    del training  # the split says it (`source`): train_file is for training
    path, training = self.source(split)
    data = read_squad(path, is_training=training)
    info = cached_features(
        data, self.tokenizer, self.settings, self.opts.output_dir,
        "train" if training else "predict", training,
        num_proc=self.opts.num_proc, overwrite=self.opts.overwrite_data,
        seed=self.opts.seed)
    info["data"] = data
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return squad_dataset(info["path"], self.opts.max_seq_length,
                         batch_size, is_training=training,
                         shuffle_buffer=self.opts.shuffle_buffer,
                         seed=self.opts.seed, skip_batches=skip,
                         input_context=ctx)

  # Inference and answers ------------------------------------------------
  def outputs(self, checkpoint: str, info: dict, batch_size: int
              ) -> Dict[str, np.ndarray]:
    key = f"{checkpoint}|{info['path']}"
    if key not in self._outputs_cache:
      model = self.load_model(checkpoint)
      total = -(-info["num_features"] // batch_size)
      self._outputs_cache[key] = run_inference(
          lambda b: model(b, training=False), self.dataset(info, batch_size),
          list(SQUAD_OUTPUTS) + ["unique_ids"], total,
          what="squad inference")
    return self._outputs_cache[key]

  def answers(self, out: Dict[str, np.ndarray], info: dict):
    """`(predictions, nbest, null_odds)` of inference outputs."""
    results = {}
    for k, uid in enumerate(out["unique_ids"]):
      results[int(uid)] = se.RawResult(
          int(uid), out["start_top_log_probs"][k], out["start_top_index"][k],
          out["end_top_log_probs"][k], out["end_top_index"][k],
          float(out["cls_logits"][k]))
    if "meta" not in info:
      info["meta"] = read_feature_meta(info["path"])
    return se.predict_answers(
        info["data"].examples, info["meta"], results, self.opts.n_best_size,
        self.opts.max_answer_length, self.opts.original_off_by_one)

  def metrics(self, predictions, null_odds, data: SquadData) -> dict:
    result = se.squad_metrics(data.gold(), predictions, null_odds,
                              data.version)
    if self.opts.target_eval_key not in result:
      raise UserError(f"target_eval_key {self.opts.target_eval_key!r} is "
                      f"not a SQuAD {data.version} metric "
                      f"({sorted(result)})")
    result["main"] = result[self.opts.target_eval_key]
    return result

  def prediction_source(self) -> str:
    return self.opts.predict_file

  def prediction_names(self) -> List[str]:
    """The original's files, each named after predict_file's whole name
    (see the module docstring)."""
    return [output_name(self.opts.predict_file, f".{name}.json")
            for name in ANSWER_FILES]

  def result_names(self) -> List[str]:
    return self.prediction_names()  # the best checkpoint's answers

  def write_answers(self, predictions, nbest, null_odds,
                    metrics: Optional[dict], version: str) -> str:
    """The prediction files (`prediction_names`) in predict_dir; returns
    the path of the predictions."""
    names = dict(zip(ANSWER_FILES, self.prediction_names()))
    path = self.write_prediction(names["predictions"], predictions)
    self.write_prediction(names["nbest_predictions"], nbest)
    self.write_prediction(names["null_odds"], null_odds)
    if metrics is not None and version.startswith("2"):
      self.write_prediction(names["predictions_best_thresh"],
                            se.apply_threshold(predictions, null_odds,
                                               metrics["best_f1_thresh"]))
    if metrics is not None:
      self.write_prediction(names["results"], metrics)
    logging.info("wrote %d predictions to %s", len(predictions), path)
    return path

  # The driver's hooks ---------------------------------------------------
  def check_evaluable(self, info: dict) -> None:
    if not info["data"].labeled:
      raise UserError(f"{info['data'].path}: some questions have no answer "
                      "(nor is_impossible): nothing to evaluate against; "
                      "use --do_predict")

  def evaluate_checkpoint(self, checkpoint: str, info: dict) -> dict:
    answers = self.answers(
        self.outputs(checkpoint, info, self.opts.eval_batch_size), info)
    result = self.metrics(answers[0], answers[2], info["data"])
    result["num_features"] = info["num_features"]
    # The best checkpoint's answers are written once it is known.
    self._answers[checkpoint] = (answers, result)
    return result

  def eval_fields(self, info: dict) -> dict:
    return {"version": info["data"].version,
            "target_eval_key": self.opts.target_eval_key}

  def after_evaluate(self, info: dict, best: dict) -> None:
    (predictions, nbest, null_odds), metrics = \
        self._answers[best["checkpoint"]]
    self.write_answers(predictions, nbest, null_odds, metrics,
                       info["data"].version)

  def write_predictions(self, checkpoint: str, info: dict) -> str:
    predictions, nbest, null_odds = self.answers(
        self.outputs(checkpoint, info, self.opts.predict_batch_size), info)
    metrics = None
    if info["data"].labeled:
      metrics = self.metrics(predictions, null_odds, info["data"])
      metrics.update(checkpoint=checkpoint,
                     step=checkpoint_number(checkpoint))
    return self.write_answers(predictions, nbest, null_odds, metrics,
                              info["data"].version)

  def prepro(self) -> dict:
    """The original's --do_prepro: builds the training records (and the
    prediction records when a predict_file is given)."""
    out = {"train": self.features(self.opts.train_split)}
    if self.opts.predict_file:
      out["predict"] = self.features(self.opts.eval_split)
    for name, info in out.items():
      logging.info("%s: %d features in %s (%s)", name, info["num_features"],
                   info["path"], info["stats"])
    return out

  def export_model(self, model, export_dir, text=False):
    return export_squad(model, export_dir, self.opts.max_seq_length,
                        self.opts.start_n_top, self.opts.end_n_top)


def run(opts: SquadOptions) -> dict:
  return SquadWorkflow(opts).run()
