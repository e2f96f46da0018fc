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

Run options (attention type, bi_data, clamp_len, memory, dropout) shape no
weight, but an HF target records them in config.json and transformers
computes with them. They come from the `run_options.json` that
`run_pretrain.py` writes beside its checkpoints (found beside the source or
in the folder above it, or named by `--run_options`), or from an HF
source's config.json, and the flags of the same names override them.
attn_type, clamp_len and same_length shape every output and travel;
the pretraining-only ones (bi_data, mem_len, reuse_len: how pretraining
batched its data) are reset for inference unless given as flags or
`--carry_pretraining_options` (bi_data makes transformers fail at batch
size 1 and mix up other batches' rows). The report says which were carried:

    python -m xlnet_tf.convert --from=pretrain/model_dir --model=lm \
        --to=hf/mine --to_format=hf --clamp_len=512
"""

from __future__ import annotations

import glob
import os
import re
import sys
from typing import List, Optional, Sequence

from data_utils import paths
from data_utils.errors import UsageError, run_main
from data_utils.text_files import read_json
from xlnet_tf.checkpoint_files import is_native_checkpoint, resolve_checkpoint
from xlnet_tf.config import ConfigError, RunOptions, XLNetConfig
from xlnet_tf.io import (is_hf_directory, load_hf_weights,
                         load_native_checkpoint, load_original_checkpoint,
                         open_checkpoint, read_hf_config,
                         save_native_checkpoint, save_original_checkpoint)
from xlnet_tf.convert_args import (CONFIG_NAME, DEFAULT_PREFIX,
                                   PRETRAINING_ONLY, PROGRAM,
                                   RUN_OPTION_FLAGS, RUN_OPTIONS, ConvertArgs,
                                   ConvertError, check_locations, flag_values,
                                   parse_args)
from xlnet_tf.io.hf_config import HF_CONFIG, config_from_hf
from xlnet_tf.io.hf_files import HF_WEIGHTS
from xlnet_tf.io.hf_names import MASK_EMB
from xlnet_tf.model_folder import read_config
from xlnet_tf.pretrained import (BASE, build_model, file_beside,
                                 save_hf_weights)
from xlnet_tf.tasks.language_model.formats import LM_WEIGHT
from xlnet_tf.tasks.registry import TASKS, task_spec
from xlnet_tf.tasks.spec import TaskSpec


def _detect_format(path: str) -> str:
  if is_hf_directory(path):
    return "hf"
  prefix = resolve_checkpoint(path)
  return "native" if is_native_checkpoint(prefix) else "original"


def _original_names(path: str) -> dict:
  return open_checkpoint(path)[1].get_variable_to_shape_map()


def _scopes(names, spec: TaskSpec) -> List[str]:
  """The task names of `spec`'s heads in an original checkpoint."""
  before, _, after = spec.original_head.partition("{}")
  pattern = re.escape(before) + "(.+)" + re.escape(after)
  return sorted({m.group(1) for n in names
                 for m in [re.fullmatch(pattern, n)] if m})


def _detect_from_original(names: dict, args) -> tuple:
  """(model kind, head arguments) from an original checkpoint's names: the
  first task whose head carries a task name and is there, else the first
  whose head is there (`TaskSpec.original_head`), else the encoder."""
  head = {}
  scopes_of = {s.name: _scopes(names, s) for s in TASKS if s.scoped}
  if args.model:
    model = args.model
  else:
    model = next((kind for kind, scopes in scopes_of.items() if scopes),
                 None) or next((s.name for s in TASKS if not s.scoped
                                and s.original_head in names), BASE)
  scopes = scopes_of.get(model, [])
  if model in scopes_of and not args.task_name:
    if len(scopes) > 1:
      raise ConvertError(f"the checkpoint holds {model} heads for "
                         f"{', '.join(scopes)}: pick one with --task_name")
    if scopes:
      head["task_name"] = scopes[0]
  if model in scopes_of:
    task = (args.task_name or head.get("task_name", "task")).lower()
    bias = task_spec(model).original_head.format(task)
    # The bias is [n_class] in a head of classes (a regressor's is [1]).
    if bias in names and _applies("n_class", model):
      head["n_class"] = int(names[bias][0])
  summary = "model/sequnece_summary"
  if any(n.startswith(summary + "/") for n in names):
    # Only a checkpoint with a summary says how it is built; otherwise the
    # model's defaults stand (its summary starts fresh).
    if f"{summary}/summary_bias" in names:
      head["summary_type"] = "attn"
    head["use_summ_proj"] = f"{summary}/summary/kernel" in names
  head["tie_weight"] = LM_WEIGHT not in names
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
    head["use_summ_proj"] = any("/projection/kernel" in n for n in summary)
    if any("summary_bias" in n for n in summary):
      head["summary_type"] = "attn"
  if any(re.search(r"model/(lm_head|heads/0)/weight/", n) for n in names):
    head["tie_weight"] = False
  return head


def _load_config(path: Optional[str], source: str, fmt: str):
  if path:
    return read_config(path)
  base = source if paths.isdir(source) else paths.dirname(
      paths.absolute(source))
  candidate = paths.join(base, CONFIG_NAME)
  if paths.isfile(candidate):
    return read_config(candidate)
  raise ConvertError(f"{source}: no {CONFIG_NAME} beside the {fmt} "
                     "checkpoint; pass --config")


def _target_prefix(target: str) -> str:
  if target.endswith(os.sep) or paths.isdir(target):
    return paths.join(target, DEFAULT_PREFIX)
  return target


def target_files(target: str, to_format: str) -> List[str]:
  """The files a conversion to `target` writes or replaces (checkpoint data
  files by pattern: their shard count is known only once written)."""
  if to_format == "hf":
    return [paths.join(target, name) for name in (HF_CONFIG, HF_WEIGHTS)]
  prefix = _target_prefix(target)
  directory = paths.dirname(paths.absolute(prefix))
  return [prefix + ".index", prefix + ".data-*",
          paths.join(directory, CONFIG_NAME),
          paths.join(directory, "checkpoint")]


def check_target(args) -> None:
  """Refuses, before any work, to replace a file that is already there
  (someone's checkpoint, config or a training run's `checkpoint` state
  file) unless --overwrite."""
  if args.overwrite:
    return
  for pattern in target_files(args.target, args.to_format):
    found = paths.glob(pattern) if paths.is_remote(pattern) else sorted(
        glob.glob(glob.escape(os.path.dirname(pattern)) + os.sep +
                  os.path.basename(pattern)))
    if found:
      raise ConvertError(f"--to={args.target}: {found[0]} exists; choose "
                         "another --to, or pass --overwrite to replace it")


def run_options_of(args: ConvertArgs, fmt: str, options: RunOptions):
  """`(RunOptions, where they came from, the source's values not carried)`:
  `options` (the source's: HF config or the original defaults), then
  `run_options.json` (`--run_options` or the one beside a TF source), with
  the pretraining-only options (`PRETRAINING_ONLY`) back at their defaults
  unless `--carry_pretraining_options`, then the run-option flags given."""
  path = args.run_options
  if path is None and fmt != "hf":
    path = file_beside(resolve_checkpoint(args.source), RUN_OPTIONS)
  where = "the HF config" if fmt == "hf" else "defaults"
  if path:
    data = read_json(path, ConvertError)
    if not isinstance(data, dict):
      raise ConvertError(f"{path}: not a JSON object of run options")
    try:
      options = RunOptions.from_dict({**options.to_dict(), **data})
    except ConfigError as e:
      raise ConvertError(f"{path}: {e}") from None
    where = path
  given = {k: getattr(args, k) for k in RUN_OPTION_FLAGS
           if getattr(args, k) is not None}
  dropped = {}
  if not args.carry_pretraining_options:
    fresh = RunOptions()
    dropped = {k: getattr(options, k) for k in PRETRAINING_ONLY
               if k not in given and getattr(options, k) != getattr(fresh, k)}
    options = options.replace(**{k: getattr(fresh, k) for k in dropped})
  if given:
    try:
      options = options.replace(**given)
    except ConfigError as e:
      raise UsageError(str(e)) from None
    where += " and flags"
  return options, where, dropped


def _source_model(args: ConvertArgs, fmt: str):
  """`(model kind, XLNetConfig, RunOptions, head arguments)` of the source."""
  # The original's defaults; they shape no weight, and an HF target records
  # them in its config.json (dropout, attention type, ...).
  options = RunOptions()
  if fmt == "hf":
    spec = config_from_hf(read_hf_config(args.source),
                          paths.join(args.source, HF_CONFIG))
    config = read_config(args.config) if args.config else spec.config
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
                     ("use_summ_proj", args.use_summ_proj)):
    if value is not None:
      head[key] = value
  return model, config, options, head


