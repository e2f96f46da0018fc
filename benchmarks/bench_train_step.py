"""Train-step / inference throughput and peak memory of xlnet-tf next to
Model Garden's XLNetBase and HuggingFace's PyTorch XLNet (when installed), in
one run on the same configs and thread settings; prints JSON.

    .venv/bin/python benchmarks/bench_train_step.py --size base

Implementations are given as variants, `name[+xla][+bf16][+compile]
[+recompute]`: e.g. `garden+xla` is Model Garden with XLA, `hf+compile` is
HuggingFace under torch.compile, `ours+bf16` is ours in mixed bfloat16.
Each (variant, mode) runs in its own process (clean peak RSS, same
--threads, default 2). Figures are the best of --rounds medians of --steps
timed steps after --warmup untimed ones, and of --passes such processes:
the variants of a mode take turns pass after pass, so a slow spell of this
shared machine does not land on one variant only. With --interleaved the
TensorFlow variants of a mode share one process and take turns step by step
(their medians then see the same machine; HF keeps its own processes). Per
mode the report gives ours (best float32 variant) over the fastest float32
peer in its best mode, and ours in bf16 over that same peer. The dense
matmul peak of the machine is measured (best of several shapes), with the
CPU model and whether it multiplies bfloat16 natively, and each training
mode reports the fraction of the peak reached (FLOPs = 6 x non-embedding
parameters x tokens + attention). TensorFlow variants train with
`tf_keras.optimizers.legacy.Adam`, the fused Adam kernel that both this
project's trainer and Model Garden's XLNet trainer run; HF with torch's Adam.
Every step clips to global norm 1 and hands the optimizer its gradients as
its project's trainer does: ours dense, Model Garden's embedding gradient as
IndexedSlices (Keras' sparse Adam path).

Modes (the issue's reference configs):
  finetune  classification train step, batch 8, seq 128, Adam
  pretrain  two-stream train step, batch 4, seq 128, reuse 64, mem 64,
            num_predict 21, tied LM loss
  infer1    classification forward, batch 1, seq 128 (latency)
  infer32   classification forward, batch 32, seq 128 (throughput)
  mem512    classification train step at seq 512 (batch --mem_batch), for
            peak memory with and without recompute
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZES = {
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072,
                 n_token=32000),
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64,
                  d_inner=4096, n_token=32000),
    "small": dict(n_layer=2, d_model=128, n_head=4, d_head=32, d_inner=512,
                  n_token=32000),
}
MODES = {
    "finetune": dict(batch=8, seq=128, train=True),
    "pretrain": dict(batch=4, seq=128, reuse=64, mem=64, num_predict=21,
                     train=True),
    "infer1": dict(batch=1, seq=128, train=False),
    "infer32": dict(batch=32, seq=128, train=False),
    "mem512": dict(batch=4, seq=512, train=True),
}
DEFAULT_IMPLS = {
    "mem512": "ours,ours+recompute,garden,hf",
    None: "ours,ours+xla,ours+bf16,garden,garden+xla,hf,hf+compile",
}
FLAGS = ("xla", "bf16", "compile", "recompute")


def _threads(n):
  os.environ.setdefault("OMP_NUM_THREADS", str(n))
  import tensorflow as tf
  tf.config.threading.set_intra_op_parallelism_threads(n)
  tf.config.threading.set_inter_op_parallelism_threads(n)
  return tf


def _time(fn, warmup, steps):
  for _ in range(warmup):
    fn()
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def _inputs(tf, mode, n_token, rng):
  import numpy as np
  m = MODES[mode]
  b, l = m["batch"], m["seq"]
  ids = tf.constant(rng.integers(10, n_token, (b, l)), tf.int32)
  seg = tf.constant(np.r_[np.zeros(l // 2), np.ones(l - l // 2)][None]
                    .repeat(b, 0), tf.int32)
  mask = tf.zeros([b, l], tf.float32)
  return ids, seg, mask


def run_ours(tf, size, mode, args):
  import numpy as np
  import tf_keras as keras
  import xlnet_tf as xt
  rng = np.random.default_rng(0)
  m = MODES[mode]
  cfg = xt.XLNetConfig(**SIZES[size], ff_activation="gelu", untie_r=True)
  opts = xt.RunOptions(dropout=0.1, dropatt=0.1, use_bfloat16=args.bf16,
                       recompute=args.recompute)
  ids, seg, mask = _inputs(tf, mode, cfg.n_token, rng)
  if mode == "pretrain":
    opts = opts.replace(mem_len=m["mem"], reuse_len=m["reuse"], bi_data=True)
    model = xt.XLNetPretrainer(cfg, opts)
    b, l, p = m["batch"], m["seq"], m["num_predict"]
    pos = np.sort(rng.choice(l, p, replace=False))
    feats = {"input_ids": ids, "segment_ids": seg,
             "perm_mask": tf.constant(rng.integers(0, 2, (b, l, l)),
                                      tf.float32),
             "target_mapping": tf.one_hot(np.tile(pos, (b, 1)), l),
             "input_q": tf.zeros([b, l]), "target": ids[:, :p],
             "target_mask": tf.ones([b, p])}
    mems = [tf.zeros([b, m["mem"], cfg.d_model])] * cfg.n_layer

    def loss_fn():
      return model(feats, mems=mems, training=True)["loss"]
  else:
    model = xt.XLNetClassifier(cfg, opts, n_class=2)
    feats = {"input_ids": ids, "segment_ids": seg, "input_mask": mask}
    labels = tf.zeros([m["batch"]], tf.int32)

    def loss_fn():
      logits = model(feats, training=True)["logits"]
      return tf.reduce_mean(xt.models.classification_loss(logits, labels))
  model.build(None)
  return model, feats, loss_fn, keras.optimizers.legacy.Adam(1e-5)


def run_garden(tf, size, mode, args):
  import numpy as np
  import tf_keras as keras
  from official.nlp.modeling import networks
  rng = np.random.default_rng(0)
  m = MODES[mode]
  s = SIZES[size]
  if args.bf16:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  net = networks.XLNetBase(
      vocab_size=s["n_token"], num_layers=s["n_layer"],
      hidden_size=s["d_model"], num_attention_heads=s["n_head"],
      head_size=s["d_head"], inner_size=s["d_inner"], dropout_rate=0.1,
      attention_dropout_rate=0.1, attention_type="bi",
      bi_data=mode == "pretrain",
      initializer=keras.initializers.RandomNormal(stddev=0.02),
      two_stream=mode == "pretrain", tie_attention_biases=False,
      memory_length=m.get("mem"), reuse_length=m.get("reuse"),
      inner_activation="gelu")
  ids, seg, mask = _inputs(tf, mode, s["n_token"], rng)
  b, l = m["batch"], m["seq"]
  inputs = {"input_ids": ids, "segment_ids": seg, "input_mask": 1.0 - mask,
            "state": None, "permutation_mask": None, "target_mapping": None,
            "masked_tokens": None}
  if mode == "pretrain":
    p = m["num_predict"]
    pos = np.sort(rng.choice(l, p, replace=False))
    inputs.update(
        state=[tf.zeros([b, m["mem"], s["d_model"]])] * s["n_layer"],
        permutation_mask=tf.constant(rng.integers(0, 2, (b, l, l)),
                                     tf.float32),
        target_mapping=tf.one_hot(np.tile(pos, (b, 1)), l),
        masked_tokens=tf.zeros([b, l]))
    bias = tf.Variable(tf.zeros([s["n_token"]]))
    targets = ids[:, :p]

    def loss_fn():
      out, _ = net(**inputs, training=True)
      table = net.get_embedding_lookup_table()
      logits = tf.einsum("bpd,nd->bpn", tf.cast(out, tf.float32),
                         tf.cast(table, tf.float32)) + bias
      return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=targets, logits=logits))
    extra = [bias]
  else:
    head = keras.layers.Dense(2)
    labels = tf.zeros([b], tf.int32)

    def loss_fn():
      out, _ = net(**inputs, training=True)
      logits = tf.cast(head(out[:, -1]), tf.float32)
      return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=labels, logits=logits))
    extra = []
  loss_fn()  # builds
  holder = keras.Model()
  holder.net, holder.extra = net, extra
  return holder, inputs, loss_fn, keras.optimizers.legacy.Adam(1e-5)


def run_hf(size, mode, args):
  import torch
  import transformers
  torch.set_num_threads(args.threads)
  m = MODES[mode]
  s = SIZES[size]
  cfg = transformers.XLNetConfig(
      vocab_size=s["n_token"], d_model=s["d_model"], n_layer=s["n_layer"],
      n_head=s["n_head"], d_inner=s["d_inner"], ff_activation="gelu_new",
      untie_r=True, num_labels=2, mem_len=m.get("mem"),
      reuse_len=m.get("reuse"), bi_data=mode == "pretrain")
  b, l = m["batch"], m["seq"]
  ids = torch.randint(10, s["n_token"], (b, l))
  if mode == "pretrain":
    model = transformers.XLNetLMHeadModel(cfg)
    p = m["num_predict"]
    tm = torch.zeros(b, p, l)
    for k in range(p):
      tm[:, k, k * 3] = 1
    kwargs = dict(perm_mask=torch.randint(0, 2, (b, l, l)).float(),
                  target_mapping=tm, labels=ids[:, :p].contiguous(),
                  mems=[torch.zeros(m["mem"], b, s["d_model"])] * s["n_layer"])
  else:
    model = transformers.XLNetForSequenceClassification(cfg)
    kwargs = dict(labels=torch.zeros(b, dtype=torch.long))
  if args.compile:
    model = torch.compile(model)
  opt = torch.optim.Adam(model.parameters(), lr=1e-5)

  if m["train"]:
    model.train()

    def step():
      opt.zero_grad()
      model(ids, **kwargs).loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as HF's Trainer
      opt.step()
  else:
    model.eval()

    def step():
      with torch.no_grad():
        model(ids)
  return step


def make_step(args, impl, mode):
  """A callable running one step of `impl` in `mode` (and waiting for it)."""
  m = MODES[mode]
  if impl == "hf":
    return run_hf(args.size, mode, args)
  tf = _threads(args.threads)
  build = run_ours if impl == "ours" else run_garden
  model, feats, loss_fn, opt = build(tf, args.size, mode, args)
  if m["train"]:
    # Each step applies gradients as its project's trainer does: clipped to
    # global norm 1; ours dense (`Trainer` via `dense_gradients`), Model
    # Garden's as they come, the embedding's as IndexedSlices
    # (official/legacy/xlnet/training_utils.py).
    if impl == "ours":
      from xlnet_tf.training import dense_gradients
    else:
      dense_gradients = lambda grads, variables: grads  # noqa: E731

    def train_step():
      with tf.GradientTape() as tape:
        loss = loss_fn()
      variables = model.trainable_variables
      grads = dense_gradients(tape.gradient(loss, variables), variables)
      grads, _ = tf.clip_by_global_norm(grads, 1.0)
      opt.apply_gradients(zip(grads, variables))
      return loss
    compiled = tf.function(train_step, jit_compile=args.xla)
  elif impl == "ours":
    compiled = tf.function(lambda: model(feats)["logits"],
                           jit_compile=args.xla)
  else:
    net = model.net
    compiled = tf.function(lambda: net(**feats)[0], jit_compile=args.xla)
  return lambda: compiled().numpy()  # (.numpy() waits for the result)


def _figures(mode, seconds, **extra) -> dict:
  m = MODES[mode]
  return {"seconds_per_step": seconds, **extra,
          "examples_per_sec": m["batch"] / seconds,
          "tokens_per_sec": m["batch"] * m["seq"] / seconds}


def single(args) -> dict:
  """One (variant, mode) measurement in this process."""
  step = make_step(args, args.impl, args.mode)
  rounds = [_time(step, args.warmup, args.steps) for _ in range(args.rounds)]
  return _figures(args.mode, min(rounds), rounds=rounds,
                  peak_rss_mb=resource.getrusage(
                      resource.RUSAGE_SELF).ru_maxrss / 1024)


def interleaved(args) -> dict:
  """The TensorFlow variants of one mode in this process, timed step by
  step in turn (ours, garden, ours, ...): a slow spell of the machine then
  lands on every variant alike. Medians over `steps x rounds` steps each;
  no per-variant peak RSS (see `mem512`, which keeps separate processes)."""
  steps = {}
  for spec in args.interleave.split(","):
    name, flags = parse_variant(spec)
    variant_args = argparse.Namespace(**vars(args))
    for flag in FLAGS:
      setattr(variant_args, flag, flag in flags)
    steps[spec] = make_step(variant_args, name, args.mode)
    if name == "garden" and "bf16" in flags:  # it set the global policy
      import tf_keras as keras
      keras.mixed_precision.set_global_policy("float32")
  for step in steps.values():
    for _ in range(args.warmup):
      step()
  times = {spec: [] for spec in steps}
  for _ in range(args.steps * args.rounds):
    for spec, step in steps.items():
      t0 = time.perf_counter()
      step()
      times[spec].append(time.perf_counter() - t0)
  return {spec: _figures(args.mode, statistics.median(t), steps=t)
          for spec, t in times.items()}


def matmul_peak(args) -> dict:
  """GFLOP/s of dense matmuls, best over shapes XLNet-Base multiplies."""
  tf = _threads(args.threads)
  shapes = ((2048, 2048, 2048), (1024, 768, 3072), (1024, 3072, 768))
  out = {}
  for dtype in (tf.float32, tf.bfloat16):
    best = 0.0
    for m, k, n in shapes:
      a = tf.cast(tf.random.normal([m, k]), dtype)
      b = tf.cast(tf.random.normal([k, n]), dtype)
      f = tf.function(lambda a=a, b=b: tf.matmul(a, b))
      seconds = _time(lambda f=f: f().numpy(), 2, 7)
      best = max(best, 2 * m * k * n / seconds / 1e9)
    out[dtype.name] = best
  from xlnet_tf.initializers import cpu_has_native_bfloat16
  model = next((line.split(":", 1)[1].strip() for line in open(
      "/proc/cpuinfo") if line.startswith("model name")), None) \
      if os.path.exists("/proc/cpuinfo") else None
  return {"matmul_gflops": out,
          "cpu": {"model": model,
                  "native_bfloat16": cpu_has_native_bfloat16()}}


def flops_per_step(size, mode) -> float:
  """Training FLOPs: 6 x non-embedding params x tokens (forward 2, backward
  4) + the attention products (scores, position scores over 2L rows,
  weighted sum), x 3 for forward and backward."""
  s, m = SIZES[size], MODES[mode]
  d, f, n = s["d_model"], s["d_inner"], s["n_layer"]
  params = n * (5 * d * d + 2 * d * f)  # q k v r o + FFN, no embeddings
  b, l = m["batch"], m["seq"]
  klen = l + m.get("mem", 0)
  attn = n * 2 * b * l * d * (2 * klen + (klen + l))
  return 6 * params * b * l + 3 * attn


def parse_variant(spec: str):
  """'garden+xla' -> ('garden', {'xla'}); unknown parts are an error."""
  name, *flags = spec.split("+")
  if name not in ("ours", "garden", "hf"):
    raise SystemExit(f"--impls: unknown implementation {name!r} in {spec!r}")
  unknown = set(flags) - set(FLAGS)
  if unknown:
    raise SystemExit(f"--impls: unknown variant flag(s) {sorted(unknown)} in "
                     f"{spec!r}; use {FLAGS}")
  return name, set(flags)


def best_of(old: Optional[dict], new: dict) -> dict:
  """The faster of two measurements of one variant, keeping every pass's
  time (`passes`) and the larger peak RSS; an error only if both failed."""
  if old is None:
    return dict(new, passes=[new.get("seconds_per_step")])
  passes = old["passes"] + [new.get("seconds_per_step")]
  if "seconds_per_step" not in new:
    return dict(old, passes=passes)
  if "seconds_per_step" in old:
    rss = [r["peak_rss_mb"] for r in (old, new) if "peak_rss_mb" in r]
    rss = {"peak_rss_mb": max(rss)} if rss else {}
    if old["seconds_per_step"] <= new["seconds_per_step"]:
      return dict(old, passes=passes, **rss)
    new = dict(new, **rss)
  return dict(new, passes=passes)


def summarize(row: dict, mode: str) -> dict:
  """Ours (best float32 variant) and ours+bf16 over the fastest float32 peer
  in its best mode; latency for batch 1; peak RSS for memory runs."""
  ok = {k: v for k, v in row.items() if "examples_per_sec" in v}

  def best(keep):
    picks = [(v["examples_per_sec"], k) for k, v in ok.items() if keep(k)]
    return max(picks) if picks else None
  ours = best(lambda k: k.startswith("ours") and "bf16" not in k
              and "recompute" not in k)
  ours16 = best(lambda k: k.startswith("ours") and "bf16" in k)
  peer = best(lambda k: not k.startswith("ours") and "bf16" not in k)
  out = {}
  if ours and peer:
    out.update(ours_best=ours[1], fastest_peer=peer[1],
               ours_vs_fastest_peer=ours[0] / peer[0])
    if mode == "infer1":
      out["latency_ms"] = {k: 1000 * v["seconds_per_step"]
                           for k, v in ok.items()}
  if ours16 and peer:
    out["ours_bf16_vs_fastest_fp32_peer"] = ours16[0] / peer[0]
  if mode == "mem512":
    out["peak_rss_mb"] = {k: v["peak_rss_mb"] for k, v in ok.items()}
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--modes", default="finetune,pretrain,infer1,infer32")
  parser.add_argument("--impls", default=None,
                      help="comma-separated variants (default per mode: "
                      f"{DEFAULT_IMPLS})")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--passes", type=int, default=2,
                      help="processes per variant, taking turns")
  parser.add_argument("--mem_batch", type=int, default=4,
                      help="batch of the mem512 mode")
  parser.add_argument("--interleaved", action="store_true",
                      help="time the TensorFlow variants of a mode in one "
                      "process, a step each in turn (HF still runs in its "
                      "own processes)")
  parser.add_argument("--impl", help=argparse.SUPPRESS)
  parser.add_argument("--interleave", help=argparse.SUPPRESS)
  parser.add_argument("--mode", help=argparse.SUPPRESS)
  parser.add_argument("--peak", action="store_true", help=argparse.SUPPRESS)
  for flag in FLAGS:
    parser.add_argument(f"--{flag}", action="store_true",
                        help=argparse.SUPPRESS)
  args = parser.parse_args()
  MODES["mem512"]["batch"] = args.mem_batch
  if args.peak:
    print(json.dumps(matmul_peak(args)))
    return
  if args.impl:
    print(json.dumps(single(args)))
    return
  if args.interleave:
    print(json.dumps(interleaved(args)))
    return

  def child(extra):
    cmd = [sys.executable, os.path.abspath(__file__), f"--size={args.size}",
           f"--threads={args.threads}", f"--steps={args.steps}",
           f"--warmup={args.warmup}", f"--rounds={args.rounds}",
           f"--mem_batch={args.mem_batch}", *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
      return {"error": res.stderr.strip().splitlines()[-1]
              if res.stderr.strip() else f"exit {res.returncode}"}
    return json.loads(res.stdout.strip().splitlines()[-1])

  report = {"benchmark": "train_step", "size": args.size,
            "threads": args.threads, **child(["--peak"]), "results": []}
  peaks = report.get("matmul_gflops", {})
  for mode in args.modes.split(","):
    if mode not in MODES:
      raise SystemExit(f"--modes: unknown mode {mode!r}; use {sorted(MODES)}")
    specs = (args.impls or DEFAULT_IMPLS.get(mode, DEFAULT_IMPLS[None]))
    row = {}
    together = [spec for spec in specs.split(",") if args.interleaved
                and parse_variant(spec)[0] != "hf" and mode != "mem512"]
    for _ in range(args.passes):
      if together:
        r = child([f"--interleave={','.join(together)}", f"--mode={mode}"])
        for spec in together:
          got = r.get(spec, r)  # an error applies to them all
          print(json.dumps({"mode": mode, "variant": spec, **got}),
                file=sys.stderr, flush=True)  # progress
          row[spec] = best_of(row.get(spec), got)
      for spec in specs.split(","):
        if spec in together:
          continue
        name, flags = parse_variant(spec)
        r = child([f"--impl={name}", f"--mode={mode}",
                   *(f"--{f}" for f in sorted(flags))])
        print(json.dumps({"mode": mode, "variant": spec, **r}),
              file=sys.stderr, flush=True)  # progress
        row[spec] = best_of(row.get(spec), r)
    for spec, r in row.items():
      peak = peaks.get("bfloat16" if "bf16" in spec else "float32")
      if "seconds_per_step" in r and MODES[mode]["train"] and peak:
        r["fraction_of_matmul_peak"] = (
            flops_per_step(args.size, mode) / r["seconds_per_step"] / 1e9 /
            peak)
    report["results"].append({"mode": mode, **MODES[mode], "variants": row,
                              "summary": summarize(row, mode)})
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
