"""HuggingFace weights on tiny random models (xlnet_tf/io/hf*.py,
xlnet_tf/pretrained.py): models exported from here agree with
`transformers`, models saved by `transformers` (both GELU forms, bfloat16)
import and agree; what HF cannot represent is refused in one line.
Comparisons are batch-major, dropout off (eval).
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
from xlnet_tf import pretrained
from xlnet_tf.io import hf
from xlnet_tf.io.hf_config import config_from_hf
from xlnet_tf.tasks import TaskModel


def _t(x, dtype=torch.float32):
  return torch.tensor(np.asarray(x), dtype=dtype)


def _ids(x):
  return _t(x, torch.long)


def _export(model, tmp_path, name="hf"):
  out = str(tmp_path / name)
  pretrained.save_hf_weights(model, out)
  return out


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
  if isinstance(model, TaskModel):
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

  lm = xt.XLNetPretrainer(xt.XLNetModel(config, options))
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

  clf = xt.XLNetClassifier(xt.XLNetModel(config, options), n_class=3,
                           task_name="sst-2")
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

  reg = xt.XLNetRegressor(xt.XLNetModel(config, options), task_name="sts-b",
                          summary_type="mean", use_summ_proj=False)
  _randomize(reg, 4)
  out = _export(reg, tmp_path, "reg")
  theirs = transformers.XLNetForSequenceClassification.from_pretrained(out)
  assert theirs.config.problem_type == "regression"
  ours = reg({"input_ids": ids, "segment_ids": seg, "input_mask": mask})
  with torch.no_grad():
    assert_close(theirs.eval()(**hf_in).logits.numpy()[:, 0], ours["score"])
  again, report = pretrained.load_hf_model(out)
  assert isinstance(again, xt.XLNetRegressor) and report.missing == []
  assert (again.task_name, again.summary_type, again.use_summ_proj) == (
      "sts-b", "mean", False)

  lm = xt.XLNetPretrainer(xt.XLNetModel(config, options), tie_weight=False)
  _randomize(lm, 5)
  out = _export(lm, tmp_path, "lm")
  theirs = transformers.XLNetLMHeadModel.from_pretrained(out).eval()
  hidden = lm.encoder(ids, segment_ids=seg, input_mask=mask)["sequence_output"]
  with torch.no_grad():
    assert_close(theirs(**hf_in).logits.numpy(), lm.lm_head(hidden))
  again, report = pretrained.load_hf_model(out, strict=True)
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
    model, report = pretrained.load_hf_model(out, strict=True)
    assert report.unused == [] and report.missing == []
    cfg = model.config if name == "base" else model.encoder.config
    assert cfg.ff_activation == {"gelu": "gelu_exact",
                                 "gelu_new": "gelu"}[activation]
    with torch.no_grad():
      expected = theirs_fn(theirs(**hf_in)).numpy()
    assert_close(ours_fn(model), expected, name=name)

  # load_checkpoint (what --init_checkpoint uses) detects an HF directory.
  clf = xt.XLNetClassifier(xt.XLNetModel(cfg), n_class=3)
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
  model, report = pretrained.load_hf_model(out, strict=True)
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
  again, report = pretrained.load_hf_model(out, strict=True)
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
    config_from_hf(data)
  assert "\n" not in str(info.value)


def test_config_run_options_and_activation_mapping():
  spec = config_from_hf({
      "vocab_size": 50, "d_model": 16, "n_layer": 2, "n_head": 2,
      "d_inner": 32, "ff_activation": "gelu_new", "attn_type": "uni",
      "bi_data": True, "clamp_len": 7, "same_length": True, "mem_len": 4,
      "dropout": 0.2, "architectures": ["XLNetForQuestionAnswering"],
      "start_n_top": 2})
  assert spec.config.ff_activation == "gelu" and spec.config.d_head == 8
  opts = spec.options
  assert (opts.attn_type, opts.bi_data, opts.clamp_len, opts.same_length,
          opts.mem_len, opts.dropout) == ("uni", True, 7, True, 4, 0.2)
  assert spec.model == "squad" and spec.head["start_n_top"] == 2
  assert any("RunOptions(clamp_len=7)" in n for n in spec.notes)


def test_save_refusals(tmp_path):
  with pytest.raises(xt.CheckpointError, match="summary_type 'attn'"):
    pretrained.save_hf_weights(
        xt.XLNetClassifier(xt.XLNetModel(_config()), summary_type="attn"),
        str(tmp_path / "a"))
  with pytest.raises(xt.CheckpointError, match="d_head == d_model / n_head"):
    pretrained.save_hf_weights(xt.XLNetModel(_config(d_head=4)),
                               str(tmp_path / "b"))
  with pytest.raises(xt.CheckpointError, match="cannot be saved as"):
    pretrained.save_hf_weights(xt.XLNetModel(_config()), str(tmp_path / "c"),
                       architecture="XLNetLMHeadModel")
  assert not os.listdir(tmp_path)  # nothing half-written


def test_load_refusals_and_reports(tmp_path):
  out = _export(xt.XLNetForQuestionAnswering(xt.XLNetModel(_config())),
                tmp_path)
  with pytest.raises(xt.CheckpointError, match="d_inner 32 vs model 64"):
    hf.load_hf_weights(xt.XLNetModel(_config(d_inner=64)), out)
  # Across architectures: the QA heads are unused by a classifier, whose own
  # head is missing (and fresh), as with the original layout.
  clf = xt.XLNetClassifier(xt.XLNetModel(_config(ff_activation="relu")),
                           n_class=2)
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
  pretrained.save_hf_weights(xt.XLNetModel(_config()), str(out))
  pretrained.save_hf_weights(xt.XLNetModel(_config()), str(out))
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors",
                                     "spiece.model"]
  assert sorted(os.listdir(tmp_path)) == ["model"]


