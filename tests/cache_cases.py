"""What the cache tests share: a tiny model config, pretraining record
settings, an SST-2 file written on the fly and its classifier workflow, and
file bytes."""

import os

import xlnet_tf as xt
from data_utils.pretraining.examples import PretrainDataConfig
from xlnet_tf.training import TrainOptions
from xlnet_tf.tasks.classification.workflow import ClassifierOptions, ClassifierWorkflow

TINY = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
CFG = PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                         num_core_per_host=1, bi_data=True, num_predict=6,
                         perm_size=8)
LABELS = [k % 2 for k in range(20)]


def write_sst2(directory, labels):
  """A 20-row SST-2 train.tsv; returns its path."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "train.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n")
    for k, label in enumerate(labels):
      f.write(f"the film number {k} is {'fine' if label else 'dull'} .\t"
              f"{label}\n")
  return path


def classifier_workflow(tmp_path, data_dir, spiece, output_dir):
  return ClassifierWorkflow(ClassifierOptions(
      config=TINY, run=xt.RunOptions(),
      train=TrainOptions(model_dir=str(tmp_path / "model"), train_steps=1),
      task_name="sst-2", data_dir=str(data_dir), output_dir=str(output_dir),
      spiece_model_file=spiece, max_seq_length=16))


def file_bytes(path):
  with open(path, "rb") as f:
    return f.read()


def tree_bytes(directory):
  """{relative path: bytes} of every file under `directory`."""
  out = {}
  for base, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(base, name)
      out[os.path.relpath(path, directory)] = file_bytes(path)
  return out
