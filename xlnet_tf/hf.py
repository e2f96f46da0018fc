"""HuggingFace `transformers` XLNet weights: import, export, config mapping.

Owns the correspondence between this project's weights (named as the
original TF1 checkpoint, `original_weights()`) and a HuggingFace XLNet
directory (`config.json` + `model.safetensors`), both ways. Reading and
writing use NumPy and the `safetensors` package only: torch is never needed.

Weights (D d_model, N n_head, H d_head, F d_inner, V n_token, L n_layer;
HF names of the encoder carry `transformer.` in every architecture but
`XLNetModel`):

  original (this project)                       HuggingFace
  model/transformer/word_embedding/lookup_table word_embedding.weight   [V, D]
  model/transformer/mask_emb/mask_emb           mask_emb                [1, 1, D]
  model/transformer/r_{w,r,s}_bias [L, N, H]    layer.<i>.rel_attn.r_{w,r,s}_bias
      ([N, H] shared with untie_r=false:         [N, H] each layer (copies)
       HF always holds one per layer)
  model/transformer/seg_embed [L, 2, N, H]      layer.<i>.rel_attn.seg_embed [2, N, H]
  .../layer_<i>/rel_attn/{q,k,v,o,r}/kernel     layer.<i>.rel_attn.{q,k,v,o,r}
      [D, N, H]                                  [D, N, H] (same layout, no transpose)
  .../layer_<i>/{rel_attn,ff}/LayerNorm/gamma|beta  layer.<i>.{rel_attn,ff}.layer_norm.weight|bias
  .../layer_<i>/ff/layer_{1,2}/kernel [in, out] layer.<i>.ff.layer_{1,2}.weight [out, in]
  model/lm_loss/bias [V]                        lm_loss.bias
  model/lm_loss/weight [V, D] (untied only)     lm_loss.weight [V, D] (no transpose)
  model/sequnece_summary/summary/kernel|bias    sequence_summary.summary.weight (T)|bias
  model/classification_<task>/logit,            logits_proj.weight (T)|bias
  model/regression_<task>/logit, logits/dense
  start_logits/dense, end_logits/dense_{0,1},   same names, kernel -> weight (T),
  end_logits/LayerNorm, answer_class/dense_{0,1} gamma/beta -> weight/bias

Config: vocab_size <-> n_token; d_model, n_layer, n_head, d_head, d_inner as
they are; ff_activation: this project's 'gelu' (the original's tanh form) <->
HF 'gelu_new', 'gelu_exact' <-> HF 'gelu' (erf), 'relu' <-> 'relu'; untie_r is
kept as an extra key (HF ignores it). attn_type, bi_data, clamp_len,
same_length, mem_len, reuse_len and dropout are run options here
(`RunOptions`), suggested by the import. What has no counterpart (another
LayerNorm epsilon, activation or attention type, an 'attn' summary, ...) is
refused with a one-line error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf.building import build_once
from xlnet_tf.checkpoint import DAMAGED, CheckpointError, LoadReport
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.layers.layer_norm import LAYER_NORM_EPSILON
from xlnet_tf.models import (XLNetClassifier, XLNetForMultipleChoice,
                             XLNetForQuestionAnswering, XLNetPretrainer,
                             XLNetRegressor)
from xlnet_tf.models.base import TaskModel

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"
HF_INDEX = "model.safetensors.index.json"

# This project's model kinds (the convert CLI's --model) -> HF architecture.
ARCHITECTURES = {
    "base": "XLNetModel",
    "lm": "XLNetLMHeadModel",
    "classification": "XLNetForSequenceClassification",
    "regression": "XLNetForSequenceClassification",
    "multiple_choice": "XLNetForMultipleChoice",
    "qa": "XLNetForQuestionAnswering",
}

_ACT_TO_HF = {"relu": "relu", "gelu": "gelu_new", "gelu_exact": "gelu"}
# 'gelu_pytorch_tanh' is HF's fused kernel for the same tanh formula.
_ACT_FROM_HF = {"relu": "relu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "gelu": "gelu_exact"}

_SCOPE = XLNetModel.ORIGINAL_SCOPE
_MASK_EMB = f"{_SCOPE}/mask_emb/mask_emb"
_LM_WEIGHT = "model/lm_loss/weight"
_EMBEDDING = f"{_SCOPE}/word_embedding/lookup_table"
_HF_EMBEDDING = "word_embedding.weight"

# One original name <-> one HF name: (pattern, HF template, transpose,
# encoder). Dense kernels are [in, out] in TF and [out, in] in torch Linear;
# the attention projections are plain [D, N, H] parameters on both sides.
_RULES = [
    (rf"{_SCOPE}/word_embedding/lookup_table", _HF_EMBEDDING, False, True),
    (rf"{_SCOPE}/mask_emb/mask_emb", "mask_emb", False, True),
    (rf"{_SCOPE}/layer_(\d+)/rel_attn/([qkvor])/kernel",
     r"layer.\1.rel_attn.\2", False, True),
    (rf"{_SCOPE}/layer_(\d+)/(rel_attn|ff)/LayerNorm/gamma",
     r"layer.\1.\2.layer_norm.weight", False, True),
    (rf"{_SCOPE}/layer_(\d+)/(rel_attn|ff)/LayerNorm/beta",
     r"layer.\1.\2.layer_norm.bias", False, True),
    (rf"{_SCOPE}/layer_(\d+)/ff/(layer_[12])/kernel",
     r"layer.\1.ff.\2.weight", True, True),
    (rf"{_SCOPE}/layer_(\d+)/ff/(layer_[12])/bias",
     r"layer.\1.ff.\2.bias", False, True),
    # The original multiplies by lm_loss/weight as by an embedding table, so it
    # is [V, D] like the torch Linear weight: no transpose.
    (r"model/lm_loss/weight", "lm_loss.weight", False, False),
    (r"model/lm_loss/bias", "lm_loss.bias", False, False),
    (r"model/sequnece_summary/summary/kernel",
     "sequence_summary.summary.weight", True, False),
    (r"model/sequnece_summary/summary/bias",
     "sequence_summary.summary.bias", False, False),
    (r"(?:model/(?:classification|regression)_[^/]+/logit|logits/dense)/kernel",
     "logits_proj.weight", True, False),
    (r"(?:model/(?:classification|regression)_[^/]+/logit|logits/dense)/bias",
     "logits_proj.bias", False, False),
    (r"(start_logits|end_logits|answer_class)/(dense(?:_\d)?)/kernel",
     r"\1.\2.weight", True, False),
    (r"(start_logits|end_logits|answer_class)/(dense(?:_\d)?)/bias",
     r"\1.\2.bias", False, False),
    (r"end_logits/LayerNorm/gamma", "end_logits.LayerNorm.weight", False, False),
    (r"end_logits/LayerNorm/beta", "end_logits.LayerNorm.bias", False, False),
]
# Stacked over layers in the original, one per layer in HF.
_STACKED = re.compile(rf"{_SCOPE}/(r_w_bias|r_r_bias|r_s_bias|seg_embed)")


@dataclasses.dataclass(frozen=True)
class _Link:
  """How one original tensor is stored in HF."""
  original: str
  hf: Tuple[str, ...]       # one name, or one per layer when `stacked`
  transpose: bool = False
  stacked: bool = False
  shared: bool = False      # stacked, but one [N, H] for all layers (untie_r=false)


def _link(name: str, config: XLNetConfig, prefix: str) -> Optional[_Link]:
  """The HF counterpart of original `name`, or None (none exists)."""
  match = _STACKED.fullmatch(name)
  if match:
    what = match.group(1)
    return _Link(name, tuple(f"{prefix}layer.{i}.rel_attn.{what}"
                             for i in range(config.n_layer)),
                 stacked=True,
                 shared=not config.untie_r and what != "seg_embed")
  for pattern, template, transpose, encoder in _RULES:
    match = re.fullmatch(pattern, name)
    if match:
      hf = match.expand(template)
      return _Link(name, ((prefix if encoder else "") + hf,), transpose)
  return None


def _to_hf(link: _Link, value: np.ndarray, n_layer: int
           ) -> Dict[str, np.ndarray]:
  if link.stacked:
    parts = [value] * n_layer if link.shared else list(value)
    return {n: np.ascontiguousarray(p) for n, p in zip(link.hf, parts)}
  if link.transpose:
    value = value.T
  return {link.hf[0]: np.ascontiguousarray(value)}


def _from_hf(link: _Link, tensors: Dict[str, np.ndarray], source: str
             ) -> np.ndarray:
  if link.stacked:
    parts = [tensors[n] for n in link.hf]
    if link.shared:
      if any(not np.array_equal(p, parts[0]) for p in parts[1:]):
        raise CheckpointError(
            f"{source}: {link.hf[0].rsplit('.', 1)[-1]} differs between "
            "layers, but the model shares one across layers (untie_r=false); "
            "build it with untie_r=true")
      return parts[0]
    return np.stack(parts)
  value = tensors[link.hf[0]]
  return value.T if link.transpose else value


# --------------------------------------------------------------------------
# Config.


@dataclasses.dataclass(frozen=True)
class HFModelSpec:
  """What an HF `config.json` means here.

  config: the `XLNetConfig`; options: the `RunOptions` that reproduce the HF
  model's forward pass; model: a key of `ARCHITECTURES`; head: keyword
  arguments of that task model (n_class, task_name, summary_type, use_proj,
  tie_weight, start_n_top, end_n_top); notes: what was mapped with a caveat.
  """
  config: XLNetConfig
  options: RunOptions
  architecture: str
  model: str
  head: dict
  notes: Tuple[str, ...] = ()

  def build(self, options: Optional[RunOptions] = None,
            model: Optional[str] = None, **head):
    """A fresh model of this spec (`model` and `head` override the spec's)."""
    return build_model(model or self.model, self.config,
                       options or self.options, **{**self.head, **head})


def build_model(model: str, config: XLNetConfig,
                options: Optional[RunOptions] = None, **head):
  """A model of kind `model` (a key of `ARCHITECTURES`); `head` holds its
  constructor arguments, unknown ones are ignored."""
  pooled = {k: head[k] for k in ("summary_type", "use_proj") if k in head}
  if model == "base":
    return XLNetModel(config, options)
  if model == "lm":
    return XLNetPretrainer(config, options,
                           tie_weight=head.get("tie_weight", True))
  if model == "classification":
    return XLNetClassifier(config, options, n_class=head.get("n_class", 2),
                           task_name=head.get("task_name") or "task", **pooled)
  if model == "regression":
    return XLNetRegressor(config, options,
                          task_name=head.get("task_name") or "task", **pooled)
  if model == "multiple_choice":
    return XLNetForMultipleChoice(config, options,
                                  n_choice=head.get("n_choice", 4), **pooled)
  if model == "qa":
    return XLNetForQuestionAnswering(config, options,
                                     start_n_top=head.get("start_n_top", 5),
                                     end_n_top=head.get("end_n_top", 5))
  raise ValueError(f"unknown model {model!r}; use one of "
                   f"{', '.join(ARCHITECTURES)}")


def model_kind(obj) -> str:
  """The `ARCHITECTURES` key of a model object."""
  kinds = [(XLNetModel, "base"), (XLNetPretrainer, "lm"),
           (XLNetClassifier, "classification"), (XLNetRegressor, "regression"),
           (XLNetForMultipleChoice, "multiple_choice"),
           (XLNetForQuestionAnswering, "qa")]
  for cls, kind in kinds:
    if isinstance(obj, cls):
      return kind
  raise CheckpointError(
      f"HuggingFace weights: a {type(obj).__name__} has no HF counterpart; "
      "use XLNetModel or a task model (classifier, regressor, multiple "
      "choice, question answering, pretrainer)")


def _encoder_of(obj) -> XLNetModel:
  if isinstance(obj, XLNetModel):
    return obj
  if isinstance(obj, TaskModel):
    return obj.encoder
  model_kind(obj)  # raises the explanatory error
  raise AssertionError("unreachable")


def _req(data: dict, key: str, source: str, *aliases):
  for k in (key,) + aliases:
    if k in data and data[k] is not None:
      return data[k]
  raise ConfigError(f"{source}: missing key '{key}'")


def _summary_head(data: dict, source: str, notes: List[str]) -> dict:
  """summary_* keys -> SequenceSummary arguments, refusing what differs."""
  summary_type = data.get("summary_type", "last")
  if summary_type == "cls_index":
    # HF's cls_index summary without a cls_index takes the last token.
    notes.append("summary_type 'cls_index' imported as 'last' (what HF does "
                 "when no cls_index is passed)")
    summary_type = "last"
  if summary_type not in ("last", "first", "mean"):
    raise ConfigError(f"{source}: summary_type {summary_type!r} cannot be "
                      "represented (use last, first, mean or cls_index)")
  use_proj = bool(data.get("summary_use_proj", True))
  if data.get("summary_proj_to_labels"):
    raise ConfigError(f"{source}: summary_proj_to_labels=true cannot be "
                      "represented (the summary projection here keeps d_model)")
  activation = data.get("summary_activation")
  activation = None if activation in (None, "", "linear") else activation
  if use_proj and activation != "tanh":
    raise ConfigError(f"{source}: summary_activation {activation!r} cannot be "
                      "represented (the summary projection here is tanh, as "
                      "the original's)")
  if not use_proj and activation is not None:
    raise ConfigError(f"{source}: summary_activation {activation!r} without "
                      "a projection cannot be represented")
  if (data.get("summary_first_dropout") or 0) > 0:
    notes.append("summary_first_dropout is not applied here (training only)")
  return {"summary_type": summary_type, "use_proj": use_proj}


def config_from_hf(data: dict, source: str = HF_CONFIG) -> HFModelSpec:
  """Maps an HF XLNet `config.json` (as a dict) to this project.

  Raises `ConfigError` (one line, naming the key) for what has no counterpart.

  Example:
    >>> spec = config_from_hf({"vocab_size": 50, "d_model": 16, "n_layer": 2,
    ...                        "n_head": 2, "d_inner": 32,
    ...                        "ff_activation": "gelu", "bi_data": True})
    >>> spec.config.ff_activation, spec.config.d_head, spec.options.bi_data
    ('gelu_exact', 8, True)
  """
  if not isinstance(data, dict):
    raise ConfigError(f"{source}: expected a JSON object")
  model_type = data.get("model_type", "xlnet")
  if model_type != "xlnet":
    raise ConfigError(f"{source}: model_type {model_type!r} is not an XLNet")
  notes: List[str] = []
  d_model = _req(data, "d_model", source, "hidden_size")
  n_head = _req(data, "n_head", source, "num_attention_heads")
  activation = data.get("ff_activation", "gelu")
  if activation not in _ACT_FROM_HF:
    raise ConfigError(
        f"{source}: ff_activation {activation!r} cannot be represented (HF "
        "relu, gelu_new = the original's tanh GELU, gelu = exact erf GELU)")
  eps = data.get("layer_norm_eps", LAYER_NORM_EPSILON)
  if not isinstance(eps, (int, float)) or abs(eps - LAYER_NORM_EPSILON) > 1e-15:
    raise ConfigError(f"{source}: layer_norm_eps {eps!r} cannot be "
                      f"represented (LayerNorm here uses {LAYER_NORM_EPSILON}, "
                      "as the original)")
  try:
    config = XLNetConfig(
        n_layer=_req(data, "n_layer", source, "num_hidden_layers"),
        d_model=d_model, n_head=n_head,
        d_head=data.get("d_head") or (d_model // n_head if _is_count(d_model)
                                      and _is_count(n_head) else None),
        d_inner=_req(data, "d_inner", source),
        n_token=_req(data, "vocab_size", source, "n_token"),
        ff_activation=_ACT_FROM_HF[activation],
        untie_r=data.get("untie_r", True))
  except ConfigError as e:
    raise ConfigError(f"{source}: {e}") from None

  attn_type = data.get("attn_type", "bi")
  if attn_type not in ("bi", "uni"):
    raise ConfigError(f"{source}: attn_type {attn_type!r} cannot be "
                      "represented (bi or uni)")
  run = dict(attn_type=attn_type, bi_data=data.get("bi_data", False),
             clamp_len=data.get("clamp_len", -1),
             same_length=data.get("same_length", False))
  for key, default in (("attn_type", "bi"), ("bi_data", False),
                       ("clamp_len", -1), ("same_length", False)):
    if run[key] != default:
      notes.append(f"{key}={run[key]!r} is a run option here: "
                   f"RunOptions({key}={run[key]!r})")
  dropout = data.get("dropout", 0.1)
  try:
    options = RunOptions(dropout=dropout, dropatt=dropout,
                         init_std=data.get("initializer_range", 0.02),
                         mem_len=data.get("mem_len"),
                         reuse_len=data.get("reuse_len"), **run)
  except ConfigError as e:
    raise ConfigError(f"{source}: {e}") from None

  architectures = data.get("architectures") or ["XLNetModel"]
  architecture = architectures[0]
  head: dict = {}
  if architecture == "XLNetModel":
    model = "base"
  elif architecture == "XLNetLMHeadModel":
    model = "lm"
    head["tie_weight"] = bool(data.get("tie_word_embeddings", True))
  elif architecture in ("XLNetForSequenceClassification",
                        "XLNetForMultipleChoice"):
    head.update(_summary_head(data, source, notes))
    if architecture == "XLNetForMultipleChoice":
      model = "multiple_choice"
    else:
      id2label = data.get("id2label")
      n_class = len(id2label) if id2label else data.get("num_labels", 2)
      regression = (data.get("problem_type") == "regression" or
                    (n_class == 1 and data.get("problem_type") is None))
      model = "regression" if regression else "classification"
      if not regression:
        head["n_class"] = n_class
      if data.get("finetuning_task"):
        head["task_name"] = str(data["finetuning_task"])
  elif architecture == "XLNetForQuestionAnswering":
    model = "qa"
    head.update(start_n_top=data.get("start_n_top", 5),
                end_n_top=data.get("end_n_top", 5))
  else:
    model = "base"
    notes.append(f"architecture {architecture} has no counterpart here; its "
                 "encoder is imported")
  return HFModelSpec(config, options, architecture, model, head, tuple(notes))


def _is_count(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v > 0


def hf_config(obj, architecture: Optional[str] = None) -> dict:
  """The HF `config.json` contents for `obj` saved as `architecture`."""
  kind = model_kind(obj)
  architecture = architecture or ARCHITECTURES[kind]
  encoder = _encoder_of(obj)
  cfg, opts = encoder.config, encoder.options
  if cfg.d_head * cfg.n_head != cfg.d_model:
    raise CheckpointError(
        f"d_head={cfg.d_head} with n_head={cfg.n_head}, d_model={cfg.d_model} "
        "cannot be represented: transformers requires d_head == d_model / "
        "n_head")
  if opts.dropatt != opts.dropout:
    logging.info("HF XLNet has one dropout rate: dropatt=%s not saved",
                 opts.dropatt)
  data = {
      "architectures": [architecture], "model_type": "xlnet",
      "vocab_size": cfg.n_token, "d_model": cfg.d_model,
      "n_layer": cfg.n_layer, "n_head": cfg.n_head, "d_head": cfg.d_head,
      "d_inner": cfg.d_inner,
      "ff_activation": _ACT_TO_HF[cfg.ff_activation],
      # HF ignores it (one bias per layer always); kept so that an import
      # restores the shared layout of an untie_r=false model.
      "untie_r": cfg.untie_r,
      "layer_norm_eps": LAYER_NORM_EPSILON,
      "attn_type": opts.attn_type, "bi_data": opts.bi_data,
      "clamp_len": opts.clamp_len, "same_length": opts.same_length,
      "mem_len": opts.mem_len, "reuse_len": opts.reuse_len,
      "dropout": opts.dropout, "initializer_range": opts.init_std,
      "summary_type": "last", "summary_use_proj": True,
      "summary_activation": "tanh", "summary_last_dropout": opts.dropout,
      "start_n_top": 5, "end_n_top": 5,
      "tie_word_embeddings": True,
      "dtype": "float32",
  }
  # The released SentencePiece vocabulary's ids (HF's defaults), when the
  # vocabulary is large enough to hold them.
  for key, token_id in (("pad_token_id", 5), ("bos_token_id", 1),
                        ("eos_token_id", 2)):
    data[key] = token_id if token_id < cfg.n_token else None
  if architecture == "XLNetModel":
    return data
  if architecture != ARCHITECTURES[kind]:
    raise CheckpointError(
        f"a {type(obj).__name__} cannot be saved as {architecture}; save it "
        f"as {ARCHITECTURES[kind]} or XLNetModel")
  if kind == "lm":
    data["tie_word_embeddings"] = obj.tie_weight
  if kind in ("classification", "regression", "multiple_choice"):
    if obj.summary_type not in ("last", "first", "mean"):
      raise CheckpointError(
          f"summary_type {obj.summary_type!r} cannot be represented: "
          "transformers' XLNet summary supports last, first and mean")
    # No projection, no activation: HF would apply tanh to the raw state
    # (and transformers 5 refuses null, so "linear", its identity).
    data.update(summary_type=obj.summary_type, summary_use_proj=obj.use_proj,
                summary_activation="tanh" if obj.use_proj else "linear")
  if kind in ("classification", "regression"):
    n_class = obj.n_class if kind == "classification" else 1
    data["id2label"] = {str(i): f"LABEL_{i}" for i in range(n_class)}
    data["label2id"] = {f"LABEL_{i}": i for i in range(n_class)}
    # HF treats one label with no problem_type as regression.
    data["problem_type"] = ("regression" if kind == "regression" else
                            "single_label_classification" if n_class > 1
                            else None)
    data["finetuning_task"] = obj.task_name
  if kind == "qa":
    data.update(start_n_top=obj.start_n_top, end_n_top=obj.end_n_top)
  return data


# --------------------------------------------------------------------------
# Files.


def is_hf_directory(path: str) -> bool:
  """A directory with `config.json` and HF weights (safetensors, possibly
  sharded, or a torch `pytorch_model.bin`, which is refused when read)."""
  if not (isinstance(path, str) and os.path.isdir(path)):
    return False
  weights = (HF_WEIGHTS, HF_INDEX, "pytorch_model.bin")
  return os.path.isfile(os.path.join(path, HF_CONFIG)) and any(
      os.path.isfile(os.path.join(path, w)) for w in weights)


def read_hf_config(directory: str) -> dict:
  path = os.path.join(directory, HF_CONFIG)
  if not os.path.isfile(path):
    raise CheckpointError(f"{directory}: no {HF_CONFIG}")
  try:
    with open(path, "rb") as f:
      return json.loads(f.read().decode("utf-8"))
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})"
                      ) from None
  except UnicodeDecodeError as e:  # a damaged file, or not JSON at all
    raise ConfigError(f"{path}: not valid JSON (not UTF-8 text: byte "
                      f"{e.start})") from None


