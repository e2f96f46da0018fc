"""Checkpoint I/O: original layout by name, round trips, reports and errors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt


def _read_all(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n)
          for n in reader.get_variable_to_shape_map()}


def _tiny_config(**kw):
  base = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
              n_token=50)
  base.update(kw)
  return xt.XLNetConfig(**base)


def test_original_round_trip_gives_identical_tensors(golden, tmp_path):
  case = golden("case_finetune")
  model = xt.XLNetClassifier(xt.XLNetModel(case.config), n_class=3,
                             task_name="sts")
  xt.load_original_checkpoint(model, case.ckpt)
  prefix = xt.save_original_checkpoint(model,
                                       str(tmp_path / "rt" / "model.ckpt"))
  original, written = _read_all(case.ckpt), _read_all(prefix)
  assert set(written) == set(original) - {"model/regression_sts/logit/bias",
                                          "model/regression_sts/logit/kernel"}
  for name, value in written.items():
    np.testing.assert_array_equal(value, original[name], err_msg=name)
  # The directory's state file makes it loadable by directory too.
  again = xt.XLNetClassifier(xt.XLNetModel(case.config), n_class=3,
                             task_name="sts")
  report = xt.load_original_checkpoint(again, str(tmp_path / "rt"), strict=True)
  assert report.unused == [] and report.missing == []
  theirs = again.original_weights()
  for name, var in model.original_weights().items():
    np.testing.assert_array_equal(var.numpy(), theirs[name].numpy())
  # Nothing but the checkpoint files is left behind (no temp files).
  assert sorted(os.listdir(tmp_path / "rt")) == [
      "checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index"]


@pytest.mark.parametrize("make", [
    lambda c: xt.XLNetPretrainer(xt.XLNetModel(c), tie_weight=False),
    lambda c: xt.XLNetForQuestionAnswering(xt.XLNetModel(c)),
    lambda c: xt.XLNetForMultipleChoice(xt.XLNetModel(c), summary_type="attn"),
    lambda c: xt.XLNetRegressor(xt.XLNetModel(c), task_name="sts-b",
                               use_summ_proj=False),
    lambda c: xt.XLNetModel(c, xt.RunOptions(init="uniform")),
    lambda c: xt.SequenceSummary(c, "attn"),
])
def test_fresh_models_round_trip(make, tmp_path):
  config = _tiny_config(untie_r=False, ff_activation="relu")
  source, target = make(config), make(config)
  prefix = xt.save_original_checkpoint(source, str(tmp_path / "m.ckpt"))
  report = xt.load_original_checkpoint(target, prefix, strict=True)
  assert report.unused == [] and report.missing == []
  src, dst = source.original_weights(), target.original_weights()
  assert set(src) == set(dst)
  for name in src:
    np.testing.assert_array_equal(src[name].numpy(), dst[name].numpy(),
                                  err_msg=name)
  # Distinct weights really were drawn independently (no shared init values).
  kernels = [v.numpy() for n, v in src.items() if n.endswith("/kernel")
             and v.shape.rank == 3]
  if len(kernels) > 1:
    assert not np.array_equal(kernels[0], kernels[1])


def test_shape_mismatch_names_variable_and_shapes(golden):
  case = golden("case_finetune")
  config = xt.XLNetConfig(**dict(case.config.to_dict(), d_inner=48))
  with pytest.raises(xt.CheckpointError) as err:
    xt.load_original_checkpoint(xt.XLNetModel(config), case.ckpt)
  message = str(err.value)
  assert "model/transformer/layer_0/ff/layer_1/kernel" in message
  assert "checkpoint [32, 64] vs model [32, 48]" in message


def test_missing_variables_reported_and_strict_raises(golden):
  case = golden("case_finetune")
  model = xt.XLNetClassifier(xt.XLNetModel(case.config), n_class=3,
                             task_name="mnli")
  report = xt.load_original_checkpoint(model, case.ckpt)
  assert report.missing == ["model/classification_mnli/logit/bias",
                            "model/classification_mnli/logit/kernel"]
  assert "model/classification_sts/logit/kernel" in report.unused
  assert "2 missing in checkpoint" in report.summary()
  with pytest.raises(xt.CheckpointError,
                     match="strict load.*model/classification_mnli/logit/bias"):
    xt.load_original_checkpoint(model, case.ckpt, strict=True)


def test_encoder_alone_reports_mask_emb_missing_from_finetuned(golden):
  case = golden("case_finetune")
  report = xt.load_original_checkpoint(xt.XLNetModel(case.config), case.ckpt)
  assert report.missing == ["model/transformer/mask_emb/mask_emb"]


def test_directory_without_checkpoint(tmp_path):
  with pytest.raises(xt.CheckpointError, match="holds no checkpoint"):
    xt.load_original_checkpoint(xt.XLNetModel(_tiny_config()), str(tmp_path))


def test_prefix_that_does_not_exist(tmp_path):
  with pytest.raises(xt.CheckpointError, match=r"nothing\.ckpt: no checkpoint"):
    xt.load_original_checkpoint(xt.XLNetModel(_tiny_config()),
                                str(tmp_path / "nothing.ckpt"))


def test_optimizer_slots_are_skipped(tmp_path):
  config = _tiny_config()
  source = xt.XLNetModel(config)
  extra = {"global_step": np.int64(7),
           "model/transformer/r_w_bias/adam_m": np.zeros([2, 2, 8], np.float32),
           "model/transformer/r_w_bias/adam_v": np.zeros([2, 2, 8], np.float32)}
  prefix = xt.save_original_checkpoint(source, str(tmp_path / "m.ckpt"), extra)
  report = xt.load_original_checkpoint(xt.XLNetModel(config), prefix,
                                       strict=True)
  assert report.ignored == sorted(extra)
  assert report.unused == []


def test_native_checkpoint_round_trip_and_detection(golden, tmp_path):
  case = golden("case_race")
  model = xt.XLNetForMultipleChoice(xt.XLNetModel(case.config))
  xt.load_original_checkpoint(model, case.ckpt)
  prefix = xt.save_native_checkpoint(model, str(tmp_path / "native"))
  restored = xt.XLNetForMultipleChoice(xt.XLNetModel(case.config))
  assert xt.load_checkpoint(restored, prefix) is None  # native: no name report
  features = {"input_ids": case["feat_input_ids"],
              "segment_ids": case["feat_segment_ids"],
              "input_mask": case["feat_input_mask"]}
  np.testing.assert_array_equal(model(features)["logits"],
                                restored(features)["logits"])
  # And the original layout is detected as such.
  report = xt.load_checkpoint(
      xt.XLNetForMultipleChoice(xt.XLNetModel(case.config)), case.ckpt)
  assert report.missing == []


def _release_layout(config, template_names):
  """Original variable names/shapes of a pretrained release checkpoint, for
  `config`, generalized from a golden case's list (2 layers) to n_layer."""
  d, n, h, f = config.d_model, config.n_head, config.d_head, config.d_inner
  shapes = {
      "word_embedding/lookup_table": [config.n_token, d],
      "mask_emb/mask_emb": [1, 1, d],
      "r_w_bias": [config.n_layer, n, h], "r_r_bias": [config.n_layer, n, h],
      "r_s_bias": [config.n_layer, n, h],
      "seg_embed": [config.n_layer, 2, n, h],
      "rel_attn/q/kernel": [d, n, h], "rel_attn/k/kernel": [d, n, h],
      "rel_attn/v/kernel": [d, n, h], "rel_attn/r/kernel": [d, n, h],
      "rel_attn/o/kernel": [d, n, h],
      "rel_attn/LayerNorm/gamma": [d], "rel_attn/LayerNorm/beta": [d],
      "ff/layer_1/kernel": [d, f], "ff/layer_1/bias": [f],
      "ff/layer_2/kernel": [f, d], "ff/layer_2/bias": [d],
      "ff/LayerNorm/gamma": [d], "ff/LayerNorm/beta": [d],
  }
  layout = {"model/lm_loss/bias": [config.n_token], "global_step": []}
  for name in template_names:
    if name.startswith("model/transformer/layer_0/"):
      rest = name[len("model/transformer/layer_0/"):]
      for i in range(config.n_layer):
        layout[f"model/transformer/layer_{i}/{rest}"] = shapes[rest]
    elif name.startswith("model/transformer/") and "/layer_" not in name:
      layout[name] = shapes[name[len("model/transformer/"):]]
  return layout


