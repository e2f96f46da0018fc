"""Where a training step's time goes: this project's step of a benchmark
mode (`bench_common.MODES`) traced with the TensorFlow profiler, read back
per thread and per op type; prints JSON.

    .venv/bin/python benchmarks/profile_step.py --size base --mode finetune [--xla]

Reported, over the traced steps:
- `cores_busy`: the process's CPU seconds over wall seconds (the OS's view);
- `threads`: per executor thread of the trace (`tf_Compute/*`, the
  inter-op pool), the share of the wall time it spent inside an op (an op
  may hand parts of its work to the intra-op pool, `tf_*Eigen*`, whose
  work the trace does not time);
- `alone`: the share of the wall time when exactly one op ran anywhere
  (serial: the other core had only intra-op help to give, if the op gives
  any) and when none ran (`no_op`: Python, host syncs, the executor);
  the fused elementwise chains' XLA kernels, which the trace shows without
  an op name, count as the op `(async kernel: XLA)`;
- `ops`: the op types by time, each with its time per step and the part of
  it during which it was the only op running.
Under XLA the step is a few compiled clusters, so the op table shows those.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys
import tempfile

# The `xlnet_tf` of this tree, ahead of any installed one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

import step_ours  # noqa: E402
from bench_common import FLAGS, MODES, SIZES, cpu_seconds  # noqa: E402
from matmul_peak import cpu_description  # noqa: E402


ASYNC_START = "ExecutorState::ProcessAsync::Start"
ASYNC_OP = "(async kernel: XLA)"


def read_events(logdir: str):
  """`[(thread name, op type, start ps, end ps)]` of the host plane of the
  trace in `logdir` (an op's type is what follows ':' in its name)."""
  path, = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  events = []
  for plane in space.planes:
    if not plane.name.startswith("/host:CPU"):
      continue
    names = {k: m.name for k, m in plane.event_metadata.items()}
    for line in plane.lines:
      if line.name == "python":
        continue  # the calls into TensorFlow, which contain the ops
      base = line.timestamp_ns * 1000
      for e in line.events:
        name = names.get(e.metadata_id, "")
        # 'scope/name:Type' is an op; 'Class::Method' is the runtime's, and
        # a function call contains the ops of its body. An asynchronous
        # kernel (the fused elementwise chains' XLA launches) shows only as
        # the executor's start of it, with no op name.
        if name == ASYNC_START:
          op = ASYNC_OP
        elif (":" not in name or "::" in name
              or name.endswith(("PartitionedCall", ":If", ":While"))):
          continue
        else:
          op = name.rsplit(":", 1)[1]
        start = base + e.offset_ps
        events.append((line.name, op, start, start + e.duration_ps))
  return events


def overlap_table(events, steps: int, wall_ps: int, top: int) -> dict:
  """Per-thread busy shares, serial shares and the op table (see module
  docstring) of `events` over `wall_ps` picoseconds of `steps` steps."""
  t0 = min(e[2] for e in events)
  # Sweep: how many ops run at each instant; an interval where one runs
  # belongs to that op alone.
  marks = sorted([(s, 1, i) for i, (_, _, s, _) in enumerate(events)] +
                 [(e, -1, i) for i, (_, _, _, e) in enumerate(events)])
  running, last, alone, idle = set(), t0, collections.Counter(), 0
  for t, kind, i in marks:
    if len(running) == 1:
      alone[events[next(iter(running))][1]] += t - last
    elif not running:
      idle += t - last
    last = t
    (running.add if kind == 1 else running.discard)(i)
  idle += max(0, t0 + wall_ps - last)
  per_thread, per_op = collections.Counter(), collections.Counter()
  for thread, op, s, e in events:
    per_thread[thread] += e - s
    per_op[op] += e - s
  ms = lambda ps: round(ps / 1e9 / steps, 1)
  return {
      "threads": {t: round(v / wall_ps, 3)
                  for t, v in per_thread.most_common()},
      "alone": {"one_op": round(sum(alone.values()) / wall_ps, 3),
                "no_op": round(idle / wall_ps, 3)},
      "ops": [{"op": op, "ms_per_step": ms(v), "alone_ms": ms(alone[op])}
              for op, v in per_op.most_common(top)],
  }


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="base", choices=sorted(SIZES))
  parser.add_argument("--mode", default="finetune",
                      choices=[m for m in MODES if MODES[m]["train"]])
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=25)
  for flag in FLAGS:
    parser.add_argument(f"--{flag}", action="store_true")
  args = parser.parse_args()
  step = step_ours.make_step(args, args.mode)
  for _ in range(args.warmup):
    step()
  with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    c0 = cpu_seconds()
    t0 = tf.timestamp()
    for _ in range(args.steps):
      step()
    wall = float(tf.timestamp() - t0)
    busy = (cpu_seconds() - c0) / wall
    tf.profiler.experimental.stop()
    events = read_events(logdir)
  print(json.dumps({
      "benchmark": "profile_step", "size": args.size, "mode": args.mode,
      "variant": "+".join(["ours"] + [f for f in FLAGS if getattr(args, f)]),
      "cpu": cpu_description(), "seconds_per_step": wall / args.steps,
      "cores_busy": round(busy, 2),
      **overlap_table(events, args.steps, int(wall * 1e12), args.top)},
      indent=2))


if __name__ == "__main__":
  main()
