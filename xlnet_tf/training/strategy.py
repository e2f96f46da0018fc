"""Where the loop runs: a `tf.distribute.Strategy` by name."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from data_utils.errors import UsageError
from xlnet_tf.training.options import STRATEGIES


def split_cpu(num_devices: int) -> None:
  """Splits the CPU into `num_devices` logical devices (to run
  `mirrored` without accelerators); must run before TensorFlow starts."""
  if num_devices:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


def make_strategy(name: str, tpu: Optional[str] = None
                  ) -> tf.distribute.Strategy:
  """'default' (one device), 'mirrored' (all local devices), 'multi_worker'
  (TF_CONFIG cluster), 'tpu' (address in `tpu`, or the local TPU)."""
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    # On a TPU VM the local TPU is found without a name; elsewhere the
    # resolver needs --tpu (a name or grpc:// address).
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu or "")
    except ValueError as e:
      raise UsageError(f"--strategy=tpu: no TPU found ({e}); pass --tpu=NAME "
                       "or run on a TPU VM") from None
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise UsageError(f"strategy must be one of {STRATEGIES}, got {name!r}")


def num_workers(strategy: tf.distribute.Strategy) -> int:
  """How many hosts run `strategy`'s replicas and each feed their own: the
  chief and workers of a multi-worker cluster (its `TF_CONFIG`, through the
  public `cluster_resolver`), else 1 (one host feeds every replica, a TPU
  system included)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return 1
  jobs = strategy.cluster_resolver.cluster_spec().as_dict()
  return max(1, len(jobs.get("chief", ())) + len(jobs.get("worker", ())))
