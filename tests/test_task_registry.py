"""The task registry is the one table of tasks: every spec builds its model,
the model's kind and HF architecture come back from it, the HF format's
decoding names only registered kinds, and the original's checkpoints are
told apart by the heads the specs name."""

import re

import pytest

import xlnet_tf as xt
from xlnet_tf import convert
from xlnet_tf.convert_args import ConvertArgs
from xlnet_tf.io.hf_config import config_from_hf
from xlnet_tf.io.hf_names import link_of
from xlnet_tf.pretrained import build_model, hf_config, model_kinds, model_kind
from xlnet_tf.tasks.batch import BatchKind
from xlnet_tf.tasks.registry import (TASKS, batch_specs, spec_of,
                                     specs_of_architecture, task_spec)

CONFIG = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
                        n_token=50)


@pytest.mark.parametrize("spec", TASKS, ids=[s.name for s in TASKS])
def test_each_spec_builds_its_model_and_names_it_back(spec):
  model = build_model(spec.name, CONFIG, n_class=3, task_name="t")
  assert type(model) is spec.model_class
  assert model_kind(model) == spec.name and spec_of(model) is spec
  data = hf_config(model)
  assert data["architectures"] == [spec.hf_architecture]
  assert spec in specs_of_architecture(spec.hf_architecture)
  # The HF decoding gives back the same kind.
  assert config_from_hf(data).model == spec.name


@pytest.mark.parametrize("spec", TASKS, ids=[s.name for s in TASKS])
def test_each_spec_names_every_head_weight_in_both_formats(spec):
  """Every weight of the head has an HF name by its spec's rules, and the
  original checkpoint's names of the head tell its kind back."""
  model = build_model(spec.name, CONFIG, n_class=3, task_name="t",
                      tie_weight=False)
  names = dict.fromkeys(model.original_weights(), [3])
  head = [n for n in names if not n.startswith("model/transformer/")]
  assert head
  for name in head:
    assert any(re.fullmatch(p, name) for p, _, _ in spec.hf_names), name
    assert link_of(name, CONFIG, "transformer.") is not None
  assert spec.original_head.format("t") in names
  args = ConvertArgs(source="s", target="t", to_format="hf")
  assert convert._detect_from_original(names, args)[0] == spec.name


def test_model_kinds_are_base_and_the_tasks():
  assert model_kinds() == ("base",) + tuple(s.name for s in TASKS)
  with pytest.raises(ValueError) as err:
    build_model("tagger", CONFIG)
  assert str(err.value) == ("unknown model 'tagger'; use one of "
                            + ", ".join(model_kinds()))


def test_older_kind_names_are_gone():
  for old in ("qa", "language_model"):
    with pytest.raises(ValueError, match=f"unknown model '{old}'"):
      task_spec(old)


def test_a_spec_is_not_a_model_of_another_kind():
  assert not task_spec("regression").is_class_of(
      build_model("classification", CONFIG))
  with pytest.raises(ValueError, match="XLNetModel is not a task model"):
    spec_of(xt.XLNetModel(CONFIG))


@pytest.mark.parametrize("spec", batch_specs(),
                         ids=[s.name for s in batch_specs()])
def test_a_batch_kind_is_named_by_its_spec(spec):
  """A kind built from its spec carries the export kind; the TFRecord
  refusal of the kinds that write none names it."""
  meta = {"signature": "serve_features", "max_seq_length": 16,
          "doc_stride": 8, "document_context": False}
  kind = spec.batch_kind(meta, {"job": "score"}, "sp.model")
  assert isinstance(kind, BatchKind) and kind.name == spec.export_kind
  if type(kind).example is BatchKind.example:
    with pytest.raises(NotImplementedError) as err:
      kind.example(("f", 1), {}, None, None)
    assert str(err.value) == f"a {spec.export_kind} export writes no TFRecords"
