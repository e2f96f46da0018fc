"""Fills the holes of texts with a pretrained XLNet: `<mask>` pieces or
character spans, one piece at a time through the query stream, left to right
or most confident first, greedy or sampled.

    python run_infill.py --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --text="The <mask> sat on the <mask><mask>." --order=confident

Input: `--text` (with `--spans=start:end[:pieces],...` for character spans
instead of `<mask>` markers) or `--input_file` (lines / a .tsv column with
`<mask>` markers; a .jsonl row's `text` field, with `<mask>` markers or a
`spans` field `[[start, end], [start, end, pieces], ...]`). Adjacent
`<mask>` markers make one hole of as many pieces; a span is filled with as
many pieces as its own text has unless given.

One JSONL line per text, in input order (stdout, or `--output_file`):
`text`, `filled`, `holes` (per hole: `start`, `end`, `fill`, `pieces`,
`ids`, `log_probs`, `steps`), `sum`, `count`.
"""


from absl import flags

from data_utils.errors import UsageError, run_app, run_main
from data_utils.lm import infill
from data_utils.progress import Progress
from xlnet_tf.tasks.language_model import infilling, scoring, workflow


def define_flags() -> None:
  """run_infill.py's flags: the row scripts' (`define_row_flags`), then
  the text, its holes and how they are filled."""
  workflow.define_row_flags("Longest row (text + 2 markers) in pieces.")
  flags.DEFINE_string("text", None, "One text to fill (instead of "
                      "--input_file), with <mask> markers or --spans.")
  flags.DEFINE_string("spans", None, "Character spans of --text to fill: "
                      "start:end[:pieces],... (0-based, end exclusive).")
  flags.DEFINE_string("order", "left_to_right", "Which open position is "
                      "filled next: left_to_right (the leftmost) or "
                      "confident (the one whose best piece is most "
                      "probable).")
  flags.DEFINE_string("strategy", "greedy", "greedy (the most probable "
                      "piece) or sample.")
  flags.DEFINE_float("temperature", 1.0, "Sampling temperature.")
  flags.DEFINE_integer("top_k", 0, "Sample from the k most probable pieces "
                       "(0 = all).")
  flags.DEFINE_float("top_p", 1.0, "Sample from the most probable pieces "
                     "holding this much probability (1 = all).")
  flags.DEFINE_integer("seed", 0, "Sampling seed (text i draws from a "
                       "generator seeded with seed + i).")


def check_infill_flags(f):
  """This script's own checks (`check_row_flags` runs the shared ones)."""
  if f.spans and not f.text:
    raise UsageError("--spans: needs --text (give a .jsonl file's spans in "
                     "its rows)")
  infilling.check_settings(f.order, f.strategy, f.temperature, f.top_k,
                           f.top_p)
  if f.seed < 0:
    # Text i draws from numpy's generator seeded with seed + i.
    raise UsageError(f"--seed={f.seed}: must be at least 0")


def _items(f):
  if f.input_file:
    return (infill.read_infill_file(f.input_file, f.text_column),
            f"--input_file={f.input_file}: text")
  if f.spans:
    item = infill.parse_spans(f.text, infill.parse_span_flag(f.spans),
                              f"--spans={f.spans}")
  else:
    item = infill.parse_masks(f.text)
  return [infill.require_holes(item, f"--text={f.text}",
                               f"{infill.NO_MASK}, no --spans")], "--text"


def infill_main(f) -> int:
  tokenizer = workflow.check_row_flags(f, check_infill_flags).tokenizer
  items, where = _items(f)
  # Tokenize and check every row before the model is loaded.
  encoded = [infill.encode(tokenizer, item) for item in items]
  scoring.check_lengths([ids for ids, _ in encoded], None, f.max_seq_length,
                        where)
  lm, tokenizer = workflow.load_from_flags(f)
  progress = Progress("infilling", unit="pieces", total=sum(
      len(p) for _, holes in encoded for p in holes))
  filler = infilling.Infiller(lm, f.batch_size)
  results = filler.fill_ids(
      [ids for ids, _ in encoded], [sum(holes, []) for _, holes in encoded],
      order=f.order, strategy=f.strategy, temperature=f.temperature,
      top_k=f.top_k, top_p=f.top_p, seed=f.seed,
      on_progress=progress.update)
  progress.finish()
  rows = [infilling.describe(tokenizer, item, holes, result)
          for item, (_, holes), result in zip(items, encoded, results)]
  workflow.write_jsonl(rows, f.output_file)
  if f.output_file:
    print(f"{len(rows)} texts filled -> {f.output_file}")
  return 0


def main(argv):
  del argv
  return run_main("run_infill", lambda: infill_main(flags.FLAGS))


def main_cli() -> None:
  """The command line: `python run_infill.py`,
  or `xlnet-tf-infill` installed."""
  define_flags()
  run_app("run_infill", main)


if __name__ == "__main__":
  main_cli()
