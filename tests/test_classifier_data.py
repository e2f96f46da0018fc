"""Classification readers on the real GLUE / IMDB files, features, metrics."""

import csv
import os

import numpy as np
import pytest

from data_utils.classification import reader as cd
from data_utils.classification.features import example_features
from data_utils.tokenization import CLS_ID, SEP_ID, SentencePieceTokenizer
from xlnet_tf.tasks.classification import metrics
from conftest import spiece_path

# Record counts from ../shared/data/PROVENANCE.md (GLUE's official sizes).
COUNTS = {
    "cola": ("CoLA", 8551, 1043, 1063), "sst-2": ("SST-2", 67349, 872, None),
    "mrpc": ("MRPC", 3668, 408, 1725), "sts-b": ("STS-B", 5749, 1500, 1379),
    "rte": ("RTE", 2490, 277, 3000), "wnli": ("WNLI", 635, 71, 146),
}


def _label_counts_by_hand(path, column, header):
  """Labels counted with plain string splitting, independent of the reader."""
  counts = {}
  with open(path, encoding="utf-8-sig") as f:
    lines = [l.rstrip("\n") for l in f if l.strip()]
  for line in lines[1 if header else 0:]:
    label = line.split("\t")[column]
    counts[label] = counts.get(label, 0) + 1
  return counts


@pytest.mark.parametrize("task", sorted(COUNTS))
def test_glue_counts_and_labels(shared, task):
  folder, n_train, n_dev, n_test = COUNTS[task]
  data_dir = os.path.join(shared, "data", "glue", folder)
  spec = cd.GLUE_TASKS[task]
  for split, expected in (("train", n_train), ("dev", n_dev),
                          ("test", n_test)):
    if expected is None:
      with pytest.raises(cd.TaskDataError, match="test.tsv: no such data"):
        cd.read_examples(task, data_dir, split)
      continue
    examples = cd.read_examples(task, data_dir, split)
    assert len(examples) == expected, (task, split)
    if split == "test":
      assert all(e.label is None for e in examples)
      continue
    got = {}
    for e in examples:
      key = e.label if spec.labels is not None else "score"
      got[key] = got.get(key, 0) + 1
    if spec.labels is not None:
      assert got == _label_counts_by_hand(
          os.path.join(data_dir, f"{split}.tsv"), spec.label, spec.header)
    assert all((e.text_b is None) == (spec.text_b is None) for e in examples)


def test_specific_rows(shared):
  glue = os.path.join(shared, "data", "glue")
  mrpc = cd.read_examples("mrpc", os.path.join(glue, "MRPC"), "dev")
  assert mrpc[0].label == "1"
  assert mrpc[0].text_a.startswith("He said the foodservice pie business")
  assert mrpc[0].text_b.startswith('"The foodservice pie business')  # quote
  sts = cd.read_examples("sts-b", os.path.join(glue, "STS-B"), "dev")
  assert sts[0].label == 5.0 and isinstance(sts[0].label, float)
  cola = cd.read_examples("cola", os.path.join(glue, "CoLA"), "train")
  assert cola[0].text_a.startswith("Our friends won't buy this analysis")
  rte_test = cd.read_examples("rte", os.path.join(glue, "RTE"), "test")
  assert [e.guid for e in rte_test[:3]] == ["0", "1", "2"]


def test_imdb(shared):
  root = os.path.join(shared, "data", "imdb", "aclImdb")
  for split in ("train", "dev"):
    examples = cd.read_examples("imdb", root, split)
    assert len(examples) == 2500
    assert sum(e.label == "pos" for e in examples) == 1250
    assert not any("<br />" in e.text_a for e in examples)
  first = cd.read_examples("imdb", root, "train")[0]
  assert first.guid == "neg/0_3.txt" or first.guid.startswith("neg/")


