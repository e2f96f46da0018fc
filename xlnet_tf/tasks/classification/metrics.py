"""Each task's official metric, on numpy arrays (scikit-learn / scipy).

  accuracy                    every classification task
  F1 (class 1) and accuracy   MRPC, QQP
  Matthews correlation        CoLA
  Pearson and Spearman        STS-B and any regression
The "main" value of each task picks the best checkpoint.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

MAIN_METRIC = {"cola": "mcc", "mrpc": "f1", "qqp": "f1",
               "sts-b": "pearson"}


def classification_metrics(task: str, labels: np.ndarray,
                           predictions: np.ndarray) -> Dict[str, float]:
  """`labels`, `predictions`: int class ids `[N]`.

  Example:
    >>> classification_metrics("mrpc", np.array([1, 0, 1, 1]),
    ...                        np.array([1, 1, 1, 0]))["f1"]
    0.6666666666666666
  """
  from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
  labels = np.asarray(labels)
  predictions = np.asarray(predictions)
  out = {"accuracy": float(accuracy_score(labels, predictions))}
  task = task.lower()
  if task in ("mrpc", "qqp"):
    out["f1"] = float(f1_score(labels, predictions, pos_label=1,
                               zero_division=0))
  if task == "cola":
    out["mcc"] = float(matthews_corrcoef(labels, predictions))
  out["main"] = out[MAIN_METRIC.get(task, "accuracy")]
  return out


def regression_metrics(labels: np.ndarray, scores: np.ndarray
                       ) -> Dict[str, float]:
  """Pearson and Spearman correlations (0 when a side is constant)."""
  from scipy import stats
  labels = np.asarray(labels, np.float64)
  scores = np.asarray(scores, np.float64)
  if np.std(labels) == 0 or np.std(scores) == 0:
    pearson = spearman = 0.0
  else:
    pearson = float(stats.pearsonr(labels, scores)[0])
    spearman = float(stats.spearmanr(labels, scores)[0])
  return {"pearson": pearson, "spearman": spearman,
          "mse": float(np.mean((labels - scores) ** 2)), "main": pearson}


def majority_class_accuracy(labels: np.ndarray) -> Optional[float]:
  """Accuracy of always predicting the most frequent of `labels` (int class
  ids `[N]`; the majority-class baseline), None for no label.

  Example:
    >>> majority_class_accuracy(np.array([0, 1, 1, 1]))
    0.75
  """
  labels = np.asarray(labels)
  if labels.size == 0:
    return None
  return float(np.bincount(labels).max() / labels.size)
