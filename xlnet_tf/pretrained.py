"""The task model a checkpoint describes, built and loaded; HF export.

Sits above the task models (it builds them) and `xlnet_tf.io` (which moves
the weights). A model kind is "base" (the encoder alone) or a task's name
(`xlnet_tf/tasks/registry.py`: classification, regression,
multiple_choice, squad, token_classification, lm), whose spec gives its
class and HF architecture.

  model, report = load_hf_model("xlnet-base-cased/")   # the matching model
  save_hf_weights(model, "exported/")                  # for transformers
  save_hf_weights(tagger, "ner/", labels=["O", "B-LOC", "I-LOC"])
  report.spec.head["labels"]     # class names read from id2label, if any
  lm, report = load_language_model("pretrain/model_dir")  # any layout
  loaded = load("xlnet_cased_L-12_H-768_A-12/")   # a model folder, once
  loaded.model, loaded.tokenizer, loaded.config
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from data_utils import paths
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.checkpoint_files import CheckpointError
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.io.hf import HFSaveReport, load_hf_weights, write_hf_weights
from xlnet_tf.io.hf_config import HF_CONFIG, config_from_hf, config_to_hf
from xlnet_tf.io.hf_files import is_hf_directory, read_hf_config
from xlnet_tf.io.load import load_checkpoint
from xlnet_tf.model_folder import resolve
from xlnet_tf.tasks.language_model.loading import (  # noqa: F401 (API)
    file_beside, language_model_config, load_language_model)
from xlnet_tf.tasks.registry import TASKS, spec_of, task_names, task_spec

BASE = "base"  # the encoder alone, saved as HF's XLNetModel
BASE_ARCHITECTURE = "XLNetModel"


def model_kinds():
  """Every value `build_model` takes: "base", then the tasks' names."""
  return (BASE,) + task_names()


def build_model(model: str, config: XLNetConfig,
                options: Optional[RunOptions] = None, **head):
  """A fresh model of model kind `model` (see `model_kinds`); `head` holds
  its constructor arguments (n_class, task_name, summary_type,
  use_summ_proj, tie_weight, n_choice, start_n_top, end_n_top); those
  another model kind takes (and `labels`, which none takes) are ignored."""
  if model == BASE:
    return XLNetModel(config, options)
  try:
    spec = task_spec(model)
  except ValueError:
    raise ValueError(f"unknown model {model!r}; use one of "
                     f"{', '.join(model_kinds())}") from None
  return spec.build(XLNetModel(config, options), **head)


def model_kind(obj) -> str:
  """The model kind of a model object (see `model_kinds`)."""
  if isinstance(obj, XLNetModel):
    return BASE
  try:
    return spec_of(obj).name
  except ValueError:
    raise CheckpointError(
        f"HuggingFace weights: a {type(obj).__name__} has no HF "
        "counterpart; use XLNetModel or a task model (classifier, "
        "regressor, multiple choice, question answering, token classifier, "
        "pretrainer)") from None


def hf_config(obj, architecture: Optional[str] = None,
              labels: Optional[Sequence[str]] = None) -> dict:
  """The HF `config.json` contents for `obj` saved as `architecture`
  (default: its own; any model may be saved as `XLNetModel`); `labels`:
  the class names by id of a classifier or token classifier (HF's
  id2label / label2id; default LABEL_<i>)."""
  # model_kind refuses what HF cannot hold, before anything else.
  is_base = model_kind(obj) == BASE
  own = BASE_ARCHITECTURE if is_base else spec_of(obj).hf_architecture
  architecture = architecture or own
  known = {BASE_ARCHITECTURE} | {s.hf_architecture for s in TASKS}
  if architecture not in known:
    raise CheckpointError(f"unknown architecture {architecture!r}; use one of "
                          f"{', '.join(sorted(known))}")
  encoder = obj if is_base else obj.encoder
  if architecture == BASE_ARCHITECTURE:
    return config_to_hf(encoder.config, encoder.options)
  if architecture != own:
    raise CheckpointError(
        f"a {type(obj).__name__} cannot be saved as {architecture}; save it "
        f"as {own} or XLNetModel")
  head = obj.head_config()
  if labels is not None:
    if "n_class" not in head:
      raise CheckpointError(f"labels given for a {type(obj).__name__}, "
                            "which has no classes")
    head["labels"] = list(labels)
  return config_to_hf(encoder.config, encoder.options, architecture, head)


def save_hf_weights(obj, directory: str, architecture: Optional[str] = None,
                    labels: Optional[Sequence[str]] = None) -> HFSaveReport:
  """Writes `obj` as an HF XLNet directory loadable by transformers'
  `<architecture>.from_pretrained(directory)`.

  `architecture` defaults to the object's own (`XLNetModel`,
  `XLNetLMHeadModel`, `XLNetForSequenceClassification` for classifier and
  regressor, `XLNetForMultipleChoice`, `XLNetForQuestionAnswering`,
  `XLNetForTokenClassification`); any model may also be saved as
  `XLNetModel` (its encoder). `labels` names a classifier's or token
  classifier's classes by id (id2label; default LABEL_<i>). The files appear
  atomically. Raises `CheckpointError` for what HF cannot represent (and for
  labels that are not one distinct name per class).
  """
  return write_hf_weights(obj, directory,
                          hf_config(obj, architecture, labels))


def load_hf_model(directory: str, model: Optional[str] = None,
                  options: Optional[RunOptions] = None, strict: bool = False,
                  **head):
  """Builds the model an HF directory describes and loads it: returns
  `(model, report)`. `model` (a model kind), `options` and head
  arguments override what config.json implies. The class names config.json
  gives (id2label) are in `report.spec.head["labels"]`.

  Example (any directory written by `save_pretrained`):
    model, report = load_hf_model("xlnet-base-cased")
    model(input_ids, segment_ids=token_type_ids, input_mask=1 - attention_mask)
  """
  spec = config_from_hf(read_hf_config(directory),
                        paths.join(directory, HF_CONFIG))
  obj = build_model(model or spec.model, spec.config, options or spec.options,
                    **{**spec.head, **head})
  return obj, load_hf_weights(obj, directory, strict=strict)


@dataclasses.dataclass(frozen=True)
class Loaded:
  """What `load` gives: the model with its weights, the tokenizer of the
  folder's spiece.model, the config, and the weights' load report."""
  model: object
  tokenizer: SentencePieceTokenizer
  config: XLNetConfig
  report: object


def load(folder: str, model: Optional[str] = None,
         options: Optional[RunOptions] = None, uncased: bool = False,
         model_config_path: Optional[str] = None,
         spiece_model_file: Optional[str] = None, **head) -> Loaded:
  """A model folder (released, HuggingFace or an xlnet-tf model_dir; see
  `xlnet_tf.model_folder`) to its model, tokenizer and config in one call.

  `model`: a model kind (`model_kinds()`; default: an HF folder's own
  architecture, else "base", the encoder); `options` and `head` as for
  `build_model`; `uncased`: lower-case the text (the uncased models);
  `model_config_path` and `spiece_model_file` stand in for files the
  folder lacks, and must agree with those it has.
  """
  files = resolve(folder, model_config_path, spiece_model_file)
  tokenizer = SentencePieceTokenizer(files.spiece_model_file, lower=uncased)
  if is_hf_directory(folder):
    obj, report = load_hf_model(folder, model, options, **head)
    return Loaded(obj, tokenizer, files.config, report)
  obj = build_model(model or BASE, files.config, options, **head)
  return Loaded(obj, tokenizer, files.config, load_checkpoint(obj, folder))

