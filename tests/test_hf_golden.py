"""HuggingFace interoperability on the golden checkpoints of the original
code (xlnet_tf/io/hf*.py, xlnet_tf/pretrained.py, xlnet_tf/convert.py).

They go through every format (original -> HF -> native -> HF -> original)
without changing a tensor, and run in `transformers` with the original's
outputs. Comparisons are batch-major, dropout off (eval).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from safetensors.numpy import load_file

import xlnet_tf as xt
from conftest import assert_close
from xlnet_tf import convert, pretrained

CASES = {
    "case_finetune": ["--task_name=sts", "--model=classification"],
    "case_squad": ["--model=squad"],
    "case_race": ["--model=multiple_choice"],
    "case_pretrain": ["--model=lm"],
}


def _read_ckpt(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _run(capsys, *argv):
  code = convert.main(list(argv))
  out, err = capsys.readouterr()
  return code, out, err


def _t(x, dtype=torch.float32):
  return torch.tensor(np.asarray(x), dtype=dtype)


def _ids(x):
  return _t(x, torch.long)


# ---------------------------------------------------------------------------
# Golden checkpoints: format round trips (acceptance) and the HF layout.


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_golden_round_trip_through_every_format(golden, case_name, tmp_path,
                                                capsys):
  case = golden(case_name)
  head = CASES[case_name]
  hf_dir, hf_dir2 = str(tmp_path / "hf"), str(tmp_path / "hf2")
  native = str(tmp_path / "native" / "model.ckpt")
  back = str(tmp_path / "back" / "model.ckpt")

  code, out, err = _run(capsys, f"--from={case.path}", f"--to={hf_dir}",
                        "--to_format=hf")
  assert code == 0, err
  assert "converted" in out and "wrote" in out
  code, out, err = _run(capsys, f"--from={hf_dir}", f"--to={native}",
                        "--to_format=native", *head)
  assert code == 0, err
  code, out, err = _run(capsys, f"--from={native}", f"--to={hf_dir2}",
                        "--to_format=hf", *head)
  assert code == 0, err
  code, out, err = _run(capsys, f"--from={hf_dir2}", f"--to={back}",
                        "--to_format=original", *head)
  assert code == 0, err

  original, written = _read_ckpt(case.ckpt), _read_ckpt(back)
  # The fine-tuning case holds a regression head beside the classifier: one
  # HF model has one head, so the classifier's conversion leaves it out.
  dropped = {n for n in original if n.startswith("model/regression_sts/")}
  expected = set(original) - dropped
  if case_name != "case_pretrain":
    # HF holds mask_emb in every architecture; fine-tuned originals do not.
    written.pop("model/transformer/mask_emb/mask_emb", None)
  assert set(written) == expected
  for name in sorted(expected):
    np.testing.assert_array_equal(written[name], original[name], err_msg=name)
  first, second = (load_file(os.path.join(d, "model.safetensors"))
                   for d in (hf_dir, hf_dir2))
  assert set(first) == set(second)
  for name in first:
    np.testing.assert_array_equal(first[name], second[name], err_msg=name)
  with open(os.path.join(tmp_path / "back", "xlnet_config.json")) as f:
    assert json.load(f) == case.config.to_dict()


def test_golden_hf_layout(golden, tmp_path, capsys):
  """The layout, tensor by tensor: what transposes and what splits."""
  case = golden("case_finetune")
  out = str(tmp_path / "hf")
  code, stdout, _ = _run(capsys, f"--from={case.ckpt}", f"--to={out}",
                         "--to_format=hf")
  assert code == 0
  assert "model/regression_sts/logit/kernel" in stdout  # reported skipped
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"]
  assert sorted(os.listdir(tmp_path)) == ["hf"]  # no temp directory left
  w = load_file(os.path.join(out, "model.safetensors"))
  o = _read_ckpt(case.ckpt)
  t = "transformer."
  s = "model/transformer"
  np.testing.assert_array_equal(w[t + "word_embedding.weight"],
                                o[f"{s}/word_embedding/lookup_table"])
  for i in range(2):
    for proj in "qkvor":  # [D, N, H] on both sides
      np.testing.assert_array_equal(w[f"{t}layer.{i}.rel_attn.{proj}"],
                                    o[f"{s}/layer_{i}/rel_attn/{proj}/kernel"])
    for bias in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
      np.testing.assert_array_equal(w[f"{t}layer.{i}.rel_attn.{bias}"],
                                    o[f"{s}/{bias}"][i])
    for layer in ("layer_1", "layer_2"):
      np.testing.assert_array_equal(w[f"{t}layer.{i}.ff.{layer}.weight"],
                                    o[f"{s}/layer_{i}/ff/{layer}/kernel"].T)
    np.testing.assert_array_equal(w[f"{t}layer.{i}.rel_attn.layer_norm.weight"],
                                  o[f"{s}/layer_{i}/rel_attn/LayerNorm/gamma"])
    np.testing.assert_array_equal(w[f"{t}layer.{i}.ff.layer_norm.bias"],
                                  o[f"{s}/layer_{i}/ff/LayerNorm/beta"])
  np.testing.assert_array_equal(w["logits_proj.weight"],
                                o["model/classification_sts/logit/kernel"].T)
  np.testing.assert_array_equal(w["sequence_summary.summary.weight"],
                                o["model/sequnece_summary/summary/kernel"].T)
  with open(os.path.join(out, "config.json")) as f:
    config = json.load(f)
  assert config["architectures"] == ["XLNetForSequenceClassification"]
  assert config["ff_activation"] == "gelu_new"  # the original's tanh GELU
  assert (config["vocab_size"], config["d_head"], len(config["id2label"]),
          config["finetuning_task"]) == (120, 8, 3, "sts")


# ---------------------------------------------------------------------------
# transformers runs the exported golden checkpoints with the original outputs.


def _export(model, tmp_path, name="hf"):
  out = str(tmp_path / name)
  pretrained.save_hf_weights(model, out)
  return out


def test_transformers_reproduces_golden_finetune(golden, tmp_path):
  case = golden("case_finetune")
  model = xt.XLNetClassifier(xt.XLNetModel(case.config, case.options()),
                             n_class=3, task_name="sts")
  xt.load_original_checkpoint(model, case.ckpt)
  out = _export(model, tmp_path)
  inputs = dict(input_ids=_ids(case["input_ids_bm"]),
                token_type_ids=_ids(case["seg_ids_bm"]),
                input_mask=_t(case["input_mask_bm"]))
  clf = transformers.XLNetForSequenceClassification.from_pretrained(out).eval()
  base = transformers.XLNetModel.from_pretrained(out).eval()
  with torch.no_grad():
    logits = clf(**inputs).logits.numpy()
    # attention_mask is the complement of input_mask (1 = keep).
    hidden = base(input_ids=inputs["input_ids"],
                  token_type_ids=inputs["token_type_ids"],
                  attention_mask=1 - inputs["input_mask"]).last_hidden_state
  assert_close(logits, case["cls_logits"])
  assert_close(hidden.numpy(), case["sequence_output_bm"])


def test_transformers_reproduces_golden_race(golden, tmp_path):
  case = golden("case_race")
  model = xt.XLNetForMultipleChoice(
      xt.XLNetModel(case.config, case.options()), n_choice=4)
  xt.load_original_checkpoint(model, case.ckpt)
  mc = transformers.XLNetForMultipleChoice.from_pretrained(
      _export(model, tmp_path)).eval()
  shape = (2, 4, 10)
  with torch.no_grad():
    logits = mc(input_ids=_ids(case["input_ids_bm"].reshape(shape)),
                token_type_ids=_ids(case["seg_ids_bm"].reshape(shape)),
                input_mask=_t(case["input_mask_bm"].reshape(shape))).logits
  assert_close(logits.numpy(), case["logits"])


def test_transformers_reproduces_golden_squad(golden, tmp_path):
  case = golden("case_squad")
  model = xt.XLNetForQuestionAnswering(
      xt.XLNetModel(case.config, case.options()), start_n_top=3, end_n_top=3)
  xt.load_original_checkpoint(model, case.ckpt)
  qa = transformers.XLNetForQuestionAnswering.from_pretrained(
      _export(model, tmp_path)).eval()
  with torch.no_grad():
    out = qa(input_ids=_ids(case["input_ids_bm"]),
             token_type_ids=_ids(case["seg_ids_bm"]),
             input_mask=_t(case["input_mask_bm"]), p_mask=_t(case["p_mask"]),
             cls_index=_ids(case["cls_index"]))
  # HF returns probabilities under the name log_probs, and orders the end
  # beam end-major ([B, E, S]) where the original is start-major.
  assert_close(out.start_top_log_probs.numpy(),
               np.exp(case["start_top_log_probs"]))
  np.testing.assert_array_equal(out.start_top_index.numpy(),
                                case["start_top_index"])
  def start_major(x):
    return x.reshape(4, 3, 3).transpose(0, 2, 1).reshape(4, 9)
  assert_close(start_major(out.end_top_log_probs.numpy()),
               np.exp(case["end_top_log_probs"]))
  np.testing.assert_array_equal(start_major(out.end_top_index.numpy()),
                                case["end_top_index"])
  assert_close(out.cls_logits.numpy(), case["cls_logits"])


def test_transformers_reproduces_golden_pretrain(golden, tmp_path):
  """Two streams, permutation mask, target mapping, memory, bi_data and
  clamp_len: the run options travel in config.json."""
  case = golden("case_pretrain")
  model = xt.XLNetPretrainer(xt.XLNetModel(case.config, case.options()))
  xt.load_original_checkpoint(model, case.ckpt)
  out = _export(model, tmp_path)
  with open(os.path.join(out, "config.json")) as f:
    config = json.load(f)
  assert (config["ff_activation"], config["bi_data"], config["clamp_len"],
          config["mem_len"]) == ("relu", True, 5, 6)
  lm = transformers.XLNetLMHeadModel.from_pretrained(out).eval()
  with torch.no_grad():
    logits = lm(input_ids=_ids(case["input_k_bm"]),
                token_type_ids=_ids(case["seg_id_bm"]),
                perm_mask=_t(case["perm_mask_bm"]),
                target_mapping=_t(case["target_mapping_bm"]),
                mems=[_t(m) for m in case["mems_in_tm"]]).logits  # time-major
  assert_close(logits.numpy(), case["lm_logits_bm"], atol=2e-5)


