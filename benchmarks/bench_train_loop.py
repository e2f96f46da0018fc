"""Times the shared training loop (`xlnet_tf.training.Trainer.train`) on a
small XLNet classifier with synthetic batches; prints JSON.

    .venv/bin/python benchmarks/bench_train_loop.py [--repo DIR] [--steps 60] [--repeats 3]

The model is small on purpose: what is measured is the loop around the step
(host loop, per-step bookkeeping, the non-finite-loss check), which a large
model would hide. `--repo` times the `xlnet_tf` of another checkout (e.g. a
`git worktree` of an older commit): the measuring process (`loop_ours.py`)
has it first on its import path. Old and new loops run in turns by the same
command:

    for i in 1 2 3; do for r in /tmp/old .; do
      .venv/bin/python benchmarks/bench_train_loop.py --repo $r; done; done
"""

import argparse
import json
import os

from bench_common import imported_from, run_child


def main():
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq_len", type=int, default=64)
  args = parser.parse_args()
  repo = os.path.abspath(args.repo)
  result = run_child([f"--steps={args.steps}", f"--repeats={args.repeats}",
                      f"--batch={args.batch}", f"--seq_len={args.seq_len}"],
                     None, repo, script="loop_ours.py")
  imported_from(result, repo)
  print(json.dumps({"repo": repo, "steps": args.steps,
                    "steps_per_sec": result["steps_per_sec"]}))


if __name__ == "__main__":
  main()