def test_base_size_release_checkpoint_loads_with_nothing_missing(golden,
                                                                 tmp_path):
  with open(os.path.join(golden("case_pretrain").path, "variables.json")) as f:
    template = [name for name, _ in json.load(f)]
  config = xt.XLNetConfig(n_layer=12, d_model=768, n_head=12, d_head=64,
                          d_inner=3072, n_token=32000, ff_activation="gelu",
                          untie_r=True)
  layout = _release_layout(config, template)
  names = sorted(layout)
  marker = np.arange(768, dtype=np.float32)
  tensors = [tf.constant(marker) if n == "model/transformer/layer_11/ff/"
             "layer_2/bias" else tf.zeros(layout[n],
                                          tf.int64 if n == "global_step"
                                          else tf.float32) for n in names]
  prefix = str(tmp_path / "xlnet_model.ckpt")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=tensors)
  del tensors
  model = xt.XLNetModel(config)
  report = xt.load_original_checkpoint(model, prefix, strict=True)
  assert report.missing == []
  assert report.unused == ["model/lm_loss/bias"]
  assert len(report.loaded) == 6 + 12 * 13
  np.testing.assert_array_equal(model.blocks[11].ff.layer_2.bias.numpy(),
                                marker)
  pretrainer = xt.XLNetPretrainer(xt.XLNetModel(config))
  report = xt.load_original_checkpoint(pretrainer, prefix, strict=True)
  assert report.unused == [] and report.missing == []
