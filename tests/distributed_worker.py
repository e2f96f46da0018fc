"""One process of the distributed tests (`test_distributed.py`): trains a tiny
model under a real strategy and saves what the test compares.

  distributed_worker.py multi_worker TASK_ID PORTS MODEL_DIR INIT OUT
      one of two MultiWorkerMirroredStrategy workers (TF_CONFIG over
      loopback), fine-tuning the classifier for STEPS steps.
  distributed_worker.py mirrored_pretrain RECORDS MODEL_DIR INIT OUT
      MirroredStrategy over two logical CPUs, pretraining with bi_data and
      memory for STEPS steps.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

STEPS = 2


def _load(path):
  import numpy as np
  arrays = np.load(path)
  return [arrays[f"arr_{k}"] for k in range(len(arrays.files))]


def multi_worker(task_id, ports, model_dir, init, out):
  os.environ["TF_CONFIG"] = json.dumps({
      "cluster": {"worker": [f"localhost:{p}" for p in ports.split(",")]},
      "task": {"type": "worker", "index": int(task_id)}})
  import numpy as np
  from xlnet_tf.training import Trainer, make_strategy
  import test_distributed as t
  strategy = make_strategy("multi_worker")  # first: before any other TF op
  trainer = Trainer(t.classifier_task(), t.classifier_options(model_dir, STEPS),
                    strategy=strategy)
  trainer.model.set_weights(_load(init))
  logs = trainer.train(t.classifier_data, t.PER_REPLICA)
  np.savez(out, *[w.numpy() for w in trainer.model.weights],
           loss=logs["loss"], grad_norm=logs["grad_norm"],
           replicas=strategy.num_replicas_in_sync)


def mirrored_pretrain(records, model_dir, init, out):
  import numpy as np
  from xlnet_tf.training import Trainer, make_strategy, split_cpu
  import test_distributed as t
  split_cpu(2)
  strategy = make_strategy("mirrored")
  trainer = Trainer(t.pretrain_task(), t.pretrain_options(model_dir, STEPS),
                    strategy=strategy)
  trainer.model.set_weights(_load(init))
  logs = trainer.train(lambda ctx, skip: t.pretrain_data(records, skip),
                       t.PER_REPLICA)
  mems = {f"mem_{layer}_replica_{r}": value.numpy()
          for layer, var in enumerate(trainer.carried.variables)
          for r, value in enumerate(
              strategy.experimental_local_results(var))}
  np.savez(out, *[w.numpy() for w in trainer.model.weights], **mems,
           loss=logs["loss"], replicas=strategy.num_replicas_in_sync)


if __name__ == "__main__":
  {"multi_worker": multi_worker,
   "mirrored_pretrain": mirrored_pretrain}[sys.argv[1]](*sys.argv[2:])
