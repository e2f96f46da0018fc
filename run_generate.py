"""Continues prompts with a pretrained XLNet: greedy, sampling (temperature,
top-k, top-p, seed) or beam search, with a cache (each new token costs one
step against the memory of what came before).

    python run_generate.py --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
        --spiece_model_file=xlnet_cased_L-24_H-1024_A-16/spiece.model \
        --prompt="The meaning of life is" --strategy=sample --top_p=0.9 \
        --seed=1 --max_new_tokens=40 --output_file=continuations.jsonl

The prompt is the context (its tokens see each other); generated token k is
the k-th target of the permutation language model, seeing the prompt and
the tokens before it. Prompts come from `--prompt` (repeatable) or
`--input_file` (lines, a .tsv column or a .jsonl field). One JSONL line per
prompt, in input order: `prompt`, `text` (the continuation), `tokens`,
`pieces`, `log_probs` (the model's log p of each token), `sum_log_prob`,
`stop` ("length", "stop_id" or "stop_string") and `beam_score` for beams.
Without `--output_file` the lines go to stdout.

`--export_dir` writes a SavedModel with the signatures `generate_greedy`,
`generate_sample` (raw text in; the loop runs in the graph) and
`embed_text`, for prompts of up to `--export_prompt_length` pieces and
`--max_new_tokens` new tokens; with it, prompts are optional.
"""

import json
import math

from absl import flags, logging

from data_utils.errors import UsageError, check_positive, run_app, run_main
from data_utils.path_checks import check_store, tf_path
from data_utils.progress import Progress
from data_utils.text_inputs import read_texts
from data_utils.tokenization import EOD_ID
from xlnet_tf.export.directory import check_export_dir
from xlnet_tf.tasks.language_model.generation import check_sampling
from xlnet_tf.tasks.language_model.generation_search import STRATEGIES, Generator
from xlnet_tf.tasks.language_model.serving import EXPORT_KIND, export_language_model
from xlnet_tf.tasks.language_model.workflow import (check_lm_flags, check_lm_model,
                                   check_new_tokens, check_output_file,
                                   define_lm_flags, load_from_flags,
                                   machine_memory, write_jsonl)

SAMPLING_FLAGS = ("temperature", "top_k", "top_p", "seed")
BEAM_FLAGS = ("num_beams", "length_penalty")
# The sampling seed is an int32 pair [seed, batch].
SEED_RANGE = (-2 ** 31, 2 ** 31 - 1)


def define_flags() -> None:
  """The script's flags (defined when run as a script, so that tests can
  import this module and call `generate_main` with any flag object)."""
  define_lm_flags(batch_size=8)
  flags.DEFINE_multi_string("prompt", None, "A prompt (repeatable; instead "
                            "of --input_file).")
  flags.DEFINE_enum("strategy", "greedy", list(STRATEGIES),
                    "greedy, sample or beam.")
  flags.DEFINE_integer("max_new_tokens", 32, "Tokens to generate at most.")
  flags.DEFINE_float("temperature", 1.0, "Sampling: divides the logits.")
  flags.DEFINE_integer("top_k", 0, "Sampling: only the k most probable "
                       "tokens (0 = all).")
  flags.DEFINE_float("top_p", 1.0, "Sampling: only the most probable tokens "
                     "covering this probability (1.0 = all).")
  flags.DEFINE_integer("seed", None, "Sampling: the seed (batch i draws from "
                       "[seed, i]; default: a random one).")
  flags.DEFINE_integer("num_beams", 4, "Beam search: hypotheses per prompt.")
  flags.DEFINE_float("length_penalty", 1.0, "Beam search: the final score "
                     "is sum(log p) / length ** length_penalty.")
  flags.DEFINE_list("stop_ids", [str(EOD_ID)], "Token ids that end a "
                    "continuation (kept as its last token; default <eod>; "
                    "empty: none).")
  flags.DEFINE_multi_string("stop", None, "A string that ends a continuation "
                            "(its text is cut before it; repeatable).")
  flags.DEFINE_string("output_file", None, "JSONL output (default: stdout).")
  flags.DEFINE_string("export_dir", None, "Also write a SavedModel here "
                      "(generate_greedy, generate_sample, embed_text).")
  flags.DEFINE_integer("export_prompt_length", 128, "The export's prompt "
                       "window: longer prompts keep their last pieces.")


def _stop_ids(f, vocab_size=None):
  """The ids of --stop_ids, each a piece of the vocabulary (when
  `vocab_size` is given: an id past it is never generated, so it would
  never stop anything)."""
  ids, shown = [], ",".join(f.stop_ids or [])
  for value in f.stop_ids or []:
    if not value.strip().isdigit():
      raise UsageError(f"--stop_ids={shown}: {value!r} is not a token id")
    ids.append(int(value))
    if vocab_size is not None and ids[-1] >= vocab_size:
      raise UsageError(
          f"--stop_ids={shown}: {ids[-1]} is not a token id of "
          f"--spiece_model_file={f.spiece_model_file} ({vocab_size} pieces: "
          f"ids 0..{vocab_size - 1}), so it could never be generated")
  return ids


