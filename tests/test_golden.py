"""Every output of every case in ../shared/golden, through the public API,
within 1e-5 of what the original code computed, on the fast path and on the
reference path (`RunOptions.fast_kernels`)."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf import masks, positions
from xlnet_tf.tasks import classification_loss, regression_loss, squad_loss
from conftest import assert_close


@pytest.fixture(params=[True, False], ids=["fast", "reference"])
def fast(request):
  """`RunOptions.fast_kernels` of the model under test."""
  return request.param


def _encoder(case, fast, **overrides):
  """The case's encoder on the fast or the reference path."""
  return xt.XLNetModel(case.config,
                       case.options(fast_kernels=fast, **overrides))


def _finetune_features(case):
  return {"input_ids": case["input_ids_bm"],
          "segment_ids": case["seg_ids_bm"],
          "input_mask": case["input_mask_bm"]}


def test_finetune_classification(golden, fast):
  case = golden("case_finetune")
  model = xt.XLNetClassifier(_encoder(case, fast), n_class=3,
                             task_name="sts")
  report = xt.load_original_checkpoint(model, case.ckpt, strict=True)
  assert report.missing == []
  assert report.unused == ["model/regression_sts/logit/bias",
                           "model/regression_sts/logit/kernel"]
  out = model(_finetune_features(case))
  assert_close(out["logits"], case["cls_logits"])
  loss = classification_loss(out["logits"], case["cls_label_ids"])
  assert_close(loss, case["cls_per_example_loss"])
  assert_close(tf.reduce_mean(loss), case["cls_total_loss"])
  hidden = model.encode(_finetune_features(case))
  assert_close(hidden, case["sequence_output_bm"])
  assert_close(model.summary(hidden), case["pooled_last"])


def test_finetune_regression(golden, fast):
  case = golden("case_finetune")
  model = xt.XLNetRegressor(_encoder(case, fast), task_name="sts")
  xt.load_original_checkpoint(model, case.ckpt, strict=True)
  score = model(_finetune_features(case))["score"]
  assert_close(score, case["reg_logits"])
  loss = regression_loss(score, case["reg_label_ids"])
  assert_close(loss, case["reg_per_example_loss"])
  assert_close(tf.reduce_mean(loss), case["reg_total_loss"])


def test_finetune_memory_is_each_layers_input(golden, fast):
  case = golden("case_finetune")
  model = _encoder(case, fast, mem_len=6)
  xt.load_original_checkpoint(model, case.ckpt)
  out = model(case["input_ids_bm"], segment_ids=case["seg_ids_bm"],
              input_mask=case["input_mask_bm"])
  assert len(out["new_mems"]) == 2
  for layer, mem in enumerate(out["new_mems"]):
    assert_close(mem, case["mem6_new_mems_bm"][layer], name=f"layer {layer}")
  assert_close(out["sequence_output"], case["sequence_output_bm"])


def test_finetune_without_mem_len_has_no_memory(golden, fast):
  case = golden("case_finetune")
  model = _encoder(case, fast)
  out = model(case["input_ids_bm"], segment_ids=case["seg_ids_bm"])
  assert out["new_mems"] is None


def test_finetune_intermediates(golden):
  """Positional encoding, masks and segment matrix equal the original's."""
  case = golden("case_finetune")
  qlen = case["input_ids_bm"].shape[1]
  pos = positions.relative_positional_encoding(qlen, qlen, 32, "bi")
  assert_close(np.broadcast_to(pos, case["dbg_pos_emb_bm"].shape),
               case["dbg_pos_emb_bm"])
  content, _ = masks.attention_masks(qlen, 0, "bi",
                                     input_mask=case["input_mask_bm"])
  assert_close(np.broadcast_to(content, case["dbg_attn_mask_h_bm"].shape),
               case["dbg_attn_mask_h_bm"], atol=0)
  assert_close(masks.segment_matrix(case["seg_ids_bm"], 0),
               case["dbg_seg_mat_bm"], atol=0)


def test_squad_inference(golden, fast):
  case = golden("case_squad")
  model = xt.XLNetForQuestionAnswering(_encoder(case, fast),
                                       start_n_top=3, end_n_top=3)
  report = xt.load_original_checkpoint(model, case.ckpt, strict=True)
  assert report.unused == []
  features = {"input_ids": case["input_ids_bm"],
              "segment_ids": case["seg_ids_bm"],
              "input_mask": case["input_mask_bm"],
              "p_mask": case["p_mask"], "cls_index": case["cls_index"]}
  out = model(features)
  assert_close(model.encode(features), case["sequence_output_bm"])
  for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
    assert_close(out[key], case[key], name=key)
  for key in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(out[key], case[key], err_msg=key)
  # Masked entries are ~ -1e30: compare those only as "below -1e29".
  for key in ("start_log_probs", "end_log_probs"):
    got, want = out[key].numpy(), case[key]
    masked = want < -1e29
    np.testing.assert_array_equal(got < -1e29, masked, err_msg=key)
    assert_close(got[~masked], want[~masked], name=key)


