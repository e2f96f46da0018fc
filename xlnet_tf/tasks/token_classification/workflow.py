"""Token classification (named entities): the options and data hooks of
`run_ner.py` (model and loss: `model.py`, signatures: `serving.py`; data:
`data_utils/ner/`).

Files: `--train_file` / `--eval_file` / `--predict_file`, or in --data_dir
the split's file (`<split>.txt`, `.conll` or `.jsonl`; CoNLL-2003's names
`eng.train`, `eng.testa` for dev and `eng.testb` for test). Labels:
`--label_list`, else the training file's entity types; a training run
writes them to `model_dir/ner_labels.json`, which later runs read.
Evaluation scores the predictions as `conlleval` would on the prediction
file (gold as written in the input, predictions in the input's scheme),
overall and per type, next to the majority-per-word baseline (each word's
most frequent training tag). Predictions: the CoNLL layout (`word gold
predicted`) and JSONL (entities with character offsets) in
predict_dir, one tag for every input word, named after the input's whole
name (`eng.testb.predictions.conll`, `.predictions.jsonl`, and
`.results.json` for a tagged file).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from absl import logging

from data_utils import paths
from data_utils.atomic import write_json
from data_utils.errors import UsageError, UserError
from data_utils.ner import predictions as ner_predictions
from data_utils.ner.alignment import WordPieces
from data_utils.ner.features import NerFeatureSettings, merge_words
from data_utils.ner.reader import NerData, read_ner
from data_utils.ner.records import cached_ner_features, ner_dataset
from data_utils.ner.schemes import label_list
from data_utils.outputs import output_name
from data_utils.path_checks import check_store
from xlnet_tf.tasks.token_classification.metrics import (
    entity_metrics, majority_baseline_tags, majority_tags)
from xlnet_tf.tasks.token_classification.model import TokenClassificationTask
from xlnet_tf.tasks.token_classification.serving import export_token_classifier
from xlnet_tf.training import checkpoint_number
from xlnet_tf.finetuning.inference import run_inference
from xlnet_tf.finetuning.driver import FinetuneOptions, FinetuneWorkflow

LABELS_FILE = "ner_labels.json"
# CoNLL-2003's file of each split name.
_CONLL2003 = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}


@dataclasses.dataclass(frozen=True)
class NerOptions(FinetuneOptions):
  train_file: str = ""
  eval_file: str = ""
  predict_file: str = ""
  doc_stride: int = 64
  label_all_pieces: bool = False
  document_context: bool = False
  label_list: Optional[Tuple[str, ...]] = None
  tag_scheme: Optional[str] = None


class NerWorkflow(FinetuneWorkflow):
  """`labels` and `task` are built on first use; `preflight` asks for
  the labels before the driver's checks."""

  def __init__(self, opts: NerOptions):
    super().__init__(opts)
    self.settings = NerFeatureSettings(
        max_seq_length=opts.max_seq_length, doc_stride=opts.doc_stride,
        label_all_pieces=opts.label_all_pieces,
        document_context=opts.document_context, lower=opts.uncased)
    self.word_pieces = WordPieces(self.tokenizer)
    self._data: Dict[str, NerData] = {}

  @functools.cached_property
  def labels(self) -> List[str]:
    """The label list (`resolve_labels`); a `UserError` if it holds no
    entity type."""
    opts = self.opts
    labels = self.resolve_labels()
    if len(labels) < 2:
      source = (f"--label_list={','.join(opts.label_list)}"
                if opts.label_list else self.read(opts.train_split).path
                if opts.do_train else paths.join(opts.train.model_dir,
                                                 LABELS_FILE))
      raise UserError(f"{source}: labels {labels}: no entity type to "
                      "learn")
    return labels

  @functools.cached_property
  def task(self) -> TokenClassificationTask:
    """One class per label."""
    return TokenClassificationTask(self.opts.config, self.opts.run,
                                   len(self.labels), self.task_name,
                                   self.opts.max_seq_length)

  # Files and labels ------------------------------------------------------
  def split_file(self, split: str) -> str:
    """The file of `split` (see the module docstring)."""
    opts = self.opts
    given = {opts.train_split: opts.train_file, opts.eval_split:
             opts.eval_file, self.predict_split: opts.predict_file}
    flag = {opts.train_split: "train_file", opts.eval_split: "eval_file",
            self.predict_split: "predict_file"}
    if given.get(split):
      check_store(given[split], flag[split])
      if not paths.isfile(given[split]):
        raise UsageError(f"--{flag[split]}={given[split]}: no such file")
      return given[split]
    names = [f"{split}{ext}" for ext in (".txt", ".conll", ".jsonl")]
    names += [_CONLL2003[split]] if split in _CONLL2003 else []
    if opts.data_dir:
      check_store(opts.data_dir, "data_dir")
    for name in names:
      path = paths.join(opts.data_dir or "", name)
      if paths.isfile(path):
        return path
    where = f"--{flag[split]}" if split in flag else "a file"
    raise UsageError(f"--data_dir={opts.data_dir}: no file for split "
                     f"{split!r} ({', '.join(names)}); pass {where}")

  def read(self, split: str) -> NerData:
    if split not in self._data:
      # Only a file to predict may come without tags.
      data = read_ner(self.split_file(split), self.opts.tag_scheme,
                      untagged=split == self.predict_split)
      if not data.sentences:
        raise UserError(f"{data.path}: no sentence")
      if not data.tagged and split in (self.opts.train_split,
                                       self.opts.eval_split):
        raise UserError(f"{data.path}: no tags; the {split} split needs "
                        "them")
      self._data[split] = data
    return self._data[split]

  def resolve_labels(self) -> List[str]:
    """--label_list, else the training file's types, else the labels a
    training run wrote to model_dir (see the module docstring)."""
    opts = self.opts
    path = paths.join(opts.train.model_dir or "", LABELS_FILE)
    saved = None
    if paths.isfile(path):
      try:
        with paths.open_file(path, encoding="utf-8") as f:
          saved = json.load(f)["labels"]
      except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"{path}: not a label file written by run_ner.py "
                        "(JSON with \"labels\")") from None
    if opts.label_list:
      labels = label_list(opts.label_list)
    elif opts.do_train:
      data = self.read(opts.train_split)
      labels = label_list(t for s in data.sentences for t in s.tags)
    elif saved is not None:
      labels = list(saved)
    else:
      raise UsageError(f"no labels: pass --label_list or --do_train, or "
                       f"use a --model_dir holding {LABELS_FILE}")
    if saved is not None and saved != labels:
      raise UserError(f"{path}: the model in --model_dir was trained with "
                      f"labels {saved}, this run has {labels}; use another "
                      "--model_dir or the same labels")
    return labels

  def preflight(self) -> None:
    self.settings.validate()
    # The labels first: a run with none to learn stops before the driver's
    # checks (which build the task from them).
    logging.info("labels: %s", " ".join(self.labels))
    super().preflight()

  def check_inputs(self) -> None:
    opts = self.opts
    # Every file this run reads is read now (and kept): a bad line fails
    # before training or any write.
    label_map = {t: i for i, t in enumerate(self.labels)}
    if opts.do_train:
      for sentence in self.read(opts.train_split).sentences:
        for tag in sentence.tags:
          if tag not in label_map:
            raise UserError(f"{self._data[opts.train_split].path}:"
                            f"{sentence.line}: tag {tag} is not in the label "
                            f"list ({', '.join(self.labels)})")
    if opts.do_eval:
      self.read(opts.eval_split)
    if opts.do_predict:
      self.read(self.predict_split)

  def train(self):
    path = paths.join(self.opts.train.model_dir, LABELS_FILE)
    if not paths.exists(path):
      write_json(path, {"labels": self.labels})
    return super().train()

  # The driver's hooks ---------------------------------------------------
  def features(self, split: str, pad_to: int = 1, passes: int = 1,
               training: bool = False) -> dict:
    """Training features are labelled, shuffled and repeated `passes`
    times; the others unlabelled (scored per word) in file order."""
    data = self.read(split)
    info = cached_ner_features(
        data, self.word_pieces, self.labels if training else None,
        self.settings, self.opts.output_dir, split, training=training,
        pad_to_multiple=pad_to, num_passes=passes,
        overwrite=self.opts.overwrite_data, seed=self.opts.seed)
    info["data"] = data
    info["num_examples"] = len(data.sentences)
    return info

  def dataset(self, info: dict, batch_size: int, training: bool = False,
              skip: int = 0, ctx=None):
    return ner_dataset(info["path"], self.opts.max_seq_length, batch_size,
                       training=training,
                       shuffle_buffer=self.opts.shuffle_buffer,
                       seed=self.opts.seed, skip_batches=skip,
                       input_context=ctx)

  def predicted_tags(self, checkpoint: str, info: dict, batch_size: int
                     ) -> List[List[str]]:
    """Per sentence, one predicted tag per word, in the file's scheme."""
    model = self.load_model(checkpoint)

    def step(batch):
      logits = model(batch, training=False)["logits"]
      return {"predicted": tf.argmax(logits, -1, output_type=tf.int32)}

    out = run_inference(
        step, self.dataset(info, batch_size),
        ["predicted", "word_index", "sentence_index", "is_real_example"],
        -(-info["num_records"] // batch_size), what="ner inference")
    real = out["is_real_example"] > 0
    data: NerData = info["data"]
    ids = merge_words(out["sentence_index"][real], out["word_index"][real],
                      out["predicted"][real],
                      [len(s.words) for s in data.sentences])
    return [data.restore([self.labels[i] for i in row]) for row in ids]

  def check_evaluable(self, info: dict) -> None:
    del info  # `read` refuses an evaluation file without tags

  def score(self, data: NerData, predicted: List[List[str]]) -> dict:
    """conlleval's scores of `predicted` against the gold as written."""
    result = entity_metrics([s.source_tags for s in data.sentences],
                            predicted)
    if self._has_split(self.opts.train_split):
      train = self.read(self.opts.train_split)
      table = majority_tags([s.words for s in train.sentences],
                            [s.tags for s in train.sentences])
      baseline = [data.restore(tags) for tags in majority_baseline_tags(
          table, [s.words for s in data.sentences])]
      base = entity_metrics([s.source_tags for s in data.sentences],
                            baseline)
      result["majority_baseline_f1"] = base["f1"]
    logging.info("entity F1 %.4f (P %.4f R %.4f), token accuracy %.4f; "
                 "per type: %s", result["f1"], result["precision"],
                 result["recall"], result["accuracy"],
                 {t: round(m["f1"], 4) for t, m in result["per_type"].items()})
    return result

  def _has_split(self, split: str) -> bool:
    try:
      self.split_file(split)
    except UserError:
      return False
    return True

  def evaluate_checkpoint(self, checkpoint: str, info: dict) -> dict:
    predicted = self.predicted_tags(checkpoint, info,
                                    self.opts.eval_batch_size)
    return self.score(info["data"], predicted)

  def eval_fields(self, info: dict) -> dict:
    data: NerData = info["data"]
    return {"file": data.path, "scheme": data.scheme, "labels": self.labels,
            "num_words": data.n_words, "windows": info["stats"]}

  def prediction_source(self) -> str:
    return self.split_file(self.predict_split)

  def prediction_names(self) -> List[str]:
    source = self.prediction_source()
    names = [output_name(source, ".predictions.conll"),
             output_name(source, ".predictions.jsonl")]
    if self.read(self.predict_split).tagged:
      names.append(output_name(source, ".results.json"))
    return names

  def write_predictions(self, checkpoint: str, info: dict) -> str:
    data: NerData = info["data"]
    predicted = self.predicted_tags(checkpoint, info,
                                    self.opts.predict_batch_size)
    conll, jsonl, *results = self.prediction_names()
    docstart = not data.path.endswith(".jsonl")
    path = self.write_prediction(conll, "\n".join(
        ner_predictions.conll_lines(data, predicted, with_docstart=docstart,
                                    with_gold=data.tagged)) + "\n")
    self.write_prediction(jsonl, "\n".join(ner_predictions.jsonl_rows(
        data, predicted, with_gold=data.tagged)) + "\n")
    if results:
      self.write_prediction(results[0], dict(
          self.score(data, predicted), checkpoint=checkpoint,
          step=checkpoint_number(checkpoint), file=data.path))
    logging.info("wrote predictions for %d words to %s", data.n_words, path)
    return path

  def export_model(self, model, export_dir, text):
    # Both exports carry the SentencePiece model (batch inference tokenizes
    # in Python); only the text one tokenizes in the graph.
    return export_token_classifier(
        model, export_dir, self.opts.max_seq_length, self.opts.doc_stride,
        self.labels, sp_model_path=self.opts.spiece_model_file,
        lower=self.opts.uncased, text_signatures=text,
        document_context=self.opts.document_context)


def run(opts: NerOptions) -> dict:
  return NerWorkflow(opts).run()