_RAW_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8",
               "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1",
               "BOOL": "?"}


# safetensors' own limit on the JSON header.
_MAX_HEADER = 100_000_000


def _safetensors_problem(path: str) -> Optional[str]:
  """What is wrong with a safetensors file's framing (8-byte little-endian
  header size, JSON header giving each tensor's data_offsets, then the data
  up to the last offset, nothing after), or None. Reads the header only.
  The format has no checksums: changed bytes inside tensor data cannot be
  detected."""
  name = os.path.basename(path)
  size = os.path.getsize(path)
  if size == 0:
    return f"{name} is empty"
  if size < 8:
    return f"{name} is truncated ({size} bytes, not even its header size)"
  with open(path, "rb") as f:
    (length,) = struct.unpack("<Q", f.read(8))
    if length > _MAX_HEADER:
      return (f"{name} is not a safetensors file (its first 8 bytes give a "
              f"header of {length} bytes)")
    if length > size - 8:
      return (f"{name} is truncated ({size} bytes; its header needs "
              f"{8 + length})")
    raw = f.read(length)
  try:
    header = json.loads(raw.decode("utf-8"))
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
    return f"{name} has a damaged header (not valid JSON: {e})"
  try:
    end = max((int(meta["data_offsets"][1]) for key, meta in header.items()
               if key != "__metadata__"), default=0)
  except (AttributeError, TypeError, KeyError, IndexError, ValueError):
    return f"{name} has a damaged header (a tensor without data_offsets)"
  expected = 8 + length + end
  if size < expected:
    return f"{name} is truncated ({size} of {expected} bytes)"
  if size > expected:
    return (f"{name} has {size - expected} bytes after its last tensor "
            f"({size} bytes, its header describes {expected})")
  return None


