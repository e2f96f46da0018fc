"""Scores texts with a pretrained XLNet: per-piece log-probabilities under
the permutation language model, left to right (a true log p(text)) or as
pseudo-log-likelihood (each piece given all the others).

    python run_score.py --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --input_file=SST-2/dev.tsv --order=l2r --output_file=scores.jsonl

Each text is read as `[context] text <sep> <cls>`; only the text's pieces
are scored (`--context_column` names a TSV column / JSONL field holding a
context that conditions the text without being scored). One JSONL line per
text, in input order: `text`, `context`, `order`, `pieces`, `ids`,
`log_probs` (one per piece), `sum`, `mean` (null for an empty text) and
`count`. Without `--output_file` the lines go to stdout; with it, a summary
(texts, pieces, mean log-probability per piece, its perplexity) is printed.
"""

import json
import math

from absl import flags, logging

from data_utils.errors import UsageError, run_app, run_main
from data_utils.progress import Progress
from data_utils.text_inputs import read_texts
from xlnet_tf.tasks.language_model import scoring, workflow


def define_flags() -> None:
  """run_score.py's flags: the row scripts' (`define_row_flags`), then
  the texts, their contexts and the order."""
  workflow.define_row_flags("Longest row (context + text + 2 markers) in "
                            "pieces.")
  flags.DEFINE_multi_string("text", None, "A text to score (repeatable; "
                            "instead of --input_file).")
  flags.DEFINE_string("context_column", None,
                      "The TSV column / JSONL field holding each text's "
                      "context (conditions the text, is not scored).")
  flags.DEFINE_string("order", "l2r", "l2r: left to right, a true "
                      "log p(text); pll: each piece given all the others "
                      "(one row per piece).")


def check_score_flags(f):
  """This script's own checks (`check_row_flags` runs the shared ones)."""
  if f.context_column and not f.input_file:
    raise UsageError("--context_column: needs --input_file (a .tsv or "
                     ".jsonl)")
  if f.order not in scoring.ORDERS:
    raise UsageError(f"--order={f.order}: must be one of "
                     f"{', '.join(scoring.ORDERS)}")


def _inputs(f):
  if f.text:
    return list(f.text), None, "--text"
  texts = read_texts(f.input_file, f.text_column)
  contexts = None
  if f.context_column:
    contexts = read_texts(f.input_file, f.context_column, "context_column")
  return texts, contexts, f"--input_file={f.input_file}: text"


def score_main(f) -> int:
  tokenizer = workflow.check_row_flags(f, check_score_flags).tokenizer
  texts, contexts, where = _inputs(f)
  # Tokenize and check every row before the model is loaded.
  text_ids = [tokenizer.encode_ids(t) for t in texts]
  context_ids = ([tokenizer.encode_ids(c) for c in contexts]
                 if contexts is not None else None)
  scoring.check_lengths(text_ids, context_ids, f.max_seq_length, where)
  lm, tokenizer = workflow.load_from_flags(f)
  progress = Progress("scoring", total=sum(len(t) for t in text_ids),
                      unit="pieces")
  scorer = scoring.TextScorer(lm, f.batch_size)
  results = scorer.score_ids(text_ids, context_ids, f.order,
                             on_progress=progress.update)
  progress.finish()
  rows, total, count = [], 0.0, 0
  for i, (text, result) in enumerate(zip(texts, results)):
    summary = scoring.summarize(result["log_probs"])
    total += summary["sum"]
    count += summary["count"]
    rows.append({
        "text": text, "context": contexts[i] if contexts else "",
        "order": f.order,
        "pieces": [tokenizer.id_to_piece(t) for t in result["ids"]],
        "ids": result["ids"],
        "log_probs": [float(x) for x in result["log_probs"]],
        **summary})
  workflow.write_jsonl(rows, f.output_file)
  mean = total / count if count else None
  report = {"texts": len(texts), "pieces": count, "order": f.order,
            "mean_log_prob": mean,
            "perplexity": math.exp(-mean) if mean is not None else None}
  if f.output_file:
    print(json.dumps(report))
  else:
    logging.info("%s", json.dumps(report))
  return 0


def main(argv):
  del argv
  return run_main("run_score", lambda: score_main(flags.FLAGS))


def main_cli() -> None:
  """The command line: `python run_score.py`, or `xlnet-tf-score` installed."""
  define_flags()
  run_app("run_score", main)


if __name__ == "__main__":
  main_cli()
