"""HuggingFace `XLNetForTokenClassification` <-> this project's
`XLNetForTokenClassification` (xlnet_tf/io/hf_names.py, hf_config.py,
xlnet_tf/pretrained.py, the convert CLI) on tiny random models: exports agree
with transformers, transformers' saves import and agree, round trips keep
every weight and the label names; contradictory configs are refused in one
line. Comparisons are eval mode (no dropout), within 1e-5.
"""

import json
import os

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file

import xlnet_tf as xt
from conftest import assert_close
from data_utils.tokenization import (CLS_ID, PAD_ID, SEG_ID_A, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)
from test_hf import _config, _hf_model, _randomize, _t
from xlnet_tf import convert, pretrained
from xlnet_tf.io.hf_config import config_from_hf
from xlnet_tf.io.original import save_original_checkpoint
from xlnet_tf.tasks import XLNetForTokenClassification

TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
SCOPE = "model/token_classification_ner/logit"


def _windows(seed, batch=3, length=10, n_token=50):
  """NER windows as data_utils/ner/features.py lays them out: left padding
  (PAD_ID, SEG_ID_PAD, input_mask 1), pieces and <sep> in SEG_ID_A, <cls>
  last in SEG_ID_CLS. Row b has 2b padding positions."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(10, n_token, size=(batch, length))
  seg = np.full((batch, length), SEG_ID_A, np.int64)
  mask = np.zeros((batch, length), np.float32)
  for b in range(batch):
    pad = 2 * b
    ids[b, :pad], seg[b, :pad], mask[b, :pad] = PAD_ID, SEG_ID_PAD, 1.0
    ids[b, -2:] = SEP_ID, CLS_ID
    seg[b, -1] = SEG_ID_CLS
  return ids, seg, mask


def _theirs_logits(model, ids, seg, mask):
  """transformers' logits; its attention_mask is 1 on real tokens, our
  input_mask 1 on padding."""
  with torch.no_grad():
    return model(input_ids=_t(ids, torch.long), token_type_ids=_t(
        seg, torch.long), attention_mask=_t(1 - mask)).logits.numpy()


def _ours_logits(model, ids, seg, mask):
  return model({"input_ids": ids.astype(np.int32),
                "segment_ids": seg.astype(np.int32),
                "input_mask": mask})["logits"].numpy()


def _tagger(seed, task_name="NER", n_class=len(TAGS), **config):
  model = XLNetForTokenClassification(
      xt.XLNetModel(_config(**config), xt.RunOptions(dropout=0.1)),
      n_class=n_class, task_name=task_name)
  _randomize(model, seed)
  return model


def test_export_agrees_with_transformers(tmp_path):
  ours = _tagger(1)
  out = str(tmp_path / "hf")
  report = pretrained.save_hf_weights(ours, out, labels=TAGS)
  assert report.architecture == "XLNetForTokenClassification"
  with open(os.path.join(out, "config.json")) as f:
    data = json.load(f)
  assert data["architectures"] == ["XLNetForTokenClassification"]
  assert (data["num_labels"], data["finetuning_task"]) == (5, "NER")
  assert data["id2label"] == {str(i): t for i, t in enumerate(TAGS)}
  assert data["label2id"] == {t: i for i, t in enumerate(TAGS)}
  weights = load_file(os.path.join(out, "model.safetensors"))
  kernel = ours.logit.original_weights()[f"{SCOPE}/kernel"].numpy()
  np.testing.assert_array_equal(weights["classifier.weight"], kernel.T)
  assert weights["classifier.weight"].shape == (5, 16)

  theirs = transformers.XLNetForTokenClassification.from_pretrained(out)
  assert theirs.config.id2label == dict(enumerate(TAGS))
  ids, seg, mask = _windows(2)
  assert_close(_theirs_logits(theirs.eval(), ids, seg, mask),
               _ours_logits(ours, ids, seg, mask))


@pytest.mark.parametrize("config", [
    {}, {"untie_r": False, "ff_activation": "gelu_exact"}])
def test_round_trip_keeps_every_weight_and_the_labels(config, tmp_path):
  ours = _tagger(3, **config)
  out = str(tmp_path / "hf")
  pretrained.save_hf_weights(ours, out, labels=TAGS)
  again, report = pretrained.load_hf_model(out, strict=True)
  assert type(again) is XLNetForTokenClassification
  assert (again.n_class, again.task_name) == (5, "NER")
  assert report.spec.head["labels"] == TAGS
  assert report.missing == [] and report.unused == []
  want = ours.original_weights()
  got = again.original_weights()
  assert sorted(got) == sorted(want)
  assert f"{SCOPE}/kernel" in got
  for name, var in want.items():
    np.testing.assert_array_equal(got[name].numpy(), var.numpy(),
                                  err_msg=name)
  np.testing.assert_array_equal(again.encoder.mask_emb.numpy(),
                                ours.encoder.mask_emb.numpy())


@pytest.mark.parametrize("labels", [
    {"id2label": {0: "O", 1: "B-MISC", 2: "I-MISC"},
     "label2id": {"O": 0, "B-MISC": 1, "I-MISC": 2}},
    {"num_labels": 4}])
def test_model_saved_by_transformers_imports_and_agrees(labels, tmp_path):
  config = transformers.XLNetConfig(
      vocab_size=50, d_model=16, n_layer=2, n_head=2, d_inner=32,
      ff_activation="gelu_new", dropout=0.1, finetuning_task="conll2003",
      architectures=["XLNetForTokenClassification"], **labels)
  theirs = _hf_model(transformers.XLNetForTokenClassification, config, 4)
  out = str(tmp_path / "theirs")
  theirs.save_pretrained(out)
  ours, report = pretrained.load_hf_model(out, strict=True)
  assert report.missing == [] and report.unused == []
  assert pretrained.model_kind(ours) == "token_classification"
  names = [config.id2label[i] for i in range(config.num_labels)]
  assert (ours.n_class, ours.task_name) == (len(names), "conll2003")
  assert report.spec.head["labels"] == names
  assert ours.encoder.config.ff_activation == "gelu"
  ids, seg, mask = _windows(5)
  assert_close(_ours_logits(ours, ids, seg, mask),
               _theirs_logits(theirs, ids, seg, mask))

  # Saved back with the labels read: the same label maps as transformers'.
  back = str(tmp_path / "back")
  pretrained.save_hf_weights(ours, back, labels=report.spec.head["labels"])
  with open(os.path.join(out, "config.json")) as f:
    first = json.load(f)
  with open(os.path.join(back, "config.json")) as f:
    second = json.load(f)
  assert (second["id2label"], second["label2id"]) == (first["id2label"],
                                                      first["label2id"])
  mine, theirs_back = (load_file(os.path.join(d, "model.safetensors"))
                       for d in (back, out))
  assert sorted(mine) == sorted(theirs_back)
  for name, value in theirs_back.items():
    np.testing.assert_array_equal(mine[name], value, err_msg=name)


_BASE = {"vocab_size": 50, "d_model": 16, "n_layer": 2, "n_head": 2,
         "d_inner": 32, "architectures": ["XLNetForTokenClassification"]}


@pytest.mark.parametrize("change,message", [
    ({"num_labels": 5, "id2label": {"0": "O", "1": "B-X", "2": "I-X"}},
     "cfg.json: num_labels 5 does not match the 3 labels of id2label"),
    ({"id2label": {"0": "O", "2": "B-X"}}, "cfg.json: id2label ids are not 0..1"),
    ({"id2label": {"zero": "O"}},
     "cfg.json: id2label must map integer ids to label names"),
    ({"num_labels": 0}, "cfg.json: num_labels 0 is not a positive count"),
])
def test_contradictory_label_configs_are_refused(change, message):
  with pytest.raises(xt.ConfigError) as info:
    config_from_hf({**_BASE, **change}, "cfg.json")
  assert str(info.value) == message


def test_config_reads_kind_classes_and_labels():
  spec = config_from_hf({**_BASE, "id2label": {"1": "B-X", "0": "O"},
                         "finetuning_task": "ner"})
  assert spec.model == "token_classification"
  assert spec.head == {"n_class": 2, "labels": ["O", "B-X"],
                       "task_name": "ner"}
  # No id2label: HF's default of 2 classes (or num_labels), no names.
  assert config_from_hf(_BASE).head == {"n_class": 2}
  assert config_from_hf({**_BASE, "num_labels": 7}).head == {"n_class": 7}


def test_head_that_does_not_fit_its_config_is_refused(tmp_path):
  out = str(tmp_path / "hf")
  pretrained.save_hf_weights(_tagger(6, task_name="task", n_class=4), out)
  path = os.path.join(out, "config.json")
  with open(path) as f:
    data = json.load(f)
  data.update(num_labels=3, id2label={str(i): f"T{i}" for i in range(3)},
              label2id={f"T{i}": i for i in range(3)})
  with open(path, "w") as f:
    json.dump(data, f)
  with pytest.raises(xt.CheckpointError) as info:
    pretrained.load_hf_model(out)
  assert str(info.value) == (
      f"{out}: shape mismatch for model/token_classification_task/logit/"
      "bias: checkpoint [4] vs model [3]; model/token_classification_task/"
      "logit/kernel: checkpoint [16, 4] vs model [16, 3]")


@pytest.mark.parametrize("labels,message", [
    (TAGS[:3], "3 labels given for a head of 5 classes"),
    (["O", "O", "B-X", "I-X", "B-Y"], "repeated label names cannot be "
     "represented (HF's label2id maps each name to one id)"),
])
def test_save_refuses_labels_that_do_not_fit(labels, message, tmp_path):
  with pytest.raises(xt.CheckpointError) as info:
    pretrained.save_hf_weights(_tagger(7), str(tmp_path / "x"), labels=labels)
  assert str(info.value) == message
  qa = xt.XLNetForQuestionAnswering(xt.XLNetModel(_config()))
  with pytest.raises(xt.CheckpointError) as info:
    pretrained.save_hf_weights(qa, str(tmp_path / "y"), labels=TAGS)
  assert str(info.value) == ("labels given for a XLNetForQuestionAnswering, "
                             "which has no classes")
  assert not os.listdir(tmp_path)


def test_convert_cli_detects_the_token_head(tmp_path, capsys):
  ours = _tagger(8)
  prefix = save_original_checkpoint(ours, str(tmp_path / "orig" / "model.ckpt"))
  ours.config.to_json(str(tmp_path / "orig" / "xlnet_config.json"))
  hf_dir = str(tmp_path / "hf")
  assert convert.main([f"--from={prefix}", f"--to={hf_dir}",
                       "--to_format=hf"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[1] == ("model token_classification "
                      "(XLNetForTokenClassification): n_class=5, "
                      "task_name=ner")
  again, report = pretrained.load_hf_model(hf_dir)
  assert report.missing == [] and again.task_name == "ner"
  for name, var in ours.original_weights().items():
    np.testing.assert_array_equal(
        again.original_weights()[name].numpy(), var.numpy(), err_msg=name)
  # HF -> HF keeps the label names.
  named, copy = str(tmp_path / "named"), str(tmp_path / "copy")
  pretrained.save_hf_weights(ours, named, labels=TAGS)
  assert convert.main([f"--from={named}", f"--to={copy}",
                       "--to_format=hf"]) == 0
  with open(os.path.join(copy, "config.json")) as f:
    assert json.load(f)["id2label"] == {str(i): t for i, t in enumerate(TAGS)}