def test_csv_task_layout(tmp_path):
  with open(tmp_path / "train.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["3", "Title here", 'Body with \\"quotes\\" and\\nbreak'])
    w.writerow(["1", "", "No title"])
  examples = cd.read_examples("ag_news", str(tmp_path), "train")
  assert [(e.label, e.text_a) for e in examples] == [
      ("3", 'Title here Body with "quotes" and break'), ("1", "No title")]
  with open(tmp_path / "test.csv", "w", newline="") as f:
    csv.writer(f).writerow(["9", "x", "y"])
  with pytest.raises(cd.TaskDataError, match=r"test.csv:1: label '9' not in"):
    cd.read_examples("ag_news", str(tmp_path), "dev")


def test_generic_and_errors(tmp_path):
  (tmp_path / "train.tsv").write_text("text\tlabel\ngood\tpos\nbad\tneg\n")
  spec = cd.GenericSpec(labels=["neg", "pos"])
  examples = cd.read_examples("generic", str(tmp_path), "train", spec)
  assert [(e.text_a, e.label) for e in examples] == [("good", "pos"),
                                                     ("bad", "neg")]
  (tmp_path / "dev.tsv").write_text("text\tlabel\nfine\tpos\nbroken\n")
  with pytest.raises(cd.TaskDataError,
                     match=r"dev.tsv:3: row has 1 column\(s\), label is "
                     r"column 1"):
    cd.read_examples("generic", str(tmp_path), "dev", spec)
  with pytest.raises(cd.TaskDataError, match="unknown task 'glue-x'; known:"):
    cd.read_examples("glue-x", str(tmp_path), "train")
  with pytest.raises(cd.TaskDataError, match=r"RTE/dev.tsv: no such data"):
    cd.read_examples("rte", str(tmp_path / "RTE"), "dev")


def _truncate_by_popping(a, b, budget):
  a, b = list(a), list(b)
  while len(a) + len(b) > budget:
    (a if len(a) > len(b) else b).pop()
  return a, b


def test_features_on_real_pairs(shared):
  tok = SentencePieceTokenizer(spiece_path(shared))
  mrpc = cd.read_examples("mrpc", os.path.join(shared, "data", "glue",
                                               "MRPC"), "train")
  for example in mrpc[:200]:
    for length in (24, 128):
      f = example_features(example, tok.encode_ids, length, ["0", "1"])
      ids, segs, mask = f["input_ids"], f["segment_ids"], f["input_mask"]
      assert len(ids) == len(segs) == len(mask) == length
      a, b = _truncate_by_popping(tok.encode_ids(example.text_a),
                                  tok.encode_ids(example.text_b), length - 3)
      real = a + [SEP_ID] + b + [SEP_ID, CLS_ID]
      pad = length - len(real)
      assert ids == [0] * pad + real
      assert segs == [4] * pad + [0] * (len(a) + 1) + [1] * (len(b) + 1) + [2]
      assert mask == [1.0] * pad + [0.0] * len(real)
      assert f["label"] == int(example.label)


def test_single_sentence_features(shared):
  tok = SentencePieceTokenizer(spiece_path(shared))
  sst = cd.read_examples("sst-2", os.path.join(shared, "data", "glue",
                                               "SST-2"), "dev")
  for example in sst[:100]:
    f = example_features(example, tok.encode_ids, 16, ["0", "1"])
    a = tok.encode_ids(example.text_a)[:14]
    pad = 16 - len(a) - 2
    assert f["input_ids"] == [0] * pad + a + [SEP_ID, CLS_ID]
    assert f["segment_ids"] == [4] * pad + [0] * (len(a) + 1) + [2]


def test_metrics_by_hand():
  labels = np.array([1, 0, 1, 1, 0, 0, 1, 0])
  preds = np.array([1, 1, 1, 0, 0, 0, 1, 1])
  tp, fp, fn, tn = 3, 2, 1, 2
  m = metrics.classification_metrics("cola", labels, preds)
  assert m["accuracy"] == (tp + tn) / 8
  mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) *
                                      (tn + fn))
  assert m["mcc"] == pytest.approx(mcc) and m["main"] == m["mcc"]
  f1 = 2 * tp / (2 * tp + fp + fn)
  assert metrics.classification_metrics("mrpc", labels, preds)["f1"] == \
      pytest.approx(f1)
  x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
  y = np.array([2.0, 1.0, 4.0, 3.0, 7.0])
  r = metrics.regression_metrics(x, y)
  dx, dy = x - x.mean(), y - y.mean()
  assert r["pearson"] == pytest.approx((dx * dy).sum() / np.sqrt(
      (dx ** 2).sum() * (dy ** 2).sum()))
  # ranks of y: [2, 1, 4, 3, 5]; Spearman = 1 - 6 sum d^2 / (n (n^2 - 1))
  assert r["spearman"] == pytest.approx(1 - 6 * 4 / (5 * 24))
  assert metrics.majority_class_accuracy(np.array([0, 1, 1, 1])) == 0.75