def _read_safetensors_raw(path: str) -> Dict[str, np.ndarray]:
  """The file format by hand (8-byte header size, JSON header, data), for
  bfloat16, which NumPy (hence safetensors.numpy) has no dtype for; bfloat16
  is the top half of a float32, so it widens exactly."""
  with open(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    data = f.read()
  tensors = {}
  for name, meta in header.items():
    if name == "__metadata__":
      continue
    start, end = meta["data_offsets"]
    raw = data[start:end]
    if meta["dtype"] == "BF16":
      value = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(
          np.float32)
    elif meta["dtype"] in _RAW_DTYPES:
      value = np.frombuffer(raw, _RAW_DTYPES[meta["dtype"]])
    else:
      raise CheckpointError(f"{path}: {name} has dtype {meta['dtype']}, "
                            "which cannot be read")
    try:
      tensors[name] = value.reshape(meta["shape"]).copy()
    except ValueError:
      raise CheckpointError(
          f"{path}: {DAMAGED}: {name} has {value.size} values, its shape "
          f"{meta['shape']} needs {int(np.prod(meta['shape']))}") from None
  return tensors


def _read_safetensors(path: str, label: str) -> Dict[str, np.ndarray]:
  """One safetensors file; damage raises a one-line `CheckpointError`
  starting with `label` and naming the file."""
  from safetensors.numpy import load_file
  problem = _safetensors_problem(path)
  if problem:
    raise CheckpointError(f"{label}: {DAMAGED}: {problem}")
  try:
    return load_file(path)
  except TypeError:  # a dtype NumPy lacks (bfloat16)
    return _read_safetensors_raw(path)
  except Exception as e:  # the Rust reader's own error types
    raise CheckpointError(f"{path}: not a readable safetensors file ({e})"
                          ) from None


def _weight_files(directory: str, label: str) -> List[str]:
  """The safetensors files of an HF directory (one, or the shards its index
  lists); a missing shard or a damaged index raises `CheckpointError`."""
  single = os.path.join(directory, HF_WEIGHTS)
  index = os.path.join(directory, HF_INDEX)
  if os.path.isfile(single):
    return [single]
  if os.path.isfile(index):
    try:
      with open(index, "rb") as f:
        weight_map = json.loads(f.read().decode("utf-8"))["weight_map"]
      shards = sorted(set(weight_map.values()))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
      raise CheckpointError(f"{label}: {DAMAGED}: {HF_INDEX} is not valid "
                            f"JSON ({e})") from None
    except (KeyError, TypeError, AttributeError):
      raise CheckpointError(f"{label}: {DAMAGED}: {HF_INDEX} has no "
                            "weight_map of tensor -> file") from None
    for shard in shards:
      if not os.path.isfile(os.path.join(directory, str(shard))):
        raise CheckpointError(f"{label}: {DAMAGED}: {shard} is missing "
                              f"(listed in {HF_INDEX})")
    return [os.path.join(directory, s) for s in shards]
  if os.path.isfile(os.path.join(directory, "pytorch_model.bin")):
    raise CheckpointError(
        f"{label}: holds pytorch_model.bin only; this project reads "
        f"safetensors (re-save with transformers: "
        "model.save_pretrained(dir, safe_serialization=True))")
  raise CheckpointError(f"{label}: no {HF_WEIGHTS}")


def check_hf_directory(directory: str, label: Optional[str] = None) -> None:
  """The cheap check of an HF directory about to be loaded: config.json
  parses, every weight file is there and its header and size agree. Errors
  are one line starting with `label` (default: the directory)."""
  read_hf_config(directory)
  label = label or directory
  for path in _weight_files(directory, label):
    problem = _safetensors_problem(path)
    if problem:
      raise CheckpointError(f"{label}: {DAMAGED}: {problem}")


def read_hf_tensors(directory: str) -> Dict[str, np.ndarray]:
  """Every tensor of an HF directory by its HF name (shards merged; legacy
  LayerNorm names gamma/beta read as weight/bias). A missing or damaged
  file raises a one-line `CheckpointError` naming it."""
  tensors: Dict[str, np.ndarray] = {}
  for path in _weight_files(directory, directory):
    for name, value in _read_safetensors(path, directory).items():
      name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
      tensors[name] = value
  return tensors


def _write_directory(directory: str, config: dict,
                     tensors: Dict[str, np.ndarray]) -> None:
  """config.json + model.safetensors, atomically: both are written in a temp
  directory beside the target, which is then renamed into place (a new
  directory appears whole; in an existing one each file is replaced)."""
  from safetensors.numpy import save_file
  directory = os.path.abspath(directory)
  parent = os.path.dirname(directory)
  os.makedirs(parent, exist_ok=True)
  if os.path.exists(directory) and not os.path.isdir(directory):
    raise CheckpointError(f"{directory}: exists and is not a directory")
  tmp = tempfile.mkdtemp(dir=parent,
                         prefix=f".tmp-{os.path.basename(directory)}-")
  try:
    # HF's loader wants format=pt in the metadata (what save_pretrained writes).
    save_file(tensors, os.path.join(tmp, HF_WEIGHTS),
              metadata={"format": "pt"})
    with open(os.path.join(tmp, HF_CONFIG), "w") as f:
      json.dump(config, f, indent=2, sort_keys=True)
      f.write("\n")
    for name in os.listdir(tmp):
      os.chmod(os.path.join(tmp, name), 0o644)
    os.chmod(tmp, 0o755)
    try:
      os.rename(tmp, directory)
      return
    except OSError:
      pass  # the directory exists (and is not empty): replace file by file
    # Weights first, config last: a reader sees the new config only with the
    # new weights beside it.
    for name in (HF_WEIGHTS, HF_CONFIG):
      os.replace(os.path.join(tmp, name), os.path.join(directory, name))
    stale = os.path.join(directory, HF_INDEX)
    if os.path.isfile(stale):  # an older sharded save would shadow ours
      os.remove(stale)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# Load and save.


@dataclasses.dataclass
class HFLoadReport(LoadReport):
  """A `LoadReport` (loaded/missing in original names, unused in HF names)
  plus the notes of the mapping and the run options the HF config implies."""
  notes: List[str] = dataclasses.field(default_factory=list)
  run_options: Optional[RunOptions] = None
  spec: Optional[HFModelSpec] = None

  def summary(self) -> str:
    text = super().summary()
    if self.notes:
      text += "; notes: " + "; ".join(self.notes)
    return text


@dataclasses.dataclass
class HFSaveReport:
  """What a save wrote: HF names written, original names left out."""
  path: str
  architecture: str
  written: List[str]
  skipped: List[str]
  notes: List[str] = dataclasses.field(default_factory=list)

  def summary(self) -> str:
    text = (f"{self.path}: wrote {len(self.written)} tensors as "
            f"{self.architecture}")
    if self.skipped:
      text += f"; skipped {len(self.skipped)}: " + ", ".join(self.skipped)
    if self.notes:
      text += "; notes: " + "; ".join(self.notes)
    return text


def _targets(obj) -> Dict[str, tf.Variable]:
  build_once(obj)
  weights = dict(obj.original_weights())
  # HF holds mask_emb in every architecture; fine-tuned models here leave it
  # out of their original names but still have it.
  weights.setdefault(_MASK_EMB, _encoder_of(obj).mask_emb)
  return weights


def load_hf_weights(obj, directory: str, strict: bool = False
                    ) -> HFLoadReport:
  """Loads an HF XLNet directory (`config.json` + `model.safetensors`) into
  `obj` (`XLNetModel` or a task model; built if needed).

  Works across architectures as the original layout does: a head absent from
  the directory stays fresh (reported missing), HF tensors the model has no
  place for are reported unused. Raises `CheckpointError` / `ConfigError`
  (one line) on a config that does not fit the model or cannot be
  represented, on a shape mismatch, and with `strict` on a missing weight.
  An activation or run option that differs from the HF config is a note:
  the weights load, the outputs will differ from transformers'.
  """
  directory = directory.rstrip("/") or directory
  data = read_hf_config(directory)
  spec = config_from_hf(data, os.path.join(directory, HF_CONFIG))
  encoder = _encoder_of(obj)
  cfg, opts = encoder.config, encoder.options
  theirs = spec.config
  wrong = [f"{k} {getattr(theirs, k)} vs model {getattr(cfg, k)}"
           for k in ("n_token", "d_model", "n_layer", "n_head", "d_head",
                     "d_inner") if getattr(theirs, k) != getattr(cfg, k)]
  if wrong:
    raise CheckpointError(f"{directory}: config.json does not fit the model: "
                          + "; ".join(wrong))
  notes = list(spec.notes)
  if theirs.ff_activation != cfg.ff_activation:
    notes.append(f"the checkpoint's ff_activation is "
                 f"{data.get('ff_activation', 'gelu')!r} (here "
                 f"{theirs.ff_activation!r}) but the model runs "
                 f"{cfg.ff_activation!r}")
  for key in ("attn_type", "bi_data", "clamp_len", "same_length"):
    if getattr(spec.options, key) != getattr(opts, key):
      notes.append(f"config.json runs {key}={getattr(spec.options, key)!r}, "
                   f"the model {key}={getattr(opts, key)!r}")

  tensors = read_hf_tensors(directory)
  prefix = ("transformer." if any(n.startswith("transformer.") for n in tensors)
            else "")
  tied = bool(data.get("tie_word_embeddings", True))
  targets = _targets(obj)
  staged, missing, mismatched, used, ignored = {}, [], [], set(), []
  for name, var in sorted(targets.items()):
    link = _link(name, cfg, prefix)
    if link is not None and all(n in tensors for n in link.hf):
      value = _from_hf(link, tensors, directory)
      used.update(link.hf)
    elif (name == _LM_WEIGHT and tied and
          prefix + _HF_EMBEDDING in tensors):
      # HF's LM head is tied to the embedding: an untied model here gets a
      # copy, which is what transformers multiplies by.
      value = tensors[prefix + _HF_EMBEDDING]
      notes.append("model/lm_loss/weight set from the tied word embedding")
    else:
      if not (name == _MASK_EMB and _MASK_EMB not in obj.original_weights()):
        missing.append(name)
      continue
    if list(value.shape) != var.shape.as_list():
      mismatched.append(f"{name}: checkpoint {list(value.shape)} vs model "
                        f"{var.shape.as_list()}")
      continue
    staged[name] = value
  if mismatched:
    raise CheckpointError(f"{directory}: shape mismatch for " +
                          "; ".join(mismatched))
  if strict and missing:
    raise CheckpointError(f"{directory}: strict load, {len(missing)} model "
                          "variable(s) missing in checkpoint: " +
                          ", ".join(missing))
  for name, value in staged.items():
    var = targets[name]
    var.assign(value.astype(var.dtype.as_numpy_dtype))
  lm_copy = "lm_loss.weight"
  if lm_copy in tensors and lm_copy not in used and tied:
    # transformers may store the tied copy; it is the embedding again.
    if np.array_equal(tensors[lm_copy], tensors.get(prefix + _HF_EMBEDDING)):
      ignored.append(lm_copy)
      used.add(lm_copy)
  unused = sorted(n for n in tensors if n not in used)
  if lm_copy in unused and model_kind(obj) == "lm":
    notes.append("the checkpoint's lm_loss.weight is not the embedding "
                 "(tie_word_embeddings=false): build XLNetPretrainer("
                 "tie_weight=False) to use it")
  report = HFLoadReport(directory, sorted(staged), unused, missing, ignored,
                        notes=notes, run_options=spec.options, spec=spec)
  logging.info(report.summary())
  return report


def save_hf_weights(obj, directory: str, architecture: Optional[str] = None
                    ) -> HFSaveReport:
  """Writes `obj` as an HF XLNet directory loadable by transformers'
  `<architecture>.from_pretrained(directory)`.

  `architecture` defaults to the object's own (`XLNetModel`,
  `XLNetLMHeadModel`, `XLNetForSequenceClassification` for classifier and
  regressor, `XLNetForMultipleChoice`, `XLNetForQuestionAnswering`); any model
  may also be saved as `XLNetModel` (its encoder). The files appear
  atomically. Raises `CheckpointError` for what HF cannot represent.
  """
  kind = model_kind(obj)
  architecture = architecture or ARCHITECTURES[kind]
  if architecture not in ARCHITECTURES.values():
    raise CheckpointError(f"unknown architecture {architecture!r}; use one of "
                          f"{', '.join(sorted(set(ARCHITECTURES.values())))}")
  config = hf_config(obj, architecture)
  cfg = _encoder_of(obj).config
  encoder_only = architecture == "XLNetModel"
  prefix = "" if encoder_only else "transformer."
  tensors: Dict[str, np.ndarray] = {}
  skipped, impossible = [], []
  for name, var in sorted(_targets(obj).items()):
    if encoder_only and not name.startswith(_SCOPE + "/"):
      skipped.append(name)
      continue
    link = _link(name, cfg, prefix)
    if link is None:
      impossible.append(name)
      continue
    tensors.update(_to_hf(link, var.numpy().astype(np.float32), cfg.n_layer))
  if impossible:
    raise CheckpointError("cannot be represented in HF XLNet: " +
                          ", ".join(impossible))
  notes = []
  if cfg.ff_activation == "gelu_exact":
    notes.append("ff_activation gelu_exact saved as HF 'gelu' (erf form)")
  _write_directory(directory, config, tensors)
  report = HFSaveReport(os.path.abspath(directory), architecture,
                        sorted(tensors), skipped, notes)
  logging.info(report.summary())
  return report


def load_hf_model(directory: str, model: Optional[str] = None,
                  options: Optional[RunOptions] = None, strict: bool = False,
                  **head):
  """Builds the model an HF directory describes and loads it: returns
  `(model, report)`. `model` (a key of `ARCHITECTURES`), `options` and head
  arguments override what config.json implies.

  Example (any directory written by `save_pretrained`):
    model, report = load_hf_model("xlnet-base-cased")
    model(input_ids, segment_ids=token_type_ids, input_mask=1 - attention_mask)
  """
  spec = config_from_hf(read_hf_config(directory),
                        os.path.join(directory, HF_CONFIG))
  obj = spec.build(options=options, model=model, **head)
  return obj, load_hf_weights(obj, directory, strict=strict)
