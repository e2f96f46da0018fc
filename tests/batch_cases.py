"""Helpers of tests/test_batch_predict.py: the scripts run beside each
other, slices of the shared data, a tiny LM with varied outputs."""

import subprocess
import sys

import numpy as np

import xlnet_tf as xt
from conftest import ROOT
from xlnet_tf.pretrained import build_model


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