def test_squad_training_path(golden, fast):
  case = golden("case_squad")
  model = xt.XLNetForQuestionAnswering(
      _encoder(case, fast, dropout=0.0, dropatt=0.0), start_n_top=3,
      end_n_top=3)
  xt.load_original_checkpoint(model, case.ckpt, strict=True)
  features = {"input_ids": case["input_ids_bm"],
              "segment_ids": case["seg_ids_bm"],
              "input_mask": case["input_mask_bm"],
              "p_mask": case["p_mask"], "cls_index": case["cls_index"],
              "start_positions": case["start_positions"]}
  out = model(features, training=True)
  assert_close(out["cls_logits"], case["train_cls_logits"])
  for key in ("start_log_probs", "end_log_probs"):
    got, want = out[key].numpy(), case["train_" + key]
    masked = want < -1e29
    np.testing.assert_array_equal(got < -1e29, masked, err_msg=key)
    assert_close(got[~masked], want[~masked], name=key)
  # The original's loss, recomputed by hand from the golden log-probs, with
  # end positions at each row's most likely (so unmasked) end.
  end_positions = case["train_end_log_probs"].argmax(axis=1)
  is_impossible = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
  rows = np.arange(4)
  logits = case["train_cls_logits"].astype(np.float64)
  bce = np.maximum(logits, 0) - logits * is_impossible + np.log1p(
      np.exp(-np.abs(logits)))
  expected = 0.5 * (
      -case["train_start_log_probs"][rows, case["start_positions"]].mean()
      - case["train_end_log_probs"][rows, end_positions].mean()
  ) + 0.5 * bce.mean()
  assert np.isfinite(expected) and expected < 1e3
  got = squad_loss(out, case["start_positions"], end_positions, is_impossible)
  assert_close(got, expected)


def test_race(golden, fast):
  case = golden("case_race")
  model = xt.XLNetForMultipleChoice(_encoder(case, fast), n_choice=4)
  report = xt.load_original_checkpoint(model, case.ckpt, strict=True)
  assert report.unused == []
  features = {"input_ids": case["feat_input_ids"],
              "segment_ids": case["feat_segment_ids"],
              "input_mask": case["feat_input_mask"]}
  out = model(features)
  assert_close(out["logits"], case["logits"])
  loss = classification_loss(out["logits"], case["label_ids"])
  assert_close(loss, case["per_example_loss"])
  assert_close(tf.reduce_mean(loss), case["total_loss"])
  # [B, C, L] features give the same logits as the original's [B, C * L].
  shaped = {k: v.reshape(2, 4, 10) for k, v in features.items()}
  assert_close(model(shaped)["logits"], case["logits"])
  hidden = model.encoder(case["input_ids_bm"], segment_ids=case["seg_ids_bm"],
                         input_mask=case["input_mask_bm"])["sequence_output"]
  assert_close(hidden, case["sequence_output_bm"])
  assert_close(model.summary(hidden), case["pooled_last"])


def _pretrain_features(case):
  return {"input_ids": case["input_k_bm"], "segment_ids": case["seg_id_bm"],
          "perm_mask": case["perm_mask_bm"],
          "target_mapping": case["target_mapping_bm"],
          "input_q": case["input_q_bm"], "target": case["target_bm"],
          "target_mask": case["target_mask_bm"]}


def test_pretrain_two_stream(golden, fast):
  case = golden("case_pretrain")
  assert case.run["bi_data"] and case.run["clamp_len"] == 5
  model = xt.XLNetPretrainer(_encoder(case, fast))
  report = xt.load_original_checkpoint(model, case.ckpt, strict=True)
  assert report.unused == []
  mems = [tf.constant(m) for m in case["mems_in_bm"]]
  out = model(_pretrain_features(case), mems=mems)
  assert_close(out["logits"], case["lm_logits_bm"])
  assert_close(out["per_target_loss"], case["lm_loss_bm"])
  assert_close(out["loss"], case["total_loss"])
  for layer, mem in enumerate(out["new_mems"]):
    assert_close(mem, case["new_mems_bm"][layer], name=f"layer {layer}")
  encoded = model.encoder(
      case["input_k_bm"], segment_ids=case["seg_id_bm"], mems=mems,
      perm_mask=case["perm_mask_bm"],
      target_mapping=case["target_mapping_bm"], input_q=case["input_q_bm"])
  assert_close(encoded["sequence_output"], case["output_g_bm"])


def test_pretrain_intermediates(golden):
  case = golden("case_pretrain")
  qlen, mlen = 12, 6
  pos = positions.relative_positional_encoding(
      qlen, qlen + mlen, 32, "bi", clamp_len=5, bi_data=True, batch_size=4)
  assert_close(pos, case["dbg_pos_emb_bm"])
  content, query = masks.attention_masks(qlen, mlen, "bi",
                                         perm_mask=case["perm_mask_bm"])
  assert_close(content, case["dbg_attn_mask_h_bm"], atol=0)
  assert_close(query, case["dbg_attn_mask_g_bm"], atol=0)
  assert_close(masks.segment_matrix(case["seg_id_bm"], mlen),
               case["dbg_seg_mat_bm"], atol=0)
