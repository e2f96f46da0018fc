"""HuggingFace XLNet weights in and out of a model of this project.

`obj` below is an `XLNetModel` or a task model holding one as `.encoder`:
anything with `original_weights()` (original name -> variable) whose
encoder has `config`, `options` and (once built) `mask_emb`. Names are
mapped by `hf_names`, the config by `hf_config`, files by `hf_files`;
reading and writing use NumPy and the `safetensors` package only (no
torch). Building the model an HF
directory describes needs the task models: `xlnet_tf.pretrained`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from data_utils import paths
from xlnet_tf.building import build_once
from xlnet_tf.checkpoint_files import CheckpointError
from xlnet_tf.config import RunOptions
from xlnet_tf.io.hf_config import HF_CONFIG, HFModelSpec, config_from_hf
from xlnet_tf.io.hf_files import (read_hf_config, read_hf_tensors,
                                  write_hf_directory)
from xlnet_tf.io.hf_names import (ENCODER_SCOPE, HF_EMBEDDING, MASK_EMB,
                                  from_hf, link_of, to_hf)
from xlnet_tf.io.report import LoadReport
# HF's XLNetLMHeadModel ties its head to the word embedding.
from xlnet_tf.tasks.language_model.formats import LM_BIAS, LM_WEIGHT


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


def encoder_of(obj):
  """The `XLNetModel` of `obj` (itself, or its `.encoder`)."""
  encoder = getattr(obj, "encoder", obj)
  if not all(hasattr(encoder, a) for a in ("config", "options",
                                           "original_weights")):
    raise CheckpointError(
        f"HuggingFace weights: a {type(obj).__name__} has no HF counterpart; "
        "use XLNetModel or a task model (classifier, regressor, multiple "
        "choice, question answering, pretrainer)")
  return encoder


def _targets(obj) -> Dict[str, tf.Variable]:
  build_once(obj)
  weights = dict(obj.original_weights())
  # HF holds mask_emb in every architecture; fine-tuned models here leave it
  # out of their original names but still have it.
  weights.setdefault(MASK_EMB, encoder_of(obj).mask_emb)
  return weights


def _config_notes(spec: HFModelSpec, data: dict, encoder, directory: str
                  ) -> List[str]:
  """Refuses a config.json whose shapes do not fit the encoder; notes what
  differs in how it runs (the weights load, the outputs will differ)."""
  cfg, opts, theirs = encoder.config, encoder.options, spec.config
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
  return notes


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
  spec = config_from_hf(data, paths.join(directory, HF_CONFIG))
  encoder = encoder_of(obj)
  notes = _config_notes(spec, data, encoder, directory)
  tensors = read_hf_tensors(directory)
  prefix = ("transformer." if any(n.startswith("transformer.") for n in tensors)
            else "")
  tied = bool(data.get("tie_word_embeddings", True))
  targets = _targets(obj)
  staged, missing, mismatched, used, ignored = {}, [], [], set(), []
  for name, var in sorted(targets.items()):
    link = link_of(name, encoder.config, prefix)
    if link is not None and all(n in tensors for n in link.hf):
      value = from_hf(link, tensors, directory)
      used.update(link.hf)
    elif name == LM_WEIGHT and tied and prefix + HF_EMBEDDING in tensors:
      # HF's LM head is tied to the embedding: an untied model here gets a
      # copy, which is what transformers multiplies by.
      value = tensors[prefix + HF_EMBEDDING]
      notes.append(f"{LM_WEIGHT} set from the tied word embedding")
    else:
      if not (name == MASK_EMB and MASK_EMB not in obj.original_weights()):
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
    if np.array_equal(tensors[lm_copy], tensors.get(prefix + HF_EMBEDDING)):
      ignored.append(lm_copy)
      used.add(lm_copy)
  unused = sorted(n for n in tensors if n not in used)
  if lm_copy in unused and LM_BIAS in targets:
    notes.append("the checkpoint's lm_loss.weight is not the embedding "
                 "(tie_word_embeddings=false): build XLNetPretrainer("
                 "tie_weight=False) to use it")
  report = HFLoadReport(directory, sorted(staged), unused, missing, ignored,
                        notes=notes, run_options=spec.options, spec=spec)
  logging.info(report.summary())
  return report


def write_hf_weights(obj, directory: str, config: dict) -> HFSaveReport:
  """Writes `obj`'s weights with `config` (`config_to_hf`'s dict: its
  `architectures[0]` says which) as an HF directory, atomically. Saved as
  `XLNetModel`, only the encoder's weights go (the rest is reported
  skipped). Raises `CheckpointError` for a weight HF has no name for."""
  architecture = config["architectures"][0]
  cfg = encoder_of(obj).config
  encoder_only = architecture == "XLNetModel"
  prefix = "" if encoder_only else "transformer."
  tensors: Dict[str, np.ndarray] = {}
  skipped, impossible = [], []
  for name, var in sorted(_targets(obj).items()):
    if encoder_only and not name.startswith(ENCODER_SCOPE + "/"):
      skipped.append(name)
      continue
    link = link_of(name, cfg, prefix)
    if link is None:
      impossible.append(name)
      continue
    tensors.update(to_hf(link, var.numpy().astype(np.float32), cfg.n_layer))
  if impossible:
    raise CheckpointError("cannot be represented in HF XLNet: " +
                          ", ".join(impossible))
  notes = []
  if cfg.ff_activation == "gelu_exact":
    notes.append("ff_activation gelu_exact saved as HF 'gelu' (erf form)")
  write_hf_directory(directory, config, tensors)
  report = HFSaveReport(paths.absolute(directory), architecture,
                        sorted(tensors), skipped, notes)
  logging.info(report.summary())
  return report
