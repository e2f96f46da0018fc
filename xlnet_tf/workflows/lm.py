"""What the language-model scripts (run_embed, run_score, run_generate,
run_infill) share: their common flags, the model and tokenizer those flags
name (validated before anything is loaded), and the output-file rule."""

from __future__ import annotations

import json
import os
import sys
from typing import Iterable, Optional, Tuple

from absl import flags

from data_utils.atomic import atomic_path
from data_utils.errors import UsageError, check_positive, check_writable_dir
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.io import check_checkpoint
from xlnet_tf.pretrained import load_language_model
from xlnet_tf.tasks.pretraining import XLNetPretrainer


def define_lm_flags(batch_size: int = 8) -> None:
  """The model, tokenizer, input and output flags every LM script takes."""
  flags.DEFINE_string(
      "init_checkpoint", None,
      "The model: a run_pretrain.py model_dir (or its original/ folder), a "
      "released XLNet checkpoint, or a HuggingFace directory.")
  flags.DEFINE_string("model_config_path", None,
                      "xlnet_config.json (default: the one beside the "
                      "checkpoint, or HF's config.json).")
  flags.DEFINE_string("spiece_model_file", None, "SentencePiece model.")
  flags.DEFINE_bool("uncased", False, "Lower-case the text.")
  flags.DEFINE_integer("clamp_len", None, "Clamp relative distances "
                       "(default: the checkpoint's run options, else off).")
  flags.DEFINE_string("input_file", None,
                      "Texts: one per line, a .tsv column or a .jsonl field.")
  flags.DEFINE_string("text_column", None,
                      "The .tsv column (name or 0-based index; default "
                      "'sentence', else 'text', else the first) or .jsonl "
                      "field (default 'text').")
  flags.DEFINE_integer("batch_size", batch_size, "Texts per batch.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace output files that already exist.")


def check_lm_flags(f, required=("init_checkpoint", "spiece_model_file")
                   ) -> None:
  """One-line UsageErrors for missing or unusable common flags (before any
  model is loaded)."""
  for name in required:
    if not getattr(f, name):
      raise UsageError(f"--{name} is required")
  check_positive(f.batch_size, "batch_size")
  if f.spiece_model_file and not os.path.isfile(f.spiece_model_file):
    raise UsageError(f"--spiece_model_file={f.spiece_model_file}: no such "
                     "file")
  if f.model_config_path and not os.path.isfile(f.model_config_path):
    raise UsageError(f"--model_config_path={f.model_config_path}: no such "
                     "file")
  if f.input_file is not None and not os.path.isfile(f.input_file):
    raise UsageError(f"--input_file={f.input_file}: no such file")
  if f.clamp_len is not None and f.clamp_len < -1:
    raise UsageError(f"--clamp_len={f.clamp_len}: must be -1 (off) or >= 0")
  if f.init_checkpoint:
    check_checkpoint(f.init_checkpoint, "init_checkpoint")


def check_output_file(path: Optional[str], flag: str, overwrite: bool
                      ) -> None:
  """UsageError unless `path` can be written: its folder is writable, and it
  does not exist yet or `--overwrite` was given (a user's file is never
  replaced silently)."""
  if not path:
    raise UsageError(f"--{flag} is required")
  if os.path.isdir(path):
    raise UsageError(f"--{flag}={path}: is a directory")
  if os.path.exists(path) and not overwrite:
    raise UsageError(f"--{flag}={path}: exists; pass --overwrite to replace "
                     "it")
  check_writable_dir(os.path.dirname(os.path.abspath(path)), flag, path)


def load_from_flags(f, need_lm_head: bool = True
                    ) -> Tuple[XLNetPretrainer, SentencePieceTokenizer]:
  """The model and tokenizer the common flags name."""
  tokenizer = SentencePieceTokenizer(f.spiece_model_file, lower=f.uncased)
  lm, _ = load_language_model(f.init_checkpoint, f.model_config_path,
                              f.clamp_len, need_lm_head=need_lm_head)
  if tokenizer.vocab_size > lm.config.n_token:
    raise UsageError(f"--spiece_model_file={f.spiece_model_file}: "
                     f"{tokenizer.vocab_size} pieces, more than the model's "
                     f"n_token {lm.config.n_token}")
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
