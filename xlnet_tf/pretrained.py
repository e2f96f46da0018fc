"""The task model a checkpoint describes, built and loaded; HF export.

Sits above the task models (it builds them) and `xlnet_tf.io` (which moves
the weights). A model kind is a key of `ARCHITECTURES`: base (the encoder
alone), lm, classification, regression, multiple_choice, qa,
token_classification.

  model, report = load_hf_model("xlnet-base-cased/")   # the matching model
  save_hf_weights(model, "exported/")                  # for transformers
  save_hf_weights(tagger, "ner/", labels=["O", "B-LOC", "I-LOC"])
  report.spec.head["labels"]     # class names read from id2label, if any
  lm, report = load_language_model("pretrain/model_dir")  # any layout
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple

from data_utils.errors import read_json
from xlnet_tf.checkpoint_files import CheckpointError, resolve_checkpoint
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.io.hf import HFSaveReport, load_hf_weights, write_hf_weights
from xlnet_tf.io.hf_config import (ARCHITECTURES, HF_CONFIG, config_from_hf,
                                   config_to_hf)
from xlnet_tf.io.hf_files import is_hf_directory, read_hf_config
from xlnet_tf.io.load import load_checkpoint
from xlnet_tf.tasks import (XLNetClassifier, XLNetForMultipleChoice,
                            XLNetForQuestionAnswering,
                            XLNetForTokenClassification, XLNetPretrainer,
                            XLNetRegressor)

# Model classes by kind; the first that an object is an instance of names it.
_KINDS = (("base", XLNetModel), ("lm", XLNetPretrainer),
          ("classification", XLNetClassifier), ("regression", XLNetRegressor),
          ("multiple_choice", XLNetForMultipleChoice),
          ("qa", XLNetForQuestionAnswering),
          ("token_classification", XLNetForTokenClassification))


def build_model(model: str, config: XLNetConfig,
                options: Optional[RunOptions] = None, **head):
  """A fresh model of kind `model`; `head` holds its constructor arguments
  (n_class, task_name, summary_type, use_summ_proj, tie_weight, n_choice,
  start_n_top, end_n_top); those another kind takes (and `labels`, which
  none takes) are ignored."""
  pooled = {k: head[k] for k in ("summary_type", "use_summ_proj")
            if k in head}
  if model not in ARCHITECTURES:
    raise ValueError(f"unknown model {model!r}; use one of "
                     f"{', '.join(ARCHITECTURES)}")
  if model == "base":
    return XLNetModel(config, options)
  network = XLNetModel(config, options)
  if model == "lm":
    return XLNetPretrainer(network, tie_weight=head.get("tie_weight", True))
  if model == "classification":
    return XLNetClassifier(network, n_class=head.get("n_class", 2),
                           task_name=head.get("task_name") or "task", **pooled)
  if model == "regression":
    return XLNetRegressor(network, task_name=head.get("task_name") or "task",
                          **pooled)
  if model == "token_classification":
    return XLNetForTokenClassification(
        network, n_class=head.get("n_class", 2),
        task_name=head.get("task_name") or "task")
  if model == "multiple_choice":
    return XLNetForMultipleChoice(network, n_choice=head.get("n_choice", 4),
                                  **pooled)
  return XLNetForQuestionAnswering(network,
                                   start_n_top=head.get("start_n_top", 5),
                                   end_n_top=head.get("end_n_top", 5))


def model_kind(obj) -> str:
  """The `ARCHITECTURES` key of a model object."""
  for kind, cls in _KINDS:
    if isinstance(obj, cls):
      return kind
  raise CheckpointError(
      f"HuggingFace weights: a {type(obj).__name__} has no HF counterpart; "
      "use XLNetModel or a task model (classifier, regressor, multiple "
      "choice, question answering, token classifier, pretrainer)")


def _head_of(obj, kind: str) -> dict:
  """What `config_to_hf` needs of `obj`'s head."""
  if kind == "token_classification":
    return {"n_class": obj.n_class, "task_name": obj.task_name}
  if kind == "lm":
    return {"tie_weight": obj.tie_weight}
  if kind == "qa":
    return {"start_n_top": obj.start_n_top, "end_n_top": obj.end_n_top}
  if kind == "base":
    return {}
  head = {"summary_type": obj.summary_type, "use_summ_proj": obj.use_summ_proj}
  if kind in ("classification", "regression"):
    head.update(task_name=obj.task_name,
                n_class=obj.n_class if kind == "classification" else None)
  return head


