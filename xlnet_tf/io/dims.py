"""What a checkpoint says of the model's shape, read without loading a
weight: the TF index of either layout (original names or a native object
graph) or an HF directory's `config.json` (which `load_hf_weights` holds to
its weights). `check_config_fits` refuses a config that does not fit in one
line naming both shapes, before anything is built.

  checkpoint_dims("pretrain/model_dir")["d_model"]
  # Dim(value=32, tensor='model/encoder/word_embedding.Slookup_table',
  #     shape=[32000, 32], dims=('n_token', 'd_model'))
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List, Optional, Tuple

from xlnet_tf.checkpoint_files import open_checkpoint
from xlnet_tf.config import ConfigError, XLNetConfig
from xlnet_tf.io.hf_config import HF_CONFIG, config_from_hf
from xlnet_tf.io.hf_files import is_hf_directory, read_hf_config

# The model config keys a checkpoint's shapes fix, in the order a message
# lists them.
DIMS = ("n_layer", "n_token", "d_model", "n_head", "d_head", "d_inner",
        "untie_r")

# Tensors of either TF layout (`model/transformer/layer_0/rel_attn/q/kernel`
# or `model/encoder/blocks/0/rel_attn/q.Skernel/.ATTRIBUTES/...`) and the
# config keys their dimensions are.
_TENSORS: Tuple[Tuple[re.Pattern, Tuple[str, ...]], ...] = (
    (re.compile(r"(^|/)word_embedding(/|\.S)lookup_table$"),
     ("n_token", "d_model")),
    (re.compile(r"(^|/)(layer_0|blocks/0)/rel_attn/q(/|\.S)kernel$"),
     ("d_model", "n_head", "d_head")),
    (re.compile(r"(^|/)(layer_0|blocks/0)/ff/layer_1/kernel$"),
     ("d_model", "d_inner")),
)
# [n_layer, n_head, d_head] with untie_r, one [n_head, d_head] without.
_BIAS = re.compile(r"(^|/)r_w_bias$")
_BIAS_DIMS = {True: ("n_layer", "n_head", "d_head"),
              False: ("n_head", "d_head")}
_LAYER = re.compile(r"(?:^|/)(?:transformer/layer_|encoder/blocks/)(\d+)/")
_NATIVE_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Optimizer slots have their variable's shape; the variable is the one named.
_SLOT = re.compile(r"\.OPTIMIZER_SLOT|/(adam_[mv]|Adam(_1)?|Momentum)$")


@dataclasses.dataclass(frozen=True)
class Dim:
  """One config key as a checkpoint shows it: its value and the tensor
  (name, shape, the config keys of its dimensions) it was read from; an HF
  directory's come from its config.json (tensor 'config.json', no shape)."""
  value: object
  tensor: str
  shape: Optional[List[int]] = None
  dims: Tuple[str, ...] = ()


def _tf_dims(path: str) -> Dict[str, Dim]:
  _, reader = open_checkpoint(path)
  shapes = {}
  for name, shape in reader.get_variable_to_shape_map().items():
    if _SLOT.search(name):
      continue
    shapes[name[:-len(_NATIVE_VALUE)] if name.endswith(_NATIVE_VALUE)
           else name] = [int(d) for d in shape]
  found: Dict[str, Dim] = {}
  for pattern, dims in _TENSORS:
    for name in sorted(n for n in shapes if pattern.search(n)):
      if len(shapes[name]) == len(dims):
        for key, value in zip(dims, shapes[name]):
          found.setdefault(key, Dim(value, name, shapes[name], dims))
        break
  for name in sorted(n for n in shapes if _BIAS.search(n)):
    untied = len(shapes[name]) == 3
    found["untie_r"] = Dim(untied, name, shapes[name], _BIAS_DIMS[untied])
    break
  layers = {int(m.group(1)) for m in map(_LAYER.search, shapes) if m}
  if layers:
    found["n_layer"] = Dim(max(layers) + 1,
                           f"its layers are 0..{max(layers)}")
  return found


def _hf_dims(directory: str) -> Dict[str, Dim]:
  config = config_from_hf(read_hf_config(directory),
                          os.path.join(directory, HF_CONFIG)).config
  # HF holds one bias per layer whatever untie_r was: it fixes no layout.
  return {k: Dim(getattr(config, k), HF_CONFIG) for k in DIMS
          if k != "untie_r"}


def checkpoint_dims(path: str) -> Dict[str, Dim]:
  """The config keys (`DIMS`) the checkpoint at `path` fixes: a TF prefix or
  directory of either layout, or an HF directory. Keys its tensors do not
  show (e.g. d_inner of an encoder without layers) are left out."""
  return _hf_dims(path) if is_hf_directory(path) else _tf_dims(path)


def _model_shape(config: XLNetConfig, dim: Dim) -> List[int]:
  """The shape `config` gives the tensor `dim` was read from."""
  keys = _BIAS_DIMS[config.untie_r] if dim.dims in _BIAS_DIMS.values() \
      else dim.dims
  return [getattr(config, k) for k in keys]


def check_config_fits(config: XLNetConfig, path: str, where: str) -> None:
  """ConfigError unless the checkpoint at `path` was trained with
  `config`'s shape (`where`: how the message names the config, e.g.
  `--model_config_path=x.json`).

  The message names both values and the tensor that shows it, e.g.
  `--model_config_path=big.json: d_model 64 but the checkpoint m/ckpt-1 has
  d_model 32 (model/encoder/word_embedding.Slookup_table: checkpoint
  [32000, 32] vs model [32000, 64])`."""
  found = checkpoint_dims(path)
  wrong = [k for k in DIMS if k in found
           and found[k].value != getattr(config, k)]
  if not wrong:
    return
  ours = ", ".join(f"{k} {_shown(getattr(config, k))}" for k in wrong)
  theirs = ", ".join(f"{k} {_shown(found[k].value)}" for k in wrong)
  first = found[wrong[0]]
  if first.shape is not None:
    why = (f"{first.tensor}: checkpoint {first.shape} vs model "
           f"{_model_shape(config, first)}")
  elif first.tensor == HF_CONFIG:
    why = f"its {HF_CONFIG}"
  else:
    why = first.tensor
  label = path if is_hf_directory(path) else open_checkpoint(path)[0]
  raise ConfigError(f"{where}: {ours} but the checkpoint {label} has "
                    f"{theirs} ({why})")


def _shown(value) -> str:
  return str(value).lower() if isinstance(value, bool) else str(value)
