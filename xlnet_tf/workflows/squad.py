"""SQuAD v1.1 / v2.0 span extraction on the shared fine-tuning workflow.

Training reads `train_file`, evaluation and prediction `predict_file`
(features and records: `data_utils.squad_data`). Inference keeps, per
feature, the beam `start_top_log_probs / start_top_index [S]`,
`end_top_log_probs / end_top_index [S * E]` and `cls_logits []`, which
`data_utils.squad_eval.predict_answers` turns into answers. Prediction files,
as the original: `predictions.json` (best span of every question),
`nbest_predictions.json`, `null_odds.json` (smallest answer-class logit of a
question's windows), and for v2.0 `predictions_best_thresh.json` (no answer
where the null odds exceed the best-F1 threshold). Metrics (when the file
has answers) are the original's plus the official script's; the checkpoint
score is `target_eval_key`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
from absl import logging

from data_utils import squad_data as sd
from data_utils import squad_eval as se
from data_utils.errors import UsageError, UserError, check_positive
from xlnet_tf.export import export_squad
from xlnet_tf.tasks import SquadTask
from xlnet_tf.training import checkpoint_number
from xlnet_tf.workflows.common import (run_inference, training_checkpoints,
                                       write_json_atomic)
from xlnet_tf.workflows.finetune import FinetuneOptions, FinetuneWorkflow

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
  output_keys = ("start_top_log_probs", "start_top_index",
                 "end_top_log_probs", "end_top_index", "cls_logits")

  def __init__(self, opts: SquadOptions):
    super().__init__(opts)
    if opts.target_eval_key not in TARGET_KEYS:
      raise UserError(f"target_eval_key must be one of {TARGET_KEYS}, got "
                      f"{opts.target_eval_key!r}")
    self.settings = sd.FeatureSettings(
        max_seq_length=opts.max_seq_length, doc_stride=opts.doc_stride,
        max_query_length=opts.max_query_length, uncased=opts.uncased,
        original_piece_snapping=opts.original_piece_snapping,
        split_digits=opts.split_digits)
    self.settings.validate()
    self.task = SquadTask(opts.config, opts.run, opts.start_n_top,
                          opts.end_n_top, opts.max_seq_length)
    self._outputs_cache: Dict[str, Dict[str, np.ndarray]] = {}

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
      if not os.path.isfile(path):
        raise UsageError(f"--{flag}={path}: no such file (needed by "
                         f"{action})")
    # The file to answer is read now (it is small): a fault in it fails
    # before training and before its features are built.
    if any(split != opts.train_split for _, split in needed):
      data = sd.read_squad(opts.predict_file)
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

  def features(self, split: str, pad_to: int = 1, passes: int = 1) -> dict:
    path, training = self.source(split)
    data = sd.read_squad(path, is_training=training)
    info = sd.cached_features(
        data, self.tokenizer, self.settings, self.opts.output_dir,
        "train" if training else "predict", training,
        num_proc=self.opts.num_proc, overwrite=self.opts.overwrite_data,
        seed=self.opts.seed)
    info["data"] = data
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return sd.squad_dataset(info["path"], self.opts.max_seq_length,
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
          list(self.output_keys) + ["unique_ids"], total,
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
      info["meta"] = sd.read_feature_meta(info["path"])
    return se.predict_answers(
        info["data"].examples, info["meta"], results, self.opts.n_best_size,
        self.opts.max_answer_length, self.opts.original_off_by_one)

  def metrics(self, predictions, null_odds, data: sd.SquadData) -> dict:
    result = se.squad_metrics(data.gold(), predictions, null_odds,
                              data.version)
    if self.opts.target_eval_key not in result:
      raise UserError(f"target_eval_key {self.opts.target_eval_key!r} is "
                      f"not a SQuAD {data.version} metric "
                      f"({sorted(result)})")
    result["main"] = result[self.opts.target_eval_key]
    return result

  def write_predictions(self, directory: str, predictions, nbest, null_odds,
                        metrics: Optional[dict], version: str) -> str:
    write_json_atomic(os.path.join(directory, "predictions.json"),
                      predictions)
    write_json_atomic(os.path.join(directory, "nbest_predictions.json"),
                      nbest)
    write_json_atomic(os.path.join(directory, "null_odds.json"), null_odds)
    if metrics is not None and version.startswith("2"):
      write_json_atomic(
          os.path.join(directory, "predictions_best_thresh.json"),
          se.apply_threshold(predictions, null_odds,
                             metrics["best_f1_thresh"]))
    if metrics is not None:
      write_json_atomic(os.path.join(directory, "results.json"), metrics)
    logging.info("wrote %d predictions to %s", len(predictions), directory)
    return os.path.join(directory, "predictions.json")

  def predict_dir(self) -> str:
    return self.opts.predict_dir or os.path.join(self.opts.train.model_dir,
                                                 "predictions")

  def evaluate(self) -> dict:
    opts = self.opts
    info = self.features(opts.eval_split)
    if not info["data"].labeled:
      raise UserError(f"{info['data'].path}: some questions have no answer "
                      "(nor is_impossible): nothing to evaluate against; "
                      "use --do_predict")
    ckpts = training_checkpoints(opts.train.model_dir)
    if not ckpts:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to evaluate")
    results: List[dict] = []
    best_answers = None
    for ckpt in ckpts if opts.eval_all_ckpt else ckpts[-1:]:
      answers = self.answers(self.outputs(ckpt, info, opts.eval_batch_size),
                             info)
      result = self.metrics(answers[0], answers[2], info["data"])
      result.update(checkpoint=ckpt, step=checkpoint_number(ckpt),
                    num_examples=len(info["data"].examples),
                    num_features=info["num_features"])
      logging.info("eval step %d: %s", result["step"],
                   {k: round(v, 4) for k, v in result.items()
                    if isinstance(v, float)})
      if not results or result["main"] > max(r["main"] for r in results):
        best_answers = (answers, result)
      results.append(result)
    summary = {"task": "squad", "split": opts.eval_split,
               "version": info["data"].version,
               "target_eval_key": opts.target_eval_key, "results": results,
               "best": max(results, key=lambda r: r["main"])}
    write_json_atomic(os.path.join(opts.train.model_dir,
                                   f"eval_results_{opts.eval_split}.json"),
                      summary)
    (predictions, nbest, null_odds), metrics = best_answers
    self.write_predictions(self.predict_dir(), predictions, nbest, null_odds,
                           metrics, info["data"].version)
    return summary

  def predict(self, split: str = None) -> str:
    opts = self.opts
    info = self.features(split or opts.eval_split)
    ckpt = opts.predict_ckpt or (training_checkpoints(opts.train.model_dir)
                                 or [None])[-1]
    if ckpt is None:
      raise UserError(f"{opts.train.model_dir}: no checkpoint to predict "
                      "with (or pass --predict_ckpt)")
    predictions, nbest, null_odds = self.answers(
        self.outputs(ckpt, info, opts.predict_batch_size), info)
    metrics = None
    if info["data"].labeled:
      metrics = self.metrics(predictions, null_odds, info["data"])
      metrics.update(checkpoint=ckpt, step=checkpoint_number(ckpt))
    return self.write_predictions(self.predict_dir(), predictions, nbest,
                                  null_odds, metrics, info["data"].version)

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

  def export_model(self, model, export_dir):
    return export_squad(model, export_dir, self.opts.max_seq_length,
                        self.opts.start_n_top, self.opts.end_n_top)


def run(opts: SquadOptions) -> dict:
  return SquadWorkflow(opts).run()
