"""Trains a SentencePiece model with XLNet's special symbols at XLNet's ids.

    python -m data_utils.train_spiece --input=corpus.txt \
        --model_prefix=spiece --vocab_size=8000

Ids 0..8 are `<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>`, as in the
released model: `<cls> <sep> <pad> <mask> <eod>` are control symbols (never
produced from text), `<eop>` a user-defined piece (text may contain it).
Writes `<prefix>.model` and `<prefix>.vocab` atomically. Either path may be
in a bucket (`data_utils.paths`): SentencePiece reads and writes local files
only, so the input is staged in local scratch and the model uploaded whole.
"""

from __future__ import annotations

import os

import sentencepiece as spm
from absl import flags

from data_utils import paths
from data_utils.atomic import atomic_path, temp_dir
from data_utils.errors import (UsageError, UserError, check_positive,
                               run_app, run_main)
from data_utils.path_checks import check_store, check_writable_dir
from data_utils.text_files import text_problem
from data_utils.tokenization import SentencePieceTokenizer

CONTROL = ["<cls>", "<sep>", "<pad>", "<mask>", "<eod>"]
USER_DEFINED = ["<eop>"]


def train_spiece(input_path: str, model_prefix: str, vocab_size: int = 8000,
                 model_type: str = "unigram", character_coverage: float = 1.0,
                 input_sentence_size: int = 2_000_000,
                 overwrite: bool = False) -> str:
  """Trains and returns the path of `<model_prefix>.model` (+ `.vocab`).
  An existing model there is replaced only with `overwrite`: a
  SentencePiece model carries no mark of who wrote it."""
  check_store(input_path, "input")
  if not paths.isfile(input_path):
    raise UsageError(f"{input_path}: no such input file")
  check_positive(vocab_size, "vocab_size", minimum=len(CONTROL) + 4)
  if paths.is_remote(model_prefix):
    check_store(model_prefix, "model_prefix")
  if not paths.basename(model_prefix) or model_prefix.endswith(
      (os.sep, "/")) or paths.isdir(model_prefix):
    raise UsageError(f"--model_prefix={model_prefix}: names a folder; give a "
                     "file prefix (e.g. {}) for <prefix>.model and "
                     "<prefix>.vocab".format(
                         paths.join(model_prefix, "spiece")))
  check_writable_dir(paths.dirname(paths.absolute(model_prefix)),
                     "model_prefix", model_prefix)
  existing = [f"{model_prefix}.{ext}" for ext in ("model", "vocab")
              if _exists(f"{model_prefix}.{ext}")]
  if existing and not overwrite:
    raise UsageError(f"--model_prefix={model_prefix}: {existing[0]} exists; "
                     "choose another prefix, or pass --overwrite to replace "
                     "it")
  # SentencePiece trains on binary or mis-encoded input without a word:
  # refuse it before the long work.
  problem = text_problem(input_path, reject_nul=True)
  if problem:
    raise UserError(problem)
  with _scratch(model_prefix) as tmp, paths.local_copy(input_path) as local:
    tmp_prefix = os.path.join(tmp, "m")
    try:
      spm.SentencePieceTrainer.Train(
          input=local, model_prefix=tmp_prefix, vocab_size=vocab_size,
          model_type=model_type, character_coverage=character_coverage,
          unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
          control_symbols=",".join(CONTROL),
          user_defined_symbols=",".join(USER_DEFINED),
          input_sentence_size=input_sentence_size,
          shuffle_input_sentence=True, minloglevel=1)
    except RuntimeError as e:
      raise UserError(f"{input_path}: SentencePiece training failed: "
                      f"{str(e).splitlines()[0]}") from None
    for ext in ("model", "vocab"):
      with atomic_path(f"{model_prefix}.{ext}") as out:
        os.replace(f"{tmp_prefix}.{ext}", out)
  return f"{model_prefix}.model"


def _exists(path: str) -> bool:
  # A broken link is a user's file too (never replaced silently).
  return paths.exists(path) if paths.is_remote(path) else os.path.lexists(path)


def _scratch(model_prefix: str):
  """Where SentencePiece writes: a temp folder beside a local prefix (the
  renames into place stay on one disk), local scratch for a bucket's."""
  if paths.is_remote(model_prefix):
    return paths.scratch_dir()
  directory = os.path.dirname(os.path.abspath(model_prefix))
  os.makedirs(directory, exist_ok=True)
  return temp_dir(directory)


def main(argv):
  del argv
  f = flags.FLAGS

  def body():
    path = train_spiece(f.input, f.model_prefix, f.vocab_size, f.model_type,
                        overwrite=f.overwrite)
    tok = SentencePieceTokenizer(path)  # checks the special ids
    print(f"wrote {path} ({tok.vocab_size} pieces)")
  return run_main("train_spiece", body)


def define_flags() -> None:
  """`python -m data_utils.train_spiece`'s flags."""
  flags.DEFINE_string("input", None,
                      "Text file, one sentence/paragraph a line.")
  flags.DEFINE_string("model_prefix", None, "Output prefix.")
  flags.DEFINE_integer("vocab_size", 8000, "Pieces.")
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe"], "Model type.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an existing <model_prefix>.model / .vocab.")
  flags.mark_flags_as_required(["input", "model_prefix"])


def main_cli() -> None:
  """The command line: `python -m data_utils.train_spiece`,
  or `xlnet-tf-spiece` installed."""
  define_flags()
  run_app("train_spiece", main)


if __name__ == "__main__":
  main_cli()
