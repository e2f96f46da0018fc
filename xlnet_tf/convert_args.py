"""The command line of `python -m xlnet_tf.convert`: its flags
(`define_flags`; each command line is parsed with a FlagValues of its own,
so nothing reaches absl's global flags) and `ConvertArgs`, what a
conversion is asked to do."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from absl import flags

from data_utils.errors import UsageError, UserError, one_line
from data_utils.path_checks import check_store, tf_path
from xlnet_tf.io.hf_files import is_hf_directory
from xlnet_tf.pretrained import model_kinds
from xlnet_tf.tasks.pooling import SUMMARY_TYPES

MODELS = model_kinds()
FORMATS = ("original", "native", "hf")
CONFIG_NAME = "xlnet_config.json"
RUN_OPTIONS = "run_options.json"
# The run options the flags of the same name override.
RUN_OPTION_FLAGS = ("attn_type", "bi_data", "clamp_len", "same_length",
                    "mem_len", "reuse_len", "dropout", "dropatt")
# Of those, the ones only pretraining's data needs: bi_data splits a batch
# into forward and backward halves (an HF model then fails at batch 1 and
# mixes up the rows of others), mem_len / reuse_len size the memory a
# training run carries between segments. attn_type, clamp_len and
# same_length shape every output and always travel; dropout only trains.
PRETRAINING_ONLY = ("bi_data", "mem_len", "reuse_len")
DEFAULT_PREFIX = "model.ckpt"
PROGRAM = "convert: error"

def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """The command line's flags, defined into `flag_values` (`parse_args`
  gives each command line a FlagValues of its own; the default, absl's
  global one, is for tools that list every entry point's flags)."""
  flags.DEFINE_string("from", None, "checkpoint prefix or directory, or an HF "
                      "directory", flag_values=flag_values)
  flags.DEFINE_string("to", None, "checkpoint prefix (a directory gets "
                      f"{DEFAULT_PREFIX} in it) or an HF directory",
                      flag_values=flag_values)
  flags.DEFINE_enum("to_format", None, FORMATS, "the target's format",
                    flag_values=flag_values)
  flags.DEFINE_enum("from_format", "auto", ("auto",) + FORMATS,
                    "normally detected", flag_values=flag_values)
  flags.DEFINE_enum("model", None, MODELS, "the model the weights belong to "
                    "(default: detected from the source; required for native "
                    "sources)", flag_values=flag_values)
  flags.DEFINE_string("task_name", None, "classification/regression/token "
                      "classification scope (model/classification_<task>/"
                      "logit); default: detected",
                      flag_values=flag_values)
  flags.DEFINE_integer("n_class", None, "classes (default: detected)",
                       flag_values=flag_values)
  flags.DEFINE_enum("summary_type", None, SUMMARY_TYPES,
                    "sequence summary (default: detected, else last)",
                    flag_values=flag_values)
  flags.DEFINE_bool("use_summ_proj", None, "tanh projection in the summary "
                    "(default: detected)", flag_values=flag_values)
  flags.DEFINE_bool("untied_lm", False, "the LM head has its own weight "
                    "(native sources; detected otherwise)",
                    flag_values=flag_values)
  flags.DEFINE_string("config", None, f"{CONFIG_NAME}, an HF config.json, "
                      "base or large (default: the one beside the source "
                      "checkpoint, or the HF config.json)",
                      flag_values=flag_values)
  flags.DEFINE_bool("overwrite", False, "replace the target's files if they "
                    "exist", flag_values=flag_values)
  flags.DEFINE_string("run_options", None, f"{RUN_OPTIONS} of the run that "
                      "wrote the source (default: the one beside the source "
                      "checkpoint or in the folder above)",
                      flag_values=flag_values)
  flags.DEFINE_enum("attn_type", None, ["bi", "uni"], "run option (default: "
                    "the source's)", flag_values=flag_values)
  flags.DEFINE_bool("bi_data", None, "run option", flag_values=flag_values)
  flags.DEFINE_integer("clamp_len", None, "run option", flag_values=flag_values)
  flags.DEFINE_bool("same_length", None, "run option", flag_values=flag_values)
  flags.DEFINE_integer("mem_len", None, "run option", flag_values=flag_values)
  flags.DEFINE_integer("reuse_len", None, "run option", flag_values=flag_values)
  flags.DEFINE_float("dropout", None, "run option", flag_values=flag_values)
  flags.DEFINE_float("dropatt", None, "run option", flag_values=flag_values)
  flags.DEFINE_bool("carry_pretraining_options", False, "also carry the "
                    "source's pretraining-only run options (bi_data, mem_len, "
                    "reuse_len) into an HF target; without it they are reset "
                    "for inference (bi_data=false, no memory) unless given as "
                    "flags", flag_values=flag_values)


def flag_values() -> flags.FlagValues:
  """A FlagValues of its own holding the command line's flags (unparsed)."""
  values = flags.FlagValues()
  define_flags(values)
  return values


_REQUIRED = ("from", "to", "to_format")


class ConvertError(UserError):
  """A conversion that cannot be done as asked (one-line message)."""


@dataclasses.dataclass(frozen=True)
class ConvertArgs:
  """What a conversion is asked to do (the flags, `--from` as `source` and
  `--to` as `target`)."""
  source: str
  target: str
  to_format: str
  from_format: str = "auto"
  model: Optional[str] = None
  task_name: Optional[str] = None
  n_class: Optional[int] = None
  summary_type: Optional[str] = None
  use_summ_proj: Optional[bool] = None
  untied_lm: bool = False
  config: Optional[str] = None
  overwrite: bool = False
  run_options: Optional[str] = None
  attn_type: Optional[str] = None
  bi_data: Optional[bool] = None
  clamp_len: Optional[int] = None
  same_length: Optional[bool] = None
  mem_len: Optional[int] = None
  reuse_len: Optional[int] = None
  dropout: Optional[float] = None
  dropatt: Optional[float] = None
  carry_pretraining_options: bool = False


def parse_args(argv: Sequence[str]) -> ConvertArgs:
  """`ConvertArgs` from the command line (without the program name); a bad
  flag raises a one-line `UsageError`."""
  own = flag_values()
  try:
    rest = own(["convert"] + list(argv))
  except flags.Error as e:
    raise UsageError(one_line(e)) from None
  if rest[1:]:
    raise UsageError(f"unexpected argument {rest[1]!r} (flags only)")
  for name in _REQUIRED:
    if own[name].value is None:
      raise UsageError(f"--{name} is required")
  if own.carry_pretraining_options and own.to_format != "hf":
    raise UsageError("--carry_pretraining_options: only with --to_format=hf "
                     "(the original and native layouts keep no run option)")
  values = {f.name: getattr(own, f.name)
            for f in dataclasses.fields(ConvertArgs)
            if f.name not in ("source", "target")}
  return ConvertArgs(source=own["from"].value, target=own["to"].value,
                     **values)


def check_locations(args: ConvertArgs) -> None:
  """One line, before any work, for a path that cannot be used: a store
  that does not answer or lacks the bucket; an `s3://` checkpoint (TF
  reads and writes the original and native layouts itself, and TF 2.20 has
  no s3://; HF files go through `data_utils.paths`, any store)."""
  for flag, path in (("from", args.source), ("to", args.target),
                     ("config", args.config),
                     ("run_options", args.run_options)):
    if path:
      check_store(path, flag)
  if args.to_format != "hf":
    tf_path(args.target, "to")
  if args.from_format != "hf" and not is_hf_directory(args.source):
    tf_path(args.source, "from")
