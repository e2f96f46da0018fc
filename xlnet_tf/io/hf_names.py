"""One original tensor name <-> its HuggingFace XLNet name(s) and layout.

Weights (D d_model, N n_head, H d_head, F d_inner, V n_token, L n_layer;
HF names of the encoder carry `transformer.` in every architecture but
`XLNetModel`; the heads' rows are their tasks', `tasks/<task>/formats.py`):

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
  model/token_classification_<task>/logit/      classifier.weight [C, D] (T)|bias [C]
      kernel [D, C] | bias [C] (C classes)      (XLNetForTokenClassification)
  start_logits/dense, end_logits/dense_{0,1},   same names, kernel -> weight (T),
  end_logits/LayerNorm, answer_class/dense_{0,1} gamma/beta -> weight/bias
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Optional, Tuple

import numpy as np

from xlnet_tf.checkpoint_files import CheckpointError
from xlnet_tf.config import XLNetConfig
from xlnet_tf.encoder import XLNetModel
from xlnet_tf.tasks.registry import TASKS

# The encoder's scope in the original's checkpoints (its variable names).
ENCODER_SCOPE = XLNetModel.ORIGINAL_SCOPE
MASK_EMB = f"{ENCODER_SCOPE}/mask_emb/mask_emb"
HF_EMBEDDING = "word_embedding.weight"
_SCOPE = ENCODER_SCOPE

# One original name <-> one HF name: (pattern, HF template, transpose,
# encoder). Dense kernels are [in, out] in TF and [out, in] in torch Linear;
# the attention projections are plain [D, N, H] parameters on both sides.
# The heads' rules are their tasks' (`TaskSpec.hf_names`).
_RULES = [
    (rf"{_SCOPE}/word_embedding/lookup_table", HF_EMBEDDING, False, True),
    (MASK_EMB, "mask_emb", False, True),
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
] + [(pattern, template, transpose, False) for pattern, template, transpose
      in dict.fromkeys(rule for spec in TASKS for rule in spec.hf_names)]
# Stacked over layers in the original, one per layer in HF.
_STACKED = re.compile(rf"{_SCOPE}/(r_w_bias|r_r_bias|r_s_bias|seg_embed)")


@dataclasses.dataclass(frozen=True)
class Link:
  """How one original tensor is stored in HF."""
  original: str
  hf: Tuple[str, ...]       # one name, or one per layer when `stacked`
  transpose: bool = False
  stacked: bool = False
  shared: bool = False      # stacked, but one [N, H] for all layers (untie_r=false)


def link_of(name: str, config: XLNetConfig, prefix: str) -> Optional[Link]:
  """The HF counterpart of original `name`, or None (none exists)."""
  match = _STACKED.fullmatch(name)
  if match:
    what = match.group(1)
    return Link(name, tuple(f"{prefix}layer.{i}.rel_attn.{what}"
                            for i in range(config.n_layer)),
                stacked=True,
                shared=not config.untie_r and what != "seg_embed")
  for pattern, template, transpose, encoder in _RULES:
    match = re.fullmatch(pattern, name)
    if match:
      hf = match.expand(template)
      return Link(name, ((prefix if encoder else "") + hf,), transpose)
  return None


def to_hf(link: Link, value: np.ndarray, n_layer: int
          ) -> Dict[str, np.ndarray]:
  """`value` (original layout) as the HF tensors of `link`."""
  if link.stacked:
    parts = [value] * n_layer if link.shared else list(value)
    return {n: np.ascontiguousarray(p) for n, p in zip(link.hf, parts)}
  if link.transpose:
    value = value.T
  return {link.hf[0]: np.ascontiguousarray(value)}


def from_hf(link: Link, tensors: Dict[str, np.ndarray], source: str
            ) -> np.ndarray:
  """The original-layout value of `link` from HF `tensors`."""
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
