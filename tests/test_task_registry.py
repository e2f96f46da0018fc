"""The task registry is the one table of tasks: every spec builds its model,
the model's kind and HF architecture come back from it, the HF format's
decoding names only registered kinds, and an old kind name warns once."""

import warnings

import pytest

import xlnet_tf as xt
from xlnet_tf.io.hf_config import config_from_hf
from xlnet_tf.pretrained import build_model, hf_config, model_kinds, model_kind
from data_utils import deprecation
from xlnet_tf.tasks.registry import TASKS, task_spec

CONFIG = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
                        n_token=50)


@pytest.mark.parametrize("spec", TASKS, ids=[s.name for s in TASKS])
def test_each_spec_builds_its_model_and_names_it_back(spec):
  model = build_model(spec.name, CONFIG, n_class=3, task_name="t")
  assert type(model) is spec.model_class
  assert model_kind(model) == spec.name
  data = hf_config(model)
  assert data["architectures"] == [spec.hf_architecture]
  # The HF decoding gives back the same kind.
  assert config_from_hf(data).model == spec.name


def test_model_kinds_are_base_and_the_tasks():
  assert model_kinds() == ("base",) + tuple(s.name for s in TASKS)
  with pytest.raises(ValueError) as err:
    build_model("tagger", CONFIG)
  assert str(err.value) == ("unknown model 'tagger'; use one of "
                            + ", ".join(model_kinds()))


def test_an_old_kind_name_works_and_warns_once(monkeypatch):
  monkeypatch.setattr(deprecation, "_WARNED", set())  # as in a new process
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = task_spec("qa")
    second = task_spec("qa")
  assert first is second is task_spec("squad")
  assert [(w.category, str(w.message)) for w in caught] == [
      (DeprecationWarning, "model kind 'qa' is deprecated; use 'squad'")]
