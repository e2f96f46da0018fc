"""Child of `bench_train_loop.py`: times this project's training loop
(`Trainer.train`) on a small classifier with synthetic batches, with the
`xlnet_tf` first on this process's import path; prints JSON.

    PYTHONPATH=<tree> python benchmarks/loop_ours.py --steps 60 --repeats 3
"""

import argparse
import json
import tempfile

import numpy as np
import tensorflow as tf
import xlnet_tf as xt
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer


def steps_per_sec(steps: int, repeats: int, batch: int, seq_len: int):
  """Steps/s of the second window of `steps` in each of `repeats` runs."""
  config = xt.XLNetConfig(n_layer=2, d_model=64, n_head=4, d_head=16,
                          d_inner=128, n_token=1000, ff_activation="gelu",
                          untie_r=True)
  task = ClassifierTask(config, xt.RunOptions(dropout=0.1, dropatt=0.1), 2,
                        "bench", False, "last", True, seq_len)
  rng = np.random.RandomState(0)
  n = batch * 16
  data = tf.data.Dataset.from_tensor_slices({
      "input_ids": rng.randint(10, 1000, [n, seq_len]).astype(np.int32),
      "segment_ids": np.zeros([n, seq_len], np.int32),
      "input_mask": np.zeros([n, seq_len], np.float32),
      "label": rng.randint(0, 2, [n]).astype(np.int32),
      "is_real_example": np.ones([n], np.int32),
  }).repeat().batch(batch)

  # Two windows of `steps`: the first traces and warms up, the second is
  # the one measured (the loop reports each window's steps/s).
  rates = []
  for _ in range(repeats):
    with tempfile.TemporaryDirectory() as model_dir:
      trainer = Trainer(task, TrainOptions(
          model_dir=model_dir, train_steps=2 * steps, iterations=steps,
          learning_rate=1e-4))
      logs = trainer.train(lambda ctx, skip: data, batch)
      rates.append(logs["steps_per_sec"])
  return rates


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  for flag in ("steps", "repeats", "batch", "seq_len"):
    parser.add_argument(f"--{flag}", type=int, required=True)
  args = parser.parse_args()
  rates = steps_per_sec(args.steps, args.repeats, args.batch, args.seq_len)
  print(json.dumps({"source": xt.__file__,
                    "steps_per_sec": [round(r, 2) for r in rates]}))


if __name__ == "__main__":
  main()
