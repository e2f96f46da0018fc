"""Times the shared training loop (`xlnet_tf.training.Trainer.train`) on a
small XLNet classifier with synthetic batches; prints JSON.

    .venv/bin/python benchmarks/bench_train_loop.py [--repo DIR] [--steps 60] [--repeats 3]

The model is small on purpose: what is measured is the loop around the step
(host loop, per-step bookkeeping, the non-finite-loss check), which a large
model would hide. `--repo` imports `xlnet_tf` from another checkout (e.g. a
`git worktree` of an older commit), so old and new loops can be run in turns
by the same command:

    for i in 1 2 3; do for r in /tmp/old .; do
      .venv/bin/python benchmarks/bench_train_loop.py --repo $r; done; done
"""

import argparse
import json
import os
import sys
import tempfile


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq_len", type=int, default=64)
  args = parser.parse_args()
  repo = os.path.abspath(args.repo)
  sys.path.insert(0, repo)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

  import numpy as np
  import tensorflow as tf
  import xlnet_tf as xt
  from xlnet_tf.tasks import ClassifierTask
  from xlnet_tf.training import TrainOptions, Trainer

  config = xt.XLNetConfig(n_layer=2, d_model=64, n_head=4, d_head=16,
                          d_inner=128, n_token=1000, ff_activation="gelu",
                          untie_r=True)
  task = ClassifierTask(config, xt.RunOptions(dropout=0.1, dropatt=0.1), 2,
                        "bench", False, "last", True, args.seq_len)
  rng = np.random.RandomState(0)
  n = args.batch * 16
  data = tf.data.Dataset.from_tensor_slices({
      "input_ids": rng.randint(10, 1000, [n, args.seq_len]).astype(np.int32),
      "segment_ids": np.zeros([n, args.seq_len], np.int32),
      "input_mask": np.zeros([n, args.seq_len], np.float32),
      "label": rng.randint(0, 2, [n]).astype(np.int32),
      "is_real_example": np.ones([n], np.int32),
  }).repeat().batch(args.batch)

  # Two windows of `steps`: the first traces and warms up, the second is
  # the one measured (the loop reports each window's steps/s).
  rates = []
  for _ in range(args.repeats):
    with tempfile.TemporaryDirectory() as model_dir:
      trainer = Trainer(task, TrainOptions(
          model_dir=model_dir, train_steps=2 * args.steps,
          iterations=args.steps, learning_rate=1e-4))
      logs = trainer.train(lambda ctx, skip: data, args.batch)
      rates.append(logs["steps_per_sec"])
  print(json.dumps({"repo": repo, "steps": args.steps,
                    "steps_per_sec": [round(r, 2) for r in rates]}))


if __name__ == "__main__":
  main()
