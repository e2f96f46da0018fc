"""`python -m xlnet_tf.convert`: converts weights between the three formats.

  original  a TF1 checkpoint in the original variable layout (the released
            XLNet models, `save_original_checkpoint`), with its
            `xlnet_config.json`
  native    a TF2 object checkpoint of this project (`save_native_checkpoint`,
            the training loop's checkpoints)
  hf        a HuggingFace directory: config.json + model.safetensors

    python -m xlnet_tf.convert --from=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \\
        --to=hf/xlnet-base --to_format=hf --model=lm
    python -m xlnet_tf.convert --from=hf/my-sst2 --to=ckpt/sst2/model.ckpt \\
        --to_format=original --model=classification --task_name=sst-2

The source format is detected. The weights go through the model that
`--model` names (default: what the source holds), so what the target cannot
hold is reported, not silently dropped: the report lists what was converted,
what the source lacked (missing: left at its fresh initial value) and what
the model had no place for (unused). original/native targets get an
`xlnet_config.json` beside the checkpoint. Errors are one line; exit code 2.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from typing import List, Optional, Sequence

from data_utils.errors import UserError, run_main
from xlnet_tf.config import RunOptions, XLNetConfig

MODELS = ("base", "lm", "classification", "regression", "multiple_choice",
          "qa")
FORMATS = ("original", "native", "hf")
CONFIG_NAME = "xlnet_config.json"
DEFAULT_PREFIX = "model.ckpt"


class ConvertError(UserError):
  """A conversion that cannot be done as asked (one-line message)."""


class _Parser(argparse.ArgumentParser):
  """Usage errors as one line and exit code 2, like conversion errors."""

  def error(self, message):
    sys.stderr.write(f"convert: error: {message}\n")
    sys.exit(2)


def _parser() -> argparse.ArgumentParser:
  p = _Parser(prog="python -m xlnet_tf.convert",
              description="Convert XLNet weights between the original TF1 "
              "layout, this project's native checkpoints and HuggingFace.")
  p.add_argument("--from", dest="source", required=True,
                 help="checkpoint prefix or directory, or an HF directory")
  p.add_argument("--to", dest="target", required=True,
                 help="checkpoint prefix (a directory gets "
                 f"{DEFAULT_PREFIX} in it) or an HF directory")
  p.add_argument("--to_format", required=True, choices=FORMATS)
  p.add_argument("--from_format", default="auto", choices=("auto",) + FORMATS,
                 help="normally detected")
  p.add_argument("--model", choices=MODELS,
                 help="the model the weights belong to (default: detected "
                 "from the source; required for native sources)")
  p.add_argument("--task_name", help="classification/regression scope "
                 "(model/classification_<task>/logit); default: detected")
  p.add_argument("--n_class", type=int, help="classes (default: detected)")
  p.add_argument("--summary_type", choices=("last", "first", "mean", "attn"),
                 help="sequence summary (default: detected, else last)")
  p.add_argument("--use_summ_proj", default=None,
                 action=argparse.BooleanOptionalAction,
                 help="tanh projection in the summary (default: detected)")
  p.add_argument("--untied_lm", action="store_true",
                 help="the LM head has its own weight (native sources; "
                 "detected otherwise)")
  p.add_argument("--config", help=f"{CONFIG_NAME} (default: the one beside "
                 "the source checkpoint, or the HF config.json)")
  p.add_argument("--overwrite", action="store_true",
                 help="replace the target's files if they exist")
  return p


def _detect_format(path: str) -> str:
  from xlnet_tf import checkpoint, hf
  if hf.is_hf_directory(path):
    return "hf"
  prefix = checkpoint.resolve_checkpoint(path)
  return "native" if checkpoint.is_native_checkpoint(prefix) else "original"


def _original_names(path: str) -> dict:
  from xlnet_tf import checkpoint
  return checkpoint.open_checkpoint(path)[1].get_variable_to_shape_map()


def _scopes(names, kind: str) -> List[str]:
  return sorted({m.group(1) for n in names
                 for m in [re.fullmatch(rf"model/{kind}_(.+)/logit/bias", n)]
                 if m})


def _detect_from_original(names: dict, args) -> tuple:
  """(model kind, head arguments) from an original checkpoint's names."""
  head = {}
  classes, regressions = _scopes(names, "classification"), _scopes(
      names, "regression")
  if args.model:
    model = args.model
  elif classes:
    model = "classification"
  elif regressions:
    model = "regression"
  elif "logits/dense/bias" in names:
    model = "multiple_choice"
  elif "start_logits/dense/bias" in names:
    model = "qa"
  elif "model/lm_loss/bias" in names:
    model = "lm"
  else:
    model = "base"
  scopes = classes if model == "classification" else regressions
  if model in ("classification", "regression") and not args.task_name:
    if len(scopes) > 1:
      raise ConvertError(f"the checkpoint holds {model} heads for "
                         f"{', '.join(scopes)}: pick one with --task_name")
    if scopes:
      head["task_name"] = scopes[0]
  task = (args.task_name or head.get("task_name", "task")).lower()
  bias = f"model/classification_{task}/logit/bias"
  if model == "classification" and bias in names:
    head["n_class"] = int(names[bias][0])
  summary = "model/sequnece_summary"
  if any(n.startswith(summary + "/") for n in names):
    # Only a checkpoint with a summary says how it is built; otherwise the
    # model's defaults stand (its summary starts fresh).
    if f"{summary}/summary_bias" in names:
      head["summary_type"] = "attn"
    head["use_proj"] = f"{summary}/summary/kernel" in names
  head["tie_weight"] = "model/lm_loss/weight" not in names
  return model, head


