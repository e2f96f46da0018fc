"""What the language-model scripts (run_embed, run_score, run_generate,
run_infill) share: their common flags, the model and tokenizer those flags
name (validated before anything is loaded), and the output-file rule."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Iterable, Optional, Tuple

from absl import flags

from data_utils import paths
from data_utils.atomic import atomic_path
from data_utils.errors import UsageError, check_positive
from data_utils.path_checks import check_store, check_writable_dir, tf_path
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.config import XLNetConfig
from xlnet_tf.io import check_checkpoint
from xlnet_tf.io.dims import check_config_fits
from xlnet_tf.io.hf_files import is_hf_directory
from xlnet_tf.model_folder import define_model_flags, fill_flags
from xlnet_tf.tasks.language_model.loading import (language_model_config,
                                              load_language_model)
from xlnet_tf.tasks.language_model.generation import (FLOAT_BYTES, MAX_POSITIONS, Limit,
                                       new_token_limit)
from xlnet_tf.tasks.language_model.model import XLNetPretrainer


@dataclasses.dataclass(frozen=True)
class LMFiles:
  """What the common flags name, read before any weight: the model config
  (checked against the checkpoint's shapes) and the tokenizer."""
  config: XLNetConfig
  tokenizer: SentencePieceTokenizer


def define_lm_flags(batch_size: int = 8) -> None:
  """The model, tokenizer, input and output flags every LM script takes."""
  define_model_flags()
  flags.DEFINE_bool("uncased", False, "Lower-case the text.")
  flags.DEFINE_integer("clamp_len", None, "Clamp relative distances "
                       "(default: the checkpoint's run options, else off).")
  flags.DEFINE_string("input_file", None,
                      "Texts: one per line, a .tsv or .csv column or a "
                      ".jsonl field.")
  flags.DEFINE_string("text_column", None,
                      "The .tsv/.csv column (name or 0-based index; default "
                      "'sentence', else 'text') or .jsonl field (default "
                      "'text').")
  flags.DEFINE_integer("batch_size", batch_size, "Texts per batch.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace output files that already exist.")


def check_lm_flags(f) -> None:
  """One-line UsageErrors for missing or unusable common flags (before any
  model is loaded); the --init_checkpoint folder fills in the SentencePiece
  model and config it holds (`model_folder.fill_flags`)."""
  if not f.init_checkpoint:
    raise UsageError("--init_checkpoint is required")
  check_positive(f.batch_size, "batch_size")
  for name in ("spiece_model_file", "model_config_path", "input_file",
               "init_checkpoint"):
    if getattr(f, name):
      check_store(getattr(f, name), name)
  if f.spiece_model_file and not paths.isfile(f.spiece_model_file):
    raise UsageError(f"--spiece_model_file={f.spiece_model_file}: no such "
                     "file")
  if f.input_file is not None and not paths.isfile(f.input_file):
    raise UsageError(f"--input_file={f.input_file}: no such file")
  if f.clamp_len is not None and f.clamp_len < -1:
    raise UsageError(f"--clamp_len={f.clamp_len}: must be -1 (off) or >= 0")
  if f.init_checkpoint:
    # TF reads a checkpoint itself (no s3://); an HF directory is ours.
    if not is_hf_directory(f.init_checkpoint):
      tf_path(f.init_checkpoint, "init_checkpoint")
    check_checkpoint(f.init_checkpoint, "init_checkpoint")
  fill_flags(f, need_config=False)


def define_row_flags(max_seq_help: str) -> None:
  """The flags of the scripts that read each text as one row (run_score,
  run_infill): the language-model ones (`define_lm_flags`), the longest
  row and the JSONL output."""
  define_lm_flags()
  flags.DEFINE_integer("max_seq_length", 512, max_seq_help)
  flags.DEFINE_string("output_file", None, "JSONL output (default: stdout).")


def check_row_flags(f, check_script) -> LMFiles:
  """The checks of a row script's flags (`define_row_flags`), with the
  script's own (`check_script(f)`) between the shared ones; one-line
  UsageErrors before any model is loaded. Returns `check_lm_model`'s."""
  check_lm_flags(f)
  if bool(f.input_file) == bool(f.text):
    raise UsageError("give exactly one of --input_file and --text")
  check_script(f)
  check_positive(f.max_seq_length, "max_seq_length", minimum=3)
  if f.output_file:
    check_output_file(f.output_file, "output_file", f.overwrite)
  return check_lm_model(f)


def check_lm_model(f) -> LMFiles:
  """The config the flags name fits the checkpoint (`--model_config_path`,
  else the one beside it, against the checkpoint's own shapes) and embeds
  every piece of `--spiece_model_file`: one-line UserErrors naming both
  values, before any weight is read (e.g. `--model_config_path=big.json:
  d_model 64 but the checkpoint m/ckpt-1 has d_model 32 (...)`). Call after
  `check_lm_flags`."""
  config, path, _ = language_model_config(f.init_checkpoint,
                                          f.model_config_path)
  if f.model_config_path:
    where = f"--model_config_path={f.model_config_path}"
  else:
    where = path or f"--init_checkpoint={f.init_checkpoint}"
  check_config_fits(config, f.init_checkpoint, where)
  tokenizer = SentencePieceTokenizer(f.spiece_model_file, lower=f.uncased)
  if tokenizer.vocab_size > config.n_token:
    raise UsageError(f"--spiece_model_file={f.spiece_model_file}: "
                     f"{tokenizer.vocab_size} pieces, more than the model's "
                     f"n_token {config.n_token} ({where})")
  return LMFiles(config, tokenizer)


def machine_memory() -> Optional[int]:
  """This machine's physical memory in bytes (None where unknown)."""
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (AttributeError, ValueError, OSError):
    return None


def check_new_tokens(max_new_tokens: int, config: XLNetConfig,
                     prompt_length: int, rows: int,
                     memory_bytes: Optional[int]) -> Limit:
  """UsageError unless `--max_new_tokens` fits what the positions and
  `memory_bytes` allow for prompts of `prompt_length` pieces decoded
  `rows` at a time (`generation.new_token_limit`); returns the limit."""
  limit = new_token_limit(config, prompt_length, rows, memory_bytes)
  if max_new_tokens > limit.tokens:
    raise UsageError(f"--max_new_tokens={max_new_tokens}: at most "
                     f"{max(limit.tokens, 0)} here ({limit.reason})")
  return limit


def check_mem_len(f, config: XLNetConfig, rows: int,
                  memory_bytes: Optional[int]) -> None:
  """UsageError unless run_embed's memory between the windows of a long
  text (`--mem_len`, default the window `--max_seq_length`) fits: its
  distances with a window's are float32 (exact up to 2**24), and per memory
  position, `rows` texts at a time, it keeps each layer's states (twice
  while a window writes the next) and each layer's attention scores of the
  window's queries (logits, scores, probabilities)."""
  window = f.max_seq_length
  mem_len = f.mem_len or window
  most = MAX_POSITIONS - window
  reason = (f"relative positions are float32, whole numbers exact up to "
            f"2**24 = {MAX_POSITIONS}, and a window's distances span the "
            f"memory and its {window} positions")
  if memory_bytes:
    per = FLOAT_BYTES * rows * (2 * config.n_layer * config.d_model +
                                3 * config.n_head * window)
    if memory_bytes // per < most:
      most = memory_bytes // per
      reason = (f"a memory position takes {per} bytes for {rows} texts: "
                f"states of n_layer {config.n_layer} x d_model "
                f"{config.d_model} floats twice, and attention scores of "
                f"n_head {config.n_head} x {window} queries 3 times; "
                f"{memory_bytes / 2 ** 30:.1f} GiB of memory holds {most}")
  if mem_len > most:
    flag = (f"--mem_len={mem_len}" if f.mem_len else
            f"--max_seq_length={window} (the default --mem_len)")
    raise UsageError(f"{flag}: at most {max(most, 0)} memory positions here "
                     f"({reason})")


def check_output_file(path: Optional[str], flag: str, overwrite: bool
                      ) -> None:
  """UsageError unless `path` can be written: its folder is writable, and it
  does not exist yet or `--overwrite` was given (a user's file is never
  replaced silently)."""
  if not path:
    raise UsageError(f"--{flag} is required")
  check_store(path, flag)
  if paths.isdir(path):
    raise UsageError(f"--{flag}={path}: is a directory")
  if paths.exists(path) and not overwrite:
    raise UsageError(f"--{flag}={path}: exists; pass --overwrite to replace "
                     "it")
  check_writable_dir(paths.dirname(paths.absolute(path)), flag, path)


def load_from_flags(f, need_lm_head: bool = True
                    ) -> Tuple[XLNetPretrainer, SentencePieceTokenizer]:
  """The model and tokenizer the common flags name (checked by
  `check_lm_flags` and `check_lm_model` first)."""
  tokenizer = SentencePieceTokenizer(f.spiece_model_file, lower=f.uncased)
  lm, _ = load_language_model(f.init_checkpoint, f.model_config_path,
                              f.clamp_len, need_lm_head=need_lm_head)
  return lm, tokenizer


def write_jsonl(rows: Iterable[dict], output_file: Optional[str]) -> None:
  """One JSON line per row (UTF-8 kept as is) to `output_file`, written
  beside it and renamed into place, or to stdout when it is None."""
  lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
  if not output_file:
    sys.stdout.writelines(lines)
    return
  with atomic_path(output_file) as tmp:
    with open(tmp, "w", encoding="utf-8") as out:
      out.writelines(lines)