def _load(obj, args: ConvertArgs, fmt: str, model: str, notes: List[str]):
  """Loads the source into `obj`: `(its LoadReport or None, report lines)`."""
  if fmt == "hf":
    report = load_hf_weights(obj, args.source)
    notes += report.notes
  elif fmt == "original":
    report = load_original_checkpoint(obj, args.source)
  else:
    load_native_checkpoint(obj, args.source)
    return None, ["converted every tensor of the model (native restore, "
                  "object graph matched)"]
  lines = [f"converted {len(report.loaded)} tensors"]
  if report.missing:
    lines.append(f"missing in source, left at initial values "
                 f"({len(report.missing)}): " + ", ".join(report.missing))
  if report.unused:
    lines.append(f"skipped, no place in the {model} model "
                 f"({len(report.unused)}): " + ", ".join(report.unused))
  if report.ignored:
    lines.append(f"ignored ({len(report.ignored)}): " +
                 ", ".join(report.ignored))
  return report, lines


def convert(args: ConvertArgs) -> List[str]:
  """Does the conversion `args` asks for; returns the report lines."""
  check_locations(args)
  check_target(args)
  fmt = args.from_format
  if fmt == "auto":
    fmt = _detect_format(args.source)
  lines = [f"from {args.source} ({fmt})"]
  notes: List[str] = []
  model, config, options, head = _source_model(args, fmt)
  options, where, dropped = run_options_of(args, fmt, options)
  obj = build_model(model, config, options, **head)
  shown = ", ".join(f"{k}={v}" for k, v in sorted(head.items())
                    if _applies(k, model))
  lines.append(f"model {model} ({type(obj).__name__})" +
               (f": {shown}" if shown else ""))
  if args.to_format == "hf":  # the other layouts keep no run option
    lines.append(_run_options_line(options, where, dropped))
  report, loaded = _load(obj, args, fmt, model, notes)
  lines += loaded
  # Only the pretrainer runs the query stream; the others' original layout
  # (a fine-tuned checkpoint) has no mask_emb, while HF always holds one.
  has_mask_emb = report is not None and MASK_EMB in report.loaded
  if args.to_format == "hf":
    if fmt != "hf" and report is not None and not has_mask_emb and (
        not getattr(obj, "uses_query_stream", False)):
      notes.append("mask_emb is not in the source (fine-tuned); written from "
                   "its initial value")
    # Class names read from an HF source go on, if the class count stayed.
    labels = head.get("labels")
    if labels is not None and len(labels) != getattr(obj, "n_class", None):
      labels = None
    saved = save_hf_weights(obj, args.target, labels=labels)
    notes += saved.notes
    lines.append(f"wrote {saved.path} ({saved.architecture}, "
                 f"{len(saved.written)} tensors)")
  else:
    prefix = _target_prefix(args.target)
    if args.to_format == "original":
      if has_mask_emb and MASK_EMB not in obj.original_weights():
        notes.append("mask_emb not written: fine-tuned models in the "
                     "original layout have none")
      written = save_original_checkpoint(obj, prefix)
    else:
      written = save_native_checkpoint(obj, prefix)
    config_path = paths.join(paths.dirname(paths.absolute(written)),
                             CONFIG_NAME)
    config.to_json(config_path)
    lines.append(f"wrote {written} ({args.to_format}) and {config_path}")
    if config.ff_activation == "gelu_exact" and args.to_format == "original":
      notes.append("ff_activation 'gelu_exact' (HF 'gelu') is unknown to the "
                   "original code, which would need 'gelu' (tanh form)")
  return lines + [f"note: {n}" for n in notes]