def _detect_from_native(names: dict) -> dict:
  """Head arguments from a native checkpoint's object-graph names, as far as
  shapes tell (the task name is not stored: pass --task_name)."""
  head = {}
  for name, shape in names.items():
    if name.startswith("model/logit/dense/bias/") and shape:
      head["n_class"] = int(shape[0])
  summary = [n for n in names if "summary_bias" in n or "/projection/" in n]
  if summary:
    head["use_proj"] = any("/projection/kernel" in n for n in summary)
    if any("summary_bias" in n for n in summary):
      head["summary_type"] = "attn"
  if any(re.search(r"model/(lm_head|heads/0)/weight/", n) for n in names):
    head["tie_weight"] = False
  return head


def _load_config(path: Optional[str], source: str, fmt: str):
  if path:
    return XLNetConfig.from_json(path)
  base = source if os.path.isdir(source) else os.path.dirname(
      os.path.abspath(source))
  candidate = os.path.join(base, CONFIG_NAME)
  if os.path.isfile(candidate):
    return XLNetConfig.from_json(candidate)
  raise ConvertError(f"{source}: no {CONFIG_NAME} beside the {fmt} "
                     "checkpoint; pass --config")


def _target_prefix(target: str) -> str:
  if target.endswith(os.sep) or os.path.isdir(target):
    return os.path.join(target, DEFAULT_PREFIX)
  return target


def target_files(target: str, to_format: str) -> List[str]:
  """The files a conversion to `target` writes or replaces (checkpoint data
  files by pattern: their shard count is known only once written)."""
  if to_format == "hf":
    return [os.path.join(target, name) for name in ("config.json",
                                                    "model.safetensors")]
  prefix = _target_prefix(target)
  directory = os.path.dirname(os.path.abspath(prefix))
  return [prefix + ".index", prefix + ".data-*",
          os.path.join(directory, CONFIG_NAME),
          os.path.join(directory, "checkpoint")]


def check_target(args) -> None:
  """Refuses, before any work, to replace a file that is already there
  (someone's checkpoint, config or a training run's `checkpoint` state
  file) unless --overwrite."""
  if args.overwrite:
    return
  for pattern in target_files(args.target, args.to_format):
    found = sorted(glob.glob(glob.escape(os.path.dirname(pattern)) + os.sep +
                             os.path.basename(pattern)))
    if found:
      raise ConvertError(f"--to={args.target}: {found[0]} exists; choose "
                         "another --to, or pass --overwrite to replace it")


