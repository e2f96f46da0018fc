"""HuggingFace interoperability (xlnet_tf/hf.py, xlnet_tf/convert.py).

The golden checkpoints of the original code go through every format (original
-> HF -> native -> HF -> original) without changing a tensor, and run in
`transformers` with the original's outputs; tiny models exported from here
agree with `transformers`, and models saved by `transformers` (both GELU
forms) import and agree. Comparisons are batch-major, dropout off (eval).
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
from xlnet_tf import convert, hf

CASES = {
    "case_finetune": ["--task_name=sts", "--model=classification"],
    "case_squad": ["--model=qa"],
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
  w, o = load_file(os.path.join(out, "model.safetensors")), _read_ckpt(case.ckpt)
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
  hf.save_hf_weights(model, out)
  return out


def test_transformers_reproduces_golden_finetune(golden, tmp_path):
  case = golden("case_finetune")
  model = xt.XLNetClassifier(case.config, case.options(), n_class=3,
                             task_name="sts")
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
  model = xt.XLNetForMultipleChoice(case.config, case.options(), n_choice=4)
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
  model = xt.XLNetForQuestionAnswering(case.config, case.options(),
                                       start_n_top=3, end_n_top=3)
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
  model = xt.XLNetPretrainer(case.config, case.options())
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


# ---------------------------------------------------------------------------
# Tiny random models, both directions.


def _config(**kw):
  base = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
              n_token=50, ff_activation="gelu", untie_r=True)
  base.update(kw)
  return xt.XLNetConfig(**base)


def _randomize(model, seed):
  """Every weight random (LayerNorm gains around 1): a swapped or
  mis-transposed tensor cannot hide behind a zero or a one."""
  rng = np.random.RandomState(seed)
  for name, var in sorted(model.original_weights().items()):
    value = rng.normal(0, 0.3, var.shape.as_list())
    if name.endswith("gamma"):
      value += 1.0
    var.assign(value.astype(np.float32))
  if isinstance(model, xt.models.TaskModel):
    enc = model.encoder
    enc.mask_emb.assign(rng.normal(0, 0.3, enc.mask_emb.shape).astype("f4"))


def _features(seed, batch=3, length=9, n_token=50):
  """Left-padded `A <sep> B <sep> <cls>`-like rows with segment ids 0/1/2 and
  pad segment 4, as the classifier's features."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(10, n_token, size=(batch, length))
  seg = np.zeros((batch, length), np.int64)
  mask = np.zeros((batch, length), np.float32)
  for b, pad in enumerate(range(batch)):
    mask[b, :pad] = 1.0
    seg[b, :pad] = 4
    seg[b, pad + (length - pad) // 2:] = 1
    seg[b, -1] = 2
    ids[b, :pad] = 5
  return ids, seg, mask


def _two_stream(seed, batch=3, length=9, n_predict=3):
  rng = np.random.RandomState(seed)
  perm = (rng.rand(batch, length, length) > 0.5).astype(np.float32)
  mapping = np.zeros((batch, n_predict, length), np.float32)
  for b in range(batch):
    for p, pos in enumerate(rng.choice(length, n_predict, replace=False)):
      mapping[b, p, pos] = 1.0
  return perm, mapping


@pytest.mark.parametrize("activation,untie_r", [
    ("gelu", True), ("gelu_exact", False), ("relu", True)])
def test_exported_model_agrees_with_transformers(activation, untie_r,
                                                 tmp_path):
  config = _config(ff_activation=activation, untie_r=untie_r)
  options = xt.RunOptions(dropout=0.0, dropatt=0.0)
  ids, seg, mask = _features(1)
  hf_in = dict(input_ids=_ids(ids), token_type_ids=_ids(seg),
               attention_mask=_t(1 - mask))

  base = xt.XLNetModel(config, options)
  _randomize(base, 1)
  base_dir = _export(base, tmp_path, "base")
  with open(os.path.join(base_dir, "config.json")) as f:
    assert json.load(f)["ff_activation"] == {
        "gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu"}[activation]
  ours = base(ids, segment_ids=seg, input_mask=mask)["sequence_output"]
  theirs = transformers.XLNetModel.from_pretrained(base_dir).eval()
  with torch.no_grad():
    assert_close(theirs(**hf_in).last_hidden_state.numpy(), ours)

  lm = xt.XLNetPretrainer(config, options)
  _randomize(lm, 2)
  theirs = transformers.XLNetLMHeadModel.from_pretrained(
      _export(lm, tmp_path, "lm")).eval()
  hidden = lm.encoder(ids, segment_ids=seg, input_mask=mask)["sequence_output"]
  ours = lm.lm_head(hidden, embedding_table=lm.encoder.embedding_table)
  perm, mapping = _two_stream(3)
  ours_q = lm({"input_ids": ids, "segment_ids": seg, "input_mask": mask,
               "perm_mask": perm, "target_mapping": mapping,
               "input_q": mapping.sum(1), "target": np.zeros((3, 3), np.int32),
               "target_mask": np.ones((3, 3), np.float32)})["logits"]
  with torch.no_grad():
    assert_close(theirs(**hf_in).logits.numpy(), ours)
    two_stream = theirs(input_ids=_ids(ids), token_type_ids=_ids(seg),
                        input_mask=_t(mask), perm_mask=_t(perm),
                        target_mapping=_t(mapping)).logits
    assert_close(two_stream.numpy(), ours_q)

  clf = xt.XLNetClassifier(config, options, n_class=3, task_name="sst-2")
  _randomize(clf, 3)
  theirs = transformers.XLNetForSequenceClassification.from_pretrained(
      _export(clf, tmp_path, "clf")).eval()
  ours = clf({"input_ids": ids, "segment_ids": seg, "input_mask": mask})
  with torch.no_grad():
    assert_close(theirs(**hf_in).logits.numpy(), ours["logits"])


def test_exported_regressor_and_untied_lm_agree_with_transformers(tmp_path):
  config = _config()
  options = xt.RunOptions(dropout=0.0, dropatt=0.0)
  ids, seg, mask = _features(4)
  hf_in = dict(input_ids=_ids(ids), token_type_ids=_ids(seg),
               input_mask=_t(mask))

  reg = xt.XLNetRegressor(config, options, task_name="sts-b",
                          summary_type="mean", use_proj=False)
  _randomize(reg, 4)
  out = _export(reg, tmp_path, "reg")
  theirs = transformers.XLNetForSequenceClassification.from_pretrained(out)
  assert theirs.config.problem_type == "regression"
  ours = reg({"input_ids": ids, "segment_ids": seg, "input_mask": mask})
  with torch.no_grad():
    assert_close(theirs.eval()(**hf_in).logits.numpy()[:, 0], ours["score"])
  again, report = hf.load_hf_model(out)
  assert isinstance(again, xt.XLNetRegressor) and report.missing == []
  assert (again.task_name, again.summary_type, again.use_proj) == (
      "sts-b", "mean", False)

  lm = xt.XLNetPretrainer(config, options, tie_weight=False)
  _randomize(lm, 5)
  out = _export(lm, tmp_path, "lm")
  theirs = transformers.XLNetLMHeadModel.from_pretrained(out).eval()
  hidden = lm.encoder(ids, segment_ids=seg, input_mask=mask)["sequence_output"]
  with torch.no_grad():
    assert_close(theirs(**hf_in).logits.numpy(), lm.lm_head(hidden))
  again, report = hf.load_hf_model(out, strict=True)
  np.testing.assert_array_equal(again.lm_head.weight.numpy(),
                                lm.lm_head.weight.numpy())


def _hf_model(cls, config, seed, **kw):
  torch.manual_seed(seed)
  model = cls(config, **kw)
  with torch.no_grad():
    for name, param in sorted(model.named_parameters()):
      param.copy_(torch.randn(param.shape) * 0.3 +
                  (1.0 if name.endswith("layer_norm.weight") or
                   name.endswith("LayerNorm.weight") else 0.0))
  return model.eval()


@pytest.mark.parametrize("activation", ["gelu", "gelu_new"])
def test_model_saved_by_transformers_imports_and_agrees(activation, tmp_path):
  hf_config = transformers.XLNetConfig(
      vocab_size=50, d_model=16, n_layer=2, n_head=2, d_inner=32,
      ff_activation=activation, num_labels=3, dropout=0.1)
  ids, seg, mask = _features(6)
  hf_in = dict(input_ids=_ids(ids), token_type_ids=_ids(seg),
               attention_mask=_t(1 - mask))
  runs = [
      (transformers.XLNetModel, "base",
       lambda m: m(ids, segment_ids=seg, input_mask=mask)["sequence_output"],
       lambda out: out.last_hidden_state),
      (transformers.XLNetLMHeadModel, "lm",
       lambda m: m.lm_head(m.encoder(ids, segment_ids=seg, input_mask=mask)
                           ["sequence_output"],
                           embedding_table=m.encoder.embedding_table),
       lambda out: out.logits),
      (transformers.XLNetForSequenceClassification, "clf",
       lambda m: m({"input_ids": ids, "segment_ids": seg,
                    "input_mask": mask})["logits"],
       lambda out: out.logits),
  ]
  for seed, (cls, name, ours_fn, theirs_fn) in enumerate(runs):
    theirs = _hf_model(cls, hf_config, seed)
    out = str(tmp_path / name)
    theirs.save_pretrained(out)
    model, report = hf.load_hf_model(out, strict=True)
    assert report.unused == [] and report.missing == []
    cfg = model.config if name == "base" else model.encoder.config
    assert cfg.ff_activation == {"gelu": "gelu_exact",
                                 "gelu_new": "gelu"}[activation]
    with torch.no_grad():
      expected = theirs_fn(theirs(**hf_in)).numpy()
    assert_close(ours_fn(model), expected, name=name)

  # load_checkpoint (what --init_checkpoint uses) detects an HF directory.
  clf = xt.XLNetClassifier(cfg, n_class=3)
  report = xt.load_checkpoint(clf, str(tmp_path / "clf"))
  assert isinstance(report, hf.HFLoadReport) and report.missing == []
  assert_close(clf({"input_ids": ids, "segment_ids": seg,
                    "input_mask": mask})["logits"], expected)


def test_bfloat16_weights_import(tmp_path):
  config = transformers.XLNetConfig(vocab_size=50, d_model=16, n_layer=1,
                                    n_head=2, d_inner=32)
  theirs = _hf_model(transformers.XLNetModel, config, 7)
  out = str(tmp_path / "bf16")
  theirs.to(torch.bfloat16).save_pretrained(out)
  model, report = hf.load_hf_model(out, strict=True)
  np.testing.assert_array_equal(
      model.word_embedding.numpy(),
      theirs.word_embedding.weight.float().detach().numpy())


def test_untie_r_false_round_trip_and_shared_bias_check(tmp_path):
  config = _config(untie_r=False)
  model = xt.XLNetModel(config)
  _randomize(model, 8)
  out = _export(model, tmp_path)
  w = load_file(os.path.join(out, "model.safetensors"))
  for i in range(2):  # HF holds one copy per layer
    np.testing.assert_array_equal(w[f"layer.{i}.rel_attn.r_w_bias"],
                                  model.r_w_bias.numpy())
  again, report = hf.load_hf_model(out, strict=True)
  assert again.config.untie_r is False
  for name, var in model.original_weights().items():
    np.testing.assert_array_equal(again.original_weights()[name].numpy(),
                                  var.numpy(), err_msg=name)
  # Per-layer biases that differ cannot go into one shared bias.
  w["layer.1.rel_attn.r_w_bias"] = w["layer.1.rel_attn.r_w_bias"] + 1
  from safetensors.numpy import save_file
  save_file(w, os.path.join(out, "model.safetensors"),
            metadata={"format": "pt"})
  with pytest.raises(xt.CheckpointError, match="untie_r=true"):
    hf.load_hf_weights(xt.XLNetModel(config), out)


# ---------------------------------------------------------------------------
# What cannot be represented, and the CLI's errors.


@pytest.mark.parametrize("change,match", [
    ({"attn_type": "causal"}, "attn_type 'causal' cannot be represented"),
    ({"ff_activation": "silu"}, "ff_activation 'silu' cannot be represented"),
    ({"layer_norm_eps": 1e-5}, "layer_norm_eps 1e-05 cannot be represented"),
    ({"architectures": ["XLNetForSequenceClassification"],
      "summary_type": "attn"}, "summary_type 'attn' cannot be represented"),
    ({"architectures": ["XLNetForMultipleChoice"],
      "summary_activation": "relu"}, "summary_activation 'relu'"),
    ({"model_type": "bert"}, "not an XLNet"),
])
def test_config_refusals(change, match):
  data = {"vocab_size": 50, "d_model": 16, "n_layer": 2, "n_head": 2,
          "d_inner": 32}
  data.update(change)
  with pytest.raises(xt.ConfigError, match=match) as info:
    hf.config_from_hf(data)
  assert "\n" not in str(info.value)


def test_config_run_options_and_activation_mapping():
  spec = hf.config_from_hf({
      "vocab_size": 50, "d_model": 16, "n_layer": 2, "n_head": 2,
      "d_inner": 32, "ff_activation": "gelu_new", "attn_type": "uni",
      "bi_data": True, "clamp_len": 7, "same_length": True, "mem_len": 4,
      "dropout": 0.2, "architectures": ["XLNetForQuestionAnswering"],
      "start_n_top": 2})
  assert spec.config.ff_activation == "gelu" and spec.config.d_head == 8
  opts = spec.options
  assert (opts.attn_type, opts.bi_data, opts.clamp_len, opts.same_length,
          opts.mem_len, opts.dropout) == ("uni", True, 7, True, 4, 0.2)
  assert spec.model == "qa" and spec.head["start_n_top"] == 2
  assert any("RunOptions(clamp_len=7)" in n for n in spec.notes)


def test_save_refusals(tmp_path):
  with pytest.raises(xt.CheckpointError, match="summary_type 'attn'"):
    hf.save_hf_weights(xt.XLNetClassifier(_config(), summary_type="attn"),
                       str(tmp_path / "a"))
  with pytest.raises(xt.CheckpointError, match="d_head == d_model / n_head"):
    hf.save_hf_weights(xt.XLNetModel(_config(d_head=4)), str(tmp_path / "b"))
  with pytest.raises(xt.CheckpointError, match="cannot be saved as"):
    hf.save_hf_weights(xt.XLNetModel(_config()), str(tmp_path / "c"),
                       architecture="XLNetLMHeadModel")
  assert not os.listdir(tmp_path)  # nothing half-written


def test_load_refusals_and_reports(tmp_path):
  out = _export(xt.XLNetForQuestionAnswering(_config()), tmp_path)
  with pytest.raises(xt.CheckpointError, match="d_inner 32 vs model 64"):
    hf.load_hf_weights(xt.XLNetModel(_config(d_inner=64)), out)
  # Across architectures: the QA heads are unused by a classifier, whose own
  # head is missing (and fresh), as with the original layout.
  clf = xt.XLNetClassifier(_config(ff_activation="relu"), n_class=2)
  report = hf.load_hf_weights(clf, out)
  assert "start_logits.dense.weight" in report.unused
  assert "model/classification_task/logit/kernel" in report.missing
  assert any("ff_activation" in n for n in report.notes)
  with pytest.raises(xt.CheckpointError, match="strict load"):
    hf.load_hf_weights(clf, out, strict=True)
  os.remove(os.path.join(out, "model.safetensors"))
  open(os.path.join(out, "pytorch_model.bin"), "wb").close()
  with pytest.raises(xt.CheckpointError, match="safe_serialization"):
    xt.load_checkpoint(xt.XLNetModel(_config()), out)


def test_save_into_existing_directory_keeps_other_files(tmp_path):
  out = tmp_path / "model"
  out.mkdir()
  (out / "spiece.model").write_text("keep me")
  hf.save_hf_weights(xt.XLNetModel(_config()), str(out))
  hf.save_hf_weights(xt.XLNetModel(_config()), str(out))
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors",
                                     "spiece.model"]
  assert sorted(os.listdir(tmp_path)) == ["model"]


@pytest.mark.parametrize("argv,match", [
    (["--from=/nonexistent/x", "--to=/tmp/y", "--to_format=hf"],
     "no checkpoint there"),
    (["--from=/tmp", "--to=/tmp/y", "--to_format=json"], "invalid choice"),
    (["--to=/tmp/y", "--to_format=hf"], "required"),
])
def test_cli_errors_are_one_line_exit_2(argv, match, capsys):
  try:
    code = convert.main(argv)
  except SystemExit as e:  # usage errors leave through argparse
    code = e.code
  err = capsys.readouterr().err
  assert code == 2
  assert match in err and err.count("\n") == 1 and err.startswith("convert:")


def test_cli_native_source_needs_model(golden, tmp_path, capsys):
  case = golden("case_race")
  native = str(tmp_path / "n" / "model.ckpt")
  code, _, err = _run(capsys, f"--from={case.ckpt}", f"--to={native}",
                      "--to_format=native")
  assert code == 0, err
  code, _, err = _run(capsys, f"--from={native}", f"--to={tmp_path}/h",
                      "--to_format=hf")
  assert code == 2 and "pass --model" in err and err.count("\n") == 1