def check_flags(f):
  """One-line UsageErrors, before any model is loaded; returns the
  `LMFiles` (config, tokenizer) the flags name."""
  check_lm_flags(f)
  exporting = bool(getattr(f, "export_dir", None))
  if f.input_file and f.prompt:
    raise UsageError("give exactly one of --input_file and --prompt")
  if not (f.input_file or f.prompt or exporting):
    raise UsageError("give exactly one of --input_file and --prompt (or "
                     "--export_dir alone)")
  if exporting:
    check_positive(f.export_prompt_length, "export_prompt_length")
    # A SavedModel is TF's to write: local or gs:// only.
    check_store(tf_path(f.export_dir, "export_dir"), "export_dir")
    check_export_dir(f.export_dir, EXPORT_KIND)
  if f.strategy not in STRATEGIES:
    raise UsageError(f"--strategy={f.strategy}: must be one of "
                     f"{', '.join(STRATEGIES)}")
  check_positive(f.max_new_tokens, "max_new_tokens")
  for name in SAMPLING_FLAGS + BEAM_FLAGS:
    needs = "sample" if name in SAMPLING_FLAGS else "beam"
    if f[name].present and f.strategy != needs:
      raise UsageError(f"--{name}: only with --strategy={needs}")
  check_sampling(f.temperature, f.top_k, f.top_p)
  if f.seed is not None and not SEED_RANGE[0] <= f.seed <= SEED_RANGE[1]:
    raise UsageError(f"--seed={f.seed}: must be in {SEED_RANGE[0]}.."
                     f"{SEED_RANGE[1]} (an int32)")
  check_positive(f.num_beams, "num_beams")
  if not math.isfinite(f.length_penalty):
    raise UsageError(f"--length_penalty={f.length_penalty}: must be a "
                     "finite number")
  _stop_ids(f)
  if f.stop and any(not s for s in f.stop):
    raise UsageError("--stop: an empty string would stop at once")
  if f.output_file:
    check_output_file(f.output_file, "output_file", f.overwrite)
  files = check_lm_model(f)
  vocab = files.tokenizer.vocab_size
  _stop_ids(f, vocab)
  if f.strategy == "beam" and f.num_beams > vocab:
    raise UsageError(f"--num_beams={f.num_beams}: more than the {vocab} "
                     f"pieces of --spiece_model_file={f.spiece_model_file}")
  if exporting:
    # The export's prompt window is its longest prompt.
    check_new_tokens(f.max_new_tokens, files.config, f.export_prompt_length,
                     1, None)
  return files


def _check_size(f, files, prompts) -> None:
  """--max_new_tokens after these prompts, decoded --batch_size (x
  --num_beams) rows at a time, fits the positions and this machine's
  memory."""
  longest = max(len(files.tokenizer.encode_ids(p)) for p in prompts)
  rows = min(f.batch_size, len(prompts))
  if f.strategy == "beam":
    rows *= f.num_beams
  check_new_tokens(f.max_new_tokens, files.config, longest, rows,
                   machine_memory())


def _prompts(f):
  if not (f.prompt or f.input_file):
    return []
  if f.prompt:
    prompts, where = list(f.prompt), "--prompt"
  else:
    prompts = read_texts(f.input_file, f.text_column)
    where = f"--input_file={f.input_file}: text"
  for i, prompt in enumerate(prompts):
    if not prompt.strip():
      raise UsageError(f"{where} {i + 1} is empty (a prompt needs at least "
                       "one token)")
  if not prompts:
    raise UsageError(f"--input_file={f.input_file}: no texts")
  return prompts


def generate_main(f) -> int:
  files = check_flags(f)
  prompts = _prompts(f)
  if prompts:
    _check_size(f, files, prompts)
  lm, tokenizer = load_from_flags(f)
  settings = {"stop_ids": _stop_ids(f), "stop_strings": f.stop or ()}
  if f.strategy == "sample":
    # More than the vocabulary is all of it (and must fit an int32).
    settings.update(temperature=f.temperature,
                    top_k=min(f.top_k, tokenizer.vocab_size), top_p=f.top_p,
                    seed=f.seed)
  elif f.strategy == "beam":
    settings.update(num_beams=f.num_beams, length_penalty=f.length_penalty)
  if getattr(f, "export_dir", None):
    path = export_language_model(lm, f.spiece_model_file, f.export_dir,
                                 f.export_prompt_length, f.max_new_tokens,
                                 f.uncased, settings["stop_ids"])
    logging.info("exported to %s", path)
    if not prompts:
      return 0
  generator = Generator(lm, tokenizer, f.max_new_tokens, f.strategy,
                        **settings)
  progress = Progress("generating", total=len(prompts), unit="prompts")
  results = generator(prompts, f.batch_size, progress.update)
  progress.finish()
  write_jsonl(results, f.output_file)
  tokens = sum(len(r["tokens"]) for r in results)
  logging.info("%s", json.dumps({"prompts": len(results), "tokens": tokens}))
  return 0


def main(argv):
  del argv
  return run_main("run_generate", lambda: generate_main(flags.FLAGS))


def main_cli() -> None:
  """The command line: `python run_generate.py`,
  or `xlnet-tf-generate` installed."""
  define_flags()
  run_app("run_generate", main)


if __name__ == "__main__":
  main_cli()
