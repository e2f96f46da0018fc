"""Generation speed (new tokens/s): ours (`xlnet_tf.tasks.language_model.generation.decode`
in a tf.function, with and without XLA) vs transformers'
`XLNetLMHeadModel.generate`, same weights, same prompts, greedy.

XLNet-Base shape with random weights (ours, written with `save_hf_weights`
and loaded by transformers), float32, 2 threads each (`tf.config.threading`,
`torch.set_num_threads`). Prompts are random ids (no padding: transformers
drops the attention mask when it generates), `--prompt_len` long, and every
variant makes exactly `--new_tokens` tokens per prompt (no stop token;
transformers with `min_new_tokens`). transformers keeps its cache too
(`use_mems`: each step recomputes the last two tokens and the dummy slot
against the memory); ours feeds `[last token, slot]` against a fixed-size
cache. One untimed call per variant and batch size first (tracing, XLA
compilation, allocator warm-up); then the variants take turns, round after
round (the order rotated each round), one call each. Per variant and batch
size: the tokens/s of every round, their median, and the spread
((max - min) / median); per batch size the ratio of each of ours to
transformers (medians). The JSON also holds how many first tokens the two
models agree on (the first step is the same computation; later tokens may
differ: transformers lets the recomputed tokens see each other), and the
load average before and after (other processes on the cores change the
figures; `OMP_WAIT_POLICY` defaults to PASSIVE, see below).

    python benchmarks/bench_generation.py --rounds=3 > generation.json
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
# torch's OpenMP threads spin while they wait by default; on a machine where
# other processes take the cores, a 2-thread generate then ran 9-13x slower
# than with 1 thread (9 tokens: 41.2 s vs 3.2 s; passive waiting: 5.0 s).
# Passive waiting keeps the comparison about the models (set
# OMP_WAIT_POLICY=ACTIVE to measure the default).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bench_common import SIZES, print_report  # noqa: E402
from data_utils.tokenization import PAD_ID  # noqa: E402
from xlnet_tf.config import RunOptions, XLNetConfig  # noqa: E402
from xlnet_tf.pretrained import build_model, save_hf_weights  # noqa: E402
from xlnet_tf.tasks.language_model.generation import decode  # noqa: E402

VARIANTS = ("ours", "ours+xla", "hf")


def log(message: str) -> None:
  print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
        flush=True)


def build_ours(size: str, seed: int):
  """Our LM of `size` with the initializer's random weights (dropout off)."""
  tf.keras.utils.set_random_seed(seed)
  config = XLNetConfig(**SIZES[size], ff_activation="gelu")
  lm = build_model("lm", config, RunOptions(dropout=0.0, dropatt=0.0))
  lm.build()
  return lm


def ours_generator(lm, batch: int, prompt_len: int, new_tokens: int,
                   xla: bool):
  """A function of prompt ids `[batch, prompt_len]` (numpy) -> tokens
  `[batch, new_tokens]` (numpy): `decode`, greedy, as one tf.function."""
  @tf.function(jit_compile=xla, autograph=False, input_signature=[
      tf.TensorSpec([batch, prompt_len], tf.int32)])
  def generate(ids):
    return decode(lm, ids, tf.zeros(tf.shape(ids), tf.float32),
                  new_tokens)["tokens"]
  return lambda ids: generate(tf.constant(ids)).numpy()


def hf_generator(model, new_tokens: int):
  def generate(ids):
    with torch.inference_mode():
      out = model.generate(
          torch.tensor(ids, dtype=torch.long),
          attention_mask=torch.ones(ids.shape, dtype=torch.long),
          max_new_tokens=new_tokens, min_new_tokens=new_tokens,
          do_sample=False, num_beams=1, use_mems=True, pad_token_id=PAD_ID)
    return out[:, ids.shape[1]:].numpy()
  return generate


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--size", default="base", choices=sorted(SIZES))
  p.add_argument("--batch_sizes", default="1,8")
  p.add_argument("--prompt_len", type=int, default=128)
  p.add_argument("--new_tokens", type=int, default=128)
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--variants", default=",".join(VARIANTS))
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  variants = args.variants.split(",")
  unknown = set(variants) - set(VARIANTS)
  if unknown:
    p.error(f"--variants: unknown {sorted(unknown)}; use {VARIANTS}")
  batches = [int(b) for b in args.batch_sizes.split(",")]

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  torch.set_num_threads(args.threads)
  started = time.time()
  load_before = os.getloadavg()
  lm = build_ours(args.size, args.seed)
  hf_model = None
  if "hf" in variants:
    with tempfile.TemporaryDirectory() as tmp:
      save_hf_weights(lm, tmp)
      hf_model = transformers.XLNetLMHeadModel.from_pretrained(tmp).eval()
  rng = np.random.RandomState(args.seed)
  n_token = lm.encoder.config.n_token
  prompts = {b: rng.randint(9, n_token, [b, args.prompt_len]).astype(np.int32)
             for b in batches}

  runners, first_tokens, warmup = {}, {}, {}
  for b in batches:
    for v in variants:
      if v == "hf":
        fn = hf_generator(hf_model, args.new_tokens)
      else:
        fn = ours_generator(lm, b, args.prompt_len, args.new_tokens,
                            xla=v == "ours+xla")
      t0 = time.perf_counter()
      tokens = fn(prompts[b])
      warmup[f"{v}/b{b}"] = round(time.perf_counter() - t0, 2)
      assert tokens.shape == (b, args.new_tokens), tokens.shape
      first_tokens[(v, b)] = tokens[:, 0]
      runners[(v, b)] = fn
      log(f"warm-up {v} batch {b}: {warmup[f'{v}/b{b}']} s")

  rates = {key: [] for key in runners}
  keys = list(runners)
  for r in range(args.rounds):
    shift = r % len(keys)
    for key in keys[shift:] + keys[:shift]:
      v, b = key
      t0 = time.perf_counter()
      runners[key](prompts[b])
      seconds = time.perf_counter() - t0
      rates[key].append(b * args.new_tokens / seconds)
      log(f"round {r + 1} {v} batch {b}: {seconds:.2f} s, "
          f"{rates[key][-1]:.1f} tokens/s")

  results = {}
  for b in batches:
    row = {}
    for v in variants:
      values = rates[(v, b)]
      median = statistics.median(values)
      row[v] = {"tokens_per_sec": [round(x, 2) for x in values],
                "median": round(median, 2),
                "spread": round((max(values) - min(values)) / median, 3),
                "seconds_per_call": round(b * args.new_tokens / median, 2)}
    if "hf" in variants:
      for v in variants:
        if v != "hf":
          row[f"ratio_{v}_vs_hf"] = round(
              row[v]["median"] / row["hf"]["median"], 2)
      for v in variants:
        if v != "hf":
          row[f"first_token_agreement_{v}_hf"] = int(np.sum(
              first_tokens[(v, b)] == first_tokens[("hf", b)]))
    results[f"batch_{b}"] = row
  print_report({
      "benchmark": "generation", "size": args.size,
      "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
      "threads": args.threads, "rounds": args.rounds, "greedy": True,
      "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
      "dtype": "float32", "versions": {
          "tensorflow": tf.__version__, "torch": torch.__version__,
          "transformers": transformers.__version__},
      # Other processes on the machine slow a 2-thread run down, torch's
      # OpenMP threads most (a waiting thread spins on a taken core).
      "warmup_seconds": warmup, "results": results}, load_before, started)
  return 0


if __name__ == "__main__":
  sys.exit(main())
