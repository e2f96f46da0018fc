"""RunOptions that the golden cases do not exercise: dropout sites, bfloat16,
initializers, bi_data batch rule."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
IDS = tf.constant(np.random.RandomState(0).randint(5, 50, (2, 6)), tf.int32)


def test_dropout_only_in_training():
  model = xt.XLNetModel(CONFIG, xt.RunOptions(dropout=0.3, dropatt=0.3))
  eval_1 = model(IDS)["sequence_output"].numpy()
  eval_2 = model(IDS, training=False)["sequence_output"].numpy()
  np.testing.assert_array_equal(eval_1, eval_2)
  train_1 = model(IDS, training=True)["sequence_output"].numpy()
  train_2 = model(IDS, training=True)["sequence_output"].numpy()
  assert not np.allclose(train_1, eval_1)
  assert not np.allclose(train_1, train_2)


def test_zero_dropout_training_equals_inference():
  model = xt.XLNetModel(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0))
  np.testing.assert_allclose(model(IDS, training=True)["sequence_output"],
                             model(IDS)["sequence_output"], atol=1e-6)


@pytest.mark.parametrize("precision,dtype,tolerance", [
    # Documented tolerances: bf16 keeps 8 bits of mantissa, fp16 11; the
    # LayerNorm outputs are O(1).
    pytest.param("use_bfloat16", tf.bfloat16, 0.1, marks=pytest.mark.bfloat16_compute),
    ("use_float16", tf.float16, 0.02),
])
def test_mixed_precision_close_to_float32(golden, precision, dtype, tolerance):
  case = golden("case_finetune")
  outputs = {}
  for mixed in (False, True):
    model = xt.XLNetClassifier(xt.XLNetModel(case.config,
                               case.options(**{precision: mixed})), n_class=3,
                               task_name="sts")
    xt.load_original_checkpoint(model, case.ckpt)
    hidden = model.encode({"input_ids": case["input_ids_bm"],
                           "segment_ids": case["seg_ids_bm"],
                           "input_mask": case["input_mask_bm"]})
    outputs[mixed] = hidden
    # Weights stay float32 whatever the compute dtype.
    assert all(w.dtype == tf.float32 for w in model.weights)
  assert outputs[True].dtype == dtype
  assert outputs[False].dtype == tf.float32
  diff = np.abs(tf.cast(outputs[True], tf.float32).numpy() - outputs[False])
  assert diff.max() < tolerance
  np.testing.assert_allclose(outputs[False], case["sequence_output_bm"],
                             atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("init,check", [
    ("normal", lambda w: 0.015 < w.std() < 0.025),
    ("uniform", lambda w: np.abs(w).max() <= 0.1 and w.std() > 0.05),
])
def test_initializers(init, check):
  model = xt.XLNetModel(CONFIG, xt.RunOptions(init=init))
  model.build(None)
  table = model.word_embedding.numpy()
  assert check(table)
  gamma = model.blocks[0].rel_attn.layer_norm.gamma.numpy()
  np.testing.assert_array_equal(gamma, 1.0)


def test_tied_and_untied_bias_shapes():
  for untie, shape in ((True, [2, 2, 8]), (False, [2, 8])):
    config = xt.XLNetConfig(**dict(CONFIG.to_dict(), untie_r=untie))
    model = xt.XLNetModel(config)
    model.build(None)
    assert model.r_w_bias.shape.as_list() == shape
    assert model.r_s_bias.shape.as_list() == shape
    assert model.seg_embed.shape.as_list() == [2, 2, 2, 8]


def test_bi_data_needs_even_batch():
  model = xt.XLNetModel(CONFIG, xt.RunOptions(bi_data=True))
  with pytest.raises(ValueError, match="bi_data needs an even batch.*3"):
    model(tf.zeros([3, 4], tf.int32))
