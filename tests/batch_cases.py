"""Helpers of tests/test_batch_predict.py: the scripts run beside each
other, slices of the shared data, a tiny LM with varied outputs."""

import subprocess
import sys

import numpy as np

import xlnet_tf as xt
from conftest import ROOT
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.classification.serving import export_classifier


def start_script(name, args):
  return subprocess.Popen([sys.executable, name, *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def finished(proc):
  out, err = proc.communicate(timeout=900)
  assert proc.returncode == 0, err[-3000:]
  return out


def line_slice(source, target, first, count, header=True):
  with open(source, encoding="utf-8") as f:
    lines = f.read().splitlines()
  kept = (lines[:1] if header else []) + lines[first:first + count]
  target.write_text("\n".join(kept) + "\n", encoding="utf-8")
  return str(target)


def conll_slice(source, target, count):
  with open(source, encoding="utf-8") as f:
    blocks = [b for b in f.read().split("\n\n") if b.strip()]
  target.write_text("\n\n".join(blocks[:count]) + "\n\n", encoding="utf-8")
  return str(target)


def varied_lm(config):
  """A tiny LM whose outputs vary with the input (weights far from the
  initializer's)."""
  lm = build_model("lm", config, xt.RunOptions(dropout=0.0, dropatt=0.0))
  lm.build()
  rng = np.random.RandomState(7)
  for var in lm.weights:
    value = rng.normal(0, 0.3, var.shape.as_list())
    if "LayerNorm/gamma" in var.name:
      value = 1 + 0.3 * value
    elif "LayerNorm/beta" in var.name:
      value = 0 * value
    var.assign(value.astype(np.float32))
  return lm


TINY_CLI = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=32000, ff_activation="gelu",
                          untie_r=True)
RTE_LABELS = ["entailment", "not_entailment"]


def tiny_classifier_export(path, spiece_model):
  """The tiny RTE classifier export of test_batch_predict_cli (untrained:
  its labels do not matter, its bytes and rows do); returns its path."""
  model = xt.XLNetClassifier(xt.XLNetModel(TINY_CLI, xt.RunOptions()),
                             n_class=2, task_name="rte")
  model.build(None)
  return export_classifier(model, str(path), 32, False, RTE_LABELS,
                           sp_model_path=spiece_model, text_signatures=False)