def hf_config(obj, architecture: Optional[str] = None,
              labels: Optional[Sequence[str]] = None) -> dict:
  """The HF `config.json` contents for `obj` saved as `architecture`
  (default: its own; any model may be saved as `XLNetModel`); `labels`:
  the class names by id of a classifier or token classifier (HF's
  id2label / label2id; default LABEL_<i>)."""
  kind = model_kind(obj)
  architecture = architecture or ARCHITECTURES[kind]
  if architecture not in ARCHITECTURES.values():
    raise CheckpointError(f"unknown architecture {architecture!r}; use one of "
                          f"{', '.join(sorted(set(ARCHITECTURES.values())))}")
  encoder = obj if kind == "base" else obj.encoder
  if architecture == "XLNetModel":
    return config_to_hf(encoder.config, encoder.options)
  if architecture != ARCHITECTURES[kind]:
    raise CheckpointError(
        f"a {type(obj).__name__} cannot be saved as {architecture}; save it "
        f"as {ARCHITECTURES[kind]} or XLNetModel")
  head = _head_of(obj, kind)
  if labels is not None:
    if kind not in ("classification", "token_classification"):
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
  `(model, report)`. `model` (a key of `ARCHITECTURES`), `options` and head
  arguments override what config.json implies. The class names config.json
  gives (id2label) are in `report.spec.head["labels"]`.

  Example (any directory written by `save_pretrained`):
    model, report = load_hf_model("xlnet-base-cased")
    model(input_ids, segment_ids=token_type_ids, input_mask=1 - attention_mask)
  """
  spec = config_from_hf(read_hf_config(directory),
                        os.path.join(directory, HF_CONFIG))
  obj = build_model(model or spec.model, spec.config, options or spec.options,
                    **{**spec.head, **head})
  return obj, load_hf_weights(obj, directory, strict=strict)


# Run options a language-model use keeps from the run that trained the
# weights; dropout, memory and bi_data are the inference's own.
_KEPT_OPTIONS = ("attn_type", "clamp_len", "same_length")


def file_beside(prefix: str, name: str) -> Optional[str]:
  """`name` in the checkpoint's directory or the one above it (run_pretrain
  writes `model_dir/run_options.json` and `model_dir/original/...`)."""
  folder = os.path.dirname(os.path.abspath(prefix))
  for where in (folder, os.path.dirname(folder)):
    path = os.path.join(where, name)
    if os.path.isfile(path):
      return path
  return None


def language_model_config(path: str, model_config_path: Optional[str] = None
                          ) -> Tuple[XLNetConfig, Optional[str], dict]:
  """`(config, the file it was read from, kept run options)` of the
  checkpoint at `path`, as `load_language_model` reads them (no weight is
  read): the config is `model_config_path`, else `xlnet_config.json` beside
  the checkpoint (or in the directory above it), else an HF directory's
  config.json (file None); the run options are the attention options
  (attn_type, clamp_len, same_length) of `run_options.json` beside the
  checkpoint or of HF's config."""
  if is_hf_directory(path):
    spec = config_from_hf(read_hf_config(path), os.path.join(path, HF_CONFIG))
    kept = {k: getattr(spec.options, k) for k in _KEPT_OPTIONS}
    if model_config_path:
      return XLNetConfig.from_json(model_config_path), model_config_path, kept
    return spec.config, None, kept
  prefix = resolve_checkpoint(path)
  config_path = model_config_path or file_beside(prefix, "xlnet_config.json")
  if config_path is None:
    raise CheckpointError(f"{path}: no xlnet_config.json beside the "
                          "checkpoint; pass the model config")
  kept = {}
  options_path = file_beside(prefix, "run_options.json")
  if options_path:
    saved = read_json(options_path, CheckpointError)
    if isinstance(saved, dict):
      kept = {k: saved[k] for k in _KEPT_OPTIONS if k in saved}
    try:
      RunOptions(**kept)
    except ConfigError as e:
      raise CheckpointError(f"{options_path}: {e}") from None
  return XLNetConfig.from_json(config_path), config_path, kept


def load_language_model(path: str, model_config_path: Optional[str] = None,
                        clamp_len: Optional[int] = None,
                        need_lm_head: bool = True
                        ) -> Tuple[XLNetPretrainer, object]:
  """An `XLNetPretrainer` (encoder + tied LM head) for inference, from any
  checkpoint: an HF directory, the original layout (a released model, or
  `run_pretrain.py`'s `model_dir/original/`) or a native `model_dir`.

  The config and attention options are `language_model_config`'s;
  `clamp_len` overrides. Dropout is off, bi_data off, and no memory is kept
  unless a call asks for it. Returns `(model, load report)`; with
  `need_lm_head`, a checkpoint without the LM bias is an error (a fine-tuned
  encoder has no LM).
  """
  config, _, kept = language_model_config(path, model_config_path)
  overrides = {} if clamp_len is None else {"clamp_len": clamp_len}
  options = RunOptions(**{**kept, **overrides, "dropout": 0.0,
                          "dropatt": 0.0})
  lm = build_model("lm", config, options)
  report = load_checkpoint(lm, path)
  missing = list(getattr(report, "missing", None) or [])
  if need_lm_head and any("lm_loss" in n or "mask_emb" in n for n in missing):
    raise CheckpointError(f"{path}: has no LM head (lm_loss/bias, mask_emb): "
                          "a fine-tuned checkpoint cannot score or generate")
  encoder_missing = [n for n in missing if "lm_loss" not in n
                     and "mask_emb" not in n]
  if encoder_missing:
    raise CheckpointError(f"{path}: not an XLNet checkpoint of this config; "
                          f"missing {', '.join(encoder_missing[:3])}")
  return lm, report
