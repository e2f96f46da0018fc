"""The XLNet tasks' side of the training loop's hooks (`XLNetTask`): the
model each builds on a fresh encoder, the layer of every variable (what
`freeze_layers` and layer-wise learning rates go by), loss scaling and
tokens per example."""

import pytest

import xlnet_tf as xt
from xlnet_tf.tasks import (ClassifierTask, MultipleChoiceTask, PretrainTask,
                            SquadTask)

CONFIG = xt.XLNetConfig(n_layer=3, d_model=8, n_head=2, d_head=4, d_inner=16,
                        n_token=20)
OPTIONS = xt.RunOptions(mem_len=2)


@pytest.mark.parametrize("task,cls,head", [
    (ClassifierTask(CONFIG, OPTIONS, 3, "MNLI", summary_type="first"),
     xt.XLNetClassifier, {"n_class": 3, "task_name": "MNLI",
                          "summary_type": "first", "use_summ_proj": True}),
    (ClassifierTask(CONFIG, OPTIONS, 1, "sts-b", regression=True,
                    use_summ_proj=False),
     xt.XLNetRegressor, {"task_name": "sts-b", "summary_type": "last",
                         "use_summ_proj": False}),
    (MultipleChoiceTask(CONFIG, OPTIONS, n_choice=3), xt.XLNetForMultipleChoice,
     {"n_choice": 3, "summary_type": "last", "use_summ_proj": True}),
    (SquadTask(CONFIG, OPTIONS, start_n_top=2, end_n_top=4),
     xt.XLNetForQuestionAnswering, {"start_n_top": 2, "end_n_top": 4}),
    (PretrainTask(CONFIG, OPTIONS, 16), xt.XLNetPretrainer,
     {"tie_weight": True}),
])
def test_build_model_injects_a_fresh_encoder(task, cls, head):
  model = task.build_model()
  assert type(model) is cls
  assert isinstance(model.encoder, xt.XLNetModel)
  assert (model.config, model.options) == (CONFIG, OPTIONS)
  assert {k: v for k, v in model.get_config().items()
          if k not in ("name", "network")} == head
  assert task.build_model().encoder is not model.encoder


def test_layer_of_every_variable():
  """Layers 0..n-1 by the block a variable sits in, -1 for the embeddings
  below them, None for the attention biases and heads."""
  task = ClassifierTask(CONFIG, OPTIONS, 2, "t")
  model = task.build_model()
  model.build(None)
  got = {v.name: task.layer_of(v) for v in model.trainable_variables}
  layers = {k: v for k, v in got.items() if v is not None and v >= 0}
  assert sorted(set(layers.values())) == [0, 1, 2]
  assert all(f"/layer_{v}/" in k for k, v in layers.items())
  assert sorted(k for k, v in got.items() if v == -1) == [
      "transformer/mask_emb/mask_emb:0",
      "transformer/word_embedding/lookup_table:0"]
  outside = sorted(k.split("/")[-1] for k, v in got.items() if v is None)
  assert {"r_w_bias:0", "r_r_bias:0", "r_s_bias:0", "seg_embed:0"} <= set(
      outside)
  assert any("logit" in k for k, v in got.items() if v is None)
  assert task.num_layers() == 3


def test_mask_embedding_is_below_layer_0():
  task = PretrainTask(CONFIG, OPTIONS, 16)
  model = task.build_model()
  model.build(None)
  assert task.layer_of(model.encoder.mask_emb) == -1
  assert task.layer_of(model.lm_head.bias) is None


def test_loss_scaling_tokens_and_state():
  assert not ClassifierTask(CONFIG, OPTIONS, 2, "t").loss_scaling()
  assert ClassifierTask(CONFIG, OPTIONS.replace(use_float16=True), 2,
                        "t").loss_scaling()
  assert MultipleChoiceTask(CONFIG, OPTIONS, 4,
                            seq_len=10).tokens_per_example() == 40
  assert SquadTask(CONFIG, OPTIONS, seq_len=12).tokens_per_example() == 12
  assert PretrainTask(CONFIG, OPTIONS, 16).state_shapes(5) == [(5, 2, 8)] * 3
  assert PretrainTask(CONFIG, xt.RunOptions(), 16).state_shapes(5) == []
  assert ClassifierTask(CONFIG, OPTIONS, 2, "t").export_kind == "classifier"
  assert ClassifierTask(CONFIG, OPTIONS, 1, "t",
                        regression=True).export_kind == "regressor"
  assert (MultipleChoiceTask(CONFIG, OPTIONS).export_kind,
          SquadTask(CONFIG, OPTIONS).export_kind) == ("multiple_choice",
                                                      "squad")
