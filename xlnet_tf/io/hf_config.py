"""HuggingFace XLNet `config.json` <-> `XLNetConfig`, `RunOptions` and a
task model's head arguments.

vocab_size <-> n_token; d_model, n_layer, n_head, d_head, d_inner as they
are; ff_activation: this project's 'gelu' (the original's tanh form) <-> HF
'gelu_new', 'gelu_exact' <-> HF 'gelu' (erf), 'relu' <-> 'relu'; untie_r is
kept as an extra key (HF ignores it). attn_type, bi_data, clamp_len,
same_length, mem_len, reuse_len and dropout are run options here
(`RunOptions`), suggested by the import. A classification head's classes
are id2label's names in id order (transformers' rule: id2label decides;
label2id is written, not read). What has no counterpart (another LayerNorm
epsilon, activation or attention type, an 'attn' summary, ...) or
contradicts itself (num_labels against id2label) is refused with a
one-line error.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

from absl import logging

from xlnet_tf.checkpoint_files import CheckpointError
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.io.hf_heads import is_count
from xlnet_tf.layers.layer_norm import LAYER_NORM_EPSILON
from xlnet_tf.tasks.registry import specs_of_architecture

HF_CONFIG = "config.json"

_ACT_TO_HF = {"relu": "relu", "gelu": "gelu_new", "gelu_exact": "gelu"}
# 'gelu_pytorch_tanh' is HF's fused kernel for the same tanh formula.
_ACT_FROM_HF = {"relu": "relu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "gelu": "gelu_exact"}


@dataclasses.dataclass(frozen=True)
class HFModelSpec:
  """What an HF `config.json` means here.

  config: the `XLNetConfig`; options: the `RunOptions` that reproduce the HF
  model's forward pass; model: the model kind, "base" (the encoder) or a
  task's name (`xlnet_tf/tasks/registry.py`, which pairs each with its
  architecture; a test holds the two equal); head: keyword
  arguments of that task model (n_class, task_name, summary_type,
  use_summ_proj, tie_weight, start_n_top, end_n_top) plus, for the
  classification kinds, `labels` (class names by id, from id2label; no model
  takes them, `build_model` ignores them); notes: what was mapped with a
  caveat.
  """
  config: XLNetConfig
  options: RunOptions
  architecture: str
  model: str
  head: dict
  notes: Tuple[str, ...] = ()



def _req(data: dict, key: str, source: str, *aliases):
  for k in (key,) + aliases:
    if k in data and data[k] is not None:
      return data[k]
  raise ConfigError(f"{source}: missing key '{key}'")


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
        d_head=data.get("d_head") or (d_model // n_head if is_count(d_model)
                                      and is_count(n_head) else None),
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
  model, head = "base", {}
  specs = specs_of_architecture(architecture)
  if specs:
    model, head = specs[0].hf_head(data, source, notes)
  elif architecture != "XLNetModel":
    notes.append(f"architecture {architecture} has no counterpart here; its "
                 "encoder is imported")
  return HFModelSpec(config, options, architecture, model, head, tuple(notes))


def config_to_hf(config: XLNetConfig, options: RunOptions,
                 architecture: str = "XLNetModel", head: Optional[dict] = None
                 ) -> dict:
  """The HF `config.json` contents of an encoder (`config`, `options`) saved
  as `architecture` (one of transformers' XLNet classes) with a task head described
  by `head`: summary_type, use_summ_proj (pooled heads), n_class (None:
  regression), labels (class names by id; default HF's LABEL_<i>),
  task_name, tie_weight, start_n_top, end_n_top. Raises `CheckpointError`
  for what HF cannot represent.

  Example:
    >>> cfg = XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4,
    ...                   d_inner=16, n_token=10)
    >>> data = config_to_hf(cfg, RunOptions(), "XLNetForSequenceClassification",
    ...                     {"summary_type": "mean", "use_summ_proj": False,
    ...                      "n_class": 3, "task_name": "mnli"})
    >>> data["summary_activation"], data["problem_type"], data["pad_token_id"]
    ('linear', 'single_label_classification', 5)
  """
  head = head or {}
  if config.d_head * config.n_head != config.d_model:
    raise CheckpointError(
        f"d_head={config.d_head} with n_head={config.n_head}, "
        f"d_model={config.d_model} cannot be represented: transformers "
        "requires d_head == d_model / n_head")
  if options.dropatt != options.dropout:
    logging.info("HF XLNet has one dropout rate: dropatt=%s not saved",
                 options.dropatt)
  data = {
      "architectures": [architecture], "model_type": "xlnet",
      "vocab_size": config.n_token, "d_model": config.d_model,
      "n_layer": config.n_layer, "n_head": config.n_head,
      "d_head": config.d_head, "d_inner": config.d_inner,
      "ff_activation": _ACT_TO_HF[config.ff_activation],
      # HF ignores it (one bias per layer always); kept so that an import
      # restores the shared layout of an untie_r=false model.
      "untie_r": config.untie_r,
      "layer_norm_eps": LAYER_NORM_EPSILON,
      "attn_type": options.attn_type, "bi_data": options.bi_data,
      "clamp_len": options.clamp_len, "same_length": options.same_length,
      "mem_len": options.mem_len, "reuse_len": options.reuse_len,
      "dropout": options.dropout, "initializer_range": options.init_std,
      "summary_type": "last", "summary_use_proj": True,
      "summary_activation": "tanh", "summary_last_dropout": options.dropout,
      "start_n_top": 5, "end_n_top": 5,
      "tie_word_embeddings": True,
      "dtype": "float32",
  }
  # The released SentencePiece vocabulary's ids (HF's defaults), when the
  # vocabulary is large enough to hold them.
  for key, token_id in (("pad_token_id", 5), ("bos_token_id", 1),
                        ("eos_token_id", 2)):
    data[key] = token_id if token_id < config.n_token else None
  specs = specs_of_architecture(architecture)
  if specs:
    data.update(specs[0].hf_fields(head))
  return data