def convert(args) -> List[str]:
  """Does the conversion `args` asks for; returns the report lines."""
  from xlnet_tf import checkpoint, hf
  from xlnet_tf.encoder import XLNetModel

  check_target(args)
  fmt = args.from_format
  if fmt == "auto":
    fmt = _detect_format(args.source)
  lines = [f"from {args.source} ({fmt})"]
  head: dict = {}
  notes: List[str] = []
  # The original's defaults; they shape no weight, and an HF target records
  # them in its config.json (dropout, attention type, ...).
  options = RunOptions()
  if fmt == "hf":
    spec = hf.config_from_hf(hf.read_hf_config(args.source),
                             os.path.join(args.source, hf.HF_CONFIG))
    config = XLNetConfig.from_json(args.config) if args.config else spec.config
    # Keep the HF run options so that an HF -> HF conversion keeps them.
    options = spec.options
    model = args.model or spec.model
    head = dict(spec.head)
  else:
    config = _load_config(args.config, args.source, fmt)
    if fmt == "original":
      model, head = _detect_from_original(_original_names(args.source), args)
    else:
      if not args.model:
        raise ConvertError(f"{args.source}: a native checkpoint does not say "
                           "which model it holds; pass --model")
      model = args.model
      head = _detect_from_native(_original_names(args.source))
      if args.untied_lm:
        head["tie_weight"] = False
  for key, value in (("task_name", args.task_name), ("n_class", args.n_class),
                     ("summary_type", args.summary_type),
                     ("use_proj", args.use_summ_proj)):
    if value is not None:
      head[key] = value
  obj = hf.build_model(model, config, options, **head)
  shown = ", ".join(f"{k}={v}" for k, v in sorted(head.items())
                    if _applies(k, model))
  lines.append(f"model {model} ({type(obj).__name__})" +
               (f": {shown}" if shown else ""))

  if fmt == "hf":
    report = hf.load_hf_weights(obj, args.source)
    notes += report.notes
  elif fmt == "original":
    report = checkpoint.load_original_checkpoint(obj, args.source)
  else:
    checkpoint.load_native_checkpoint(obj, args.source)
    report = None
  if report is not None:
    lines.append(f"converted {len(report.loaded)} tensors")
    if report.missing:
      lines.append(f"missing in source, left at initial values "
                   f"({len(report.missing)}): " + ", ".join(report.missing))
    if report.unused:
      lines.append(f"skipped, no place in the {model} model "
                   f"({len(report.unused)}): " + ", ".join(report.unused))
    if report.ignored:
      lines.append(f"ignored ({len(report.ignored)}): " +
                   ", ".join(report.ignored))
  else:
    lines.append("converted every tensor of the model (native restore, "
                 "object graph matched)")

  if args.to_format == "hf":
    if (fmt != "hf" and report is not None and
        "model/transformer/mask_emb/mask_emb" not in report.loaded and
        not getattr(obj, "uses_query_stream", False)):
      # A fine-tuned checkpoint has no mask_emb; HF always holds one.
      notes.append("mask_emb is not in the source (fine-tuned); written from "
                   "its initial value")
    saved = hf.save_hf_weights(obj, args.target)
    notes += saved.notes
    lines.append(f"wrote {saved.path} ({saved.architecture}, "
                 f"{len(saved.written)} tensors)")
  else:
    prefix = _target_prefix(args.target)
    if args.to_format == "original":
      if (report is not None and not isinstance(obj, XLNetModel) and
          not obj.uses_query_stream and
          "model/transformer/mask_emb/mask_emb" in report.loaded):
        notes.append("mask_emb not written: fine-tuned models in the "
                     "original layout have none")
      written = checkpoint.save_original_checkpoint(obj, prefix)
    else:
      written = checkpoint.save_native_checkpoint(obj, prefix)
    config_path = os.path.join(os.path.dirname(os.path.abspath(written)),
                               CONFIG_NAME)
    config.to_json(config_path)
    lines.append(f"wrote {written} ({args.to_format}) and {config_path}")
    if config.ff_activation == "gelu_exact" and args.to_format == "original":
      notes.append("ff_activation 'gelu_exact' (HF 'gelu') is unknown to the "
                   "original code, which would need 'gelu' (tanh form)")
  lines += [f"note: {n}" for n in notes]
  return lines


def _applies(key: str, model: str) -> bool:
  pooled = model in ("classification", "regression", "multiple_choice")
  return {"task_name": model in ("classification", "regression"),
          "n_class": model == "classification",
          "summary_type": pooled, "use_proj": pooled,
          "tie_weight": model == "lm",
          "start_n_top": model == "qa", "end_n_top": model == "qa"}.get(
              key, False)


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = _parser().parse_args(argv)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  return run_main("convert: error", lambda: print("\n".join(convert(args))))


if __name__ == "__main__":
  sys.exit(main())