def _run_options_line(options: RunOptions, where: str, dropped: dict
                      ) -> str:
  """The report's line on run options: those carried (written into an HF
  config.json) and the source's pretraining-only ones that were not."""
  line = f"run options ({where}): carried " + ", ".join(
      f"{k}={getattr(options, k)}" for k in RUN_OPTION_FLAGS
      if k not in dropped)
  if dropped:
    line += ("; not carried (pretraining only; --carry_pretraining_options "
             "keeps them): " + ", ".join(f"{k}={v}" for k, v in
                                         dropped.items()) +
             ", written as " + ", ".join(f"{k}={getattr(options, k)}"
                                         for k in dropped))
  return line


def _applies(key: str, model: str) -> bool:
  """Whether head argument `key` is one model kind `model` takes."""
  return model != BASE and bool(task_spec(model).head_arguments({key: 0}))


def main(argv: Optional[Sequence[str]] = None) -> int:
  """The command line (`argv` without the program name; default
  `sys.argv[1:]`): the report on stdout, an error as one line on stderr and
  exit code 2."""
  argv = sys.argv[1:] if argv is None else list(argv)
  if {"-h", "--help", "--helpfull"} & set(argv):
    print(__doc__ + "\nflags:\n" + flag_values().get_help())
    return 0
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  return run_main(PROGRAM,
                  lambda: print("\n".join(convert(parse_args(argv)))))


if __name__ == "__main__":
  sys.exit(main())
