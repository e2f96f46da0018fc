"""Inputs the input-validation tests share: a tiny config, workflow
options, and small classification / RACE / SQuAD data folders."""

import json
import os

import xlnet_tf as xt
from data_utils.pretraining.examples import PretrainDataConfig
from xlnet_tf.training import TrainOptions
from conftest import spiece_path

TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000)
PRETRAIN_CFG = PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                                  num_core_per_host=1, bi_data=True,
                                  num_predict=6, perm_size=8)
STSB_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
               "sentence1\tsentence2\tscore")
RTE_HEADER = "index\tsentence1\tsentence2\tlabel"


def workflow_options(cls, shared, tmp_path, **kw):
  values = dict(config=TINY, run=xt.RunOptions(),
                train=TrainOptions(model_dir=str(tmp_path / "model"),
                                   train_steps=1),
                task_name="sst-2", data_dir=str(tmp_path / "data"),
                output_dir=str(tmp_path / "proc"),
                spiece_model_file=spiece_path(shared))
  values.update(kw)
  return cls(**values)


def stsb_row(k, score):
  return (f"{k}\tmain-captions\tMSRvid\t2012test\t{k}\tnone\tnone\t"
          f"A man plays.\tA dog runs.\t{score}")


def rte_dir(directory, files=("train.tsv", "dev.tsv"), dev_rows=None):
  """An RTE folder with two rows per file (or `dev_rows` in dev.tsv)."""
  os.makedirs(directory, exist_ok=True)
  for name in files:
    rows = dev_rows if name == "dev.tsv" and dev_rows else [
        "0\tA man plays.\tA person plays.\tentailment",
        "1\tA dog runs.\tA cat sleeps.\tnot_entailment"]
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write("\n".join([RTE_HEADER] + rows) + "\n")
  return str(directory)


def race_passage(**overrides):
  data = {"article": "Tom went to school by bus.", "questions": ["How?"],
          "options": [["By bus.", "By car.", "On foot.", "By train."]],
          "answers": ["A"], "id": "middle1.txt"}
  data.update(overrides)
  return data


def race_dir(root, splits=("train", "dev"), levels=("middle", "high")):
  for split in splits:
    for level in levels:
      folder = os.path.join(root, split, level)
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, "1.txt"), "w", encoding="utf-8") as f:
        json.dump(race_passage(), f)
  return str(root)


def squad_file(path, qas, context="The cat sat on the mat."):
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}, f)
  return str(path)


def squad_qa(qid, text="cat", start=4):
  return {"id": qid, "question": "Who sat?",
          "answers": [{"text": text, "answer_start": start}]}
