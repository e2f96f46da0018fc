"""Trains a SentencePiece model with XLNet's special symbols at XLNet's ids.

    python -m data_utils.train_spiece --input=corpus.txt \
        --model_prefix=spiece --vocab_size=8000

Ids 0..8 are `<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>`, as in the
released model: `<cls> <sep> <pad> <mask> <eod>` are control symbols (never
produced from text), `<eop>` a user-defined piece (text may contain it).
Writes `<prefix>.model` and `<prefix>.vocab` atomically.
"""

from __future__ import annotations

import os

import sentencepiece as spm
from absl import flags

from data_utils.atomic import atomic_path, temp_dir
from data_utils.errors import (UsageError, UserError, check_positive,
                               run_app, run_main)
from data_utils.path_checks import check_writable_dir
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
  if not os.path.isfile(input_path):
    raise UsageError(f"{input_path}: no such input file")
  check_positive(vocab_size, "vocab_size", minimum=len(CONTROL) + 4)
  if not os.path.basename(model_prefix) or model_prefix.endswith(
      (os.sep, "/")) or os.path.isdir(model_prefix):
    raise UsageError(f"--model_prefix={model_prefix}: names a folder; give a "
                     "file prefix (e.g. {}) for <prefix>.model and "
                     "<prefix>.vocab".format(
                         os.path.join(model_prefix, "spiece")))
  check_writable_dir(os.path.dirname(os.path.abspath(model_prefix)),
                     "model_prefix", model_prefix)
  existing = [f"{model_prefix}.{ext}" for ext in ("model", "vocab")
              if os.path.lexists(f"{model_prefix}.{ext}")]
  if existing and not overwrite:
    raise UsageError(f"--model_prefix={model_prefix}: {existing[0]} exists; "
                     "choose another prefix, or pass --overwrite to replace "
                     "it")
  # SentencePiece trains on binary or mis-encoded input without a word:
  # refuse it before the long work.
  problem = text_problem(input_path, reject_nul=True)
  if problem:
    raise UserError(problem)
  directory = os.path.dirname(os.path.abspath(model_prefix))
  os.makedirs(directory, exist_ok=True)
  with temp_dir(directory) as tmp:
    tmp_prefix = os.path.join(tmp, "m")
    try:
      spm.SentencePieceTrainer.Train(
          input=input_path, model_prefix=tmp_prefix, vocab_size=vocab_size,
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


def main(argv):
  del argv
  f = flags.FLAGS

  def body():
    path = train_spiece(f.input, f.model_prefix, f.vocab_size, f.model_type,
                        overwrite=f.overwrite)
    tok = SentencePieceTokenizer(path)  # checks the special ids
    print(f"wrote {path} ({tok.vocab_size} pieces)")
  return run_main("train_spiece", body)


if __name__ == "__main__":
  flags.DEFINE_string("input", None, "Text file, one sentence/paragraph a line.")
  flags.DEFINE_string("model_prefix", None, "Output prefix.")
  flags.DEFINE_integer("vocab_size", 8000, "Pieces.")
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe"], "Model type.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an existing <model_prefix>.model / .vocab.")
  flags.mark_flags_as_required(["input", "model_prefix"])
  run_app("train_spiece", main)
