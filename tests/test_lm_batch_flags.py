"""The language model's batch flags (`tasks/language_model/batch_flags.py`,
defined by `run_batch_predict.py` through its spec): the options they give
an LM export's kind, the one-line refusals, and the layer and pooling
checks they share with `Embedder` and `run_embed.py` (`choices.py`)."""

import types

import pytest

from data_utils.errors import UsageError
from xlnet_tf.tasks.language_model import batch_flags
from xlnet_tf.tasks.language_model.choices import (SIGNATURE_POOLINGS,
                                                   layer_indices,
                                                   pooling_names)

META = {"n_layer": 2}


def _flags(**values):
  return types.SimpleNamespace(**dict(dict(
      job=None, layers=["-1"], pooling=["masked_mean"], tfrecord=False),
      **values))


def _refusal(call, *args):
  with pytest.raises(UsageError) as err:
    call(*args)
  return str(err.value)


def test_an_lm_export_takes_a_job_and_its_choices():
  assert batch_flags.options(_flags(job="score"), "language_model",
                             META) == {"job": "score"}
  got = batch_flags.options(_flags(job="embed", layers=["0", " -1"],
                                   pooling=["last", "mean", "last"],
                                   tfrecord=True), "language_model", META)
  assert got == {"job": "embed", "layers": [0, 2],
                 "poolings": ["last", "mean"], "piece_vectors": True}
  # Without --tfrecord the per-piece vectors have nowhere to go: the job's
  # outputs do not carry them.
  assert batch_flags.options(_flags(job="embed"), "language_model",
                             META)["piece_vectors"] is False


@pytest.mark.parametrize("values,message", [
    ({}, "--job: a language_model export needs --job=embed or --job=score"),
    ({"job": "score", "tfrecord": True}, "--tfrecord: only with --job=embed"),
    ({"job": "embed", "layers": ["0", "3"]},
     "--layers=0,3: layer 3: the model has layers 0 (embeddings) to 2 "
     "(-1 = 2)"),
    ({"job": "embed", "layers": ["x"]},
     "--layers=x: layer x: the model has layers 0 (embeddings) to 2 (-1 = 2)"),
    ({"job": "embed", "layers": []}, "--layers=: no layer chosen"),
    ({"job": "embed", "pooling": ["last", "attn"]},
     "--pooling=last,attn: unknown pooling 'attn'; use "
     + ", ".join(SIGNATURE_POOLINGS)),
])
def test_what_an_lm_export_refuses(values, message):
  assert _refusal(batch_flags.options, _flags(**values), "language_model",
                  META) == message


def test_another_kinds_export_refuses_the_lm_flags():
  assert _refusal(batch_flags.refuse, _flags(job="embed"), "classifier") == (
      "--job=embed: only for a language-model export (this is a classifier "
      "export)")
  assert _refusal(batch_flags.refuse, _flags(tfrecord=True),
                  "token_classifier") == "--tfrecord: only with --job=embed"
  batch_flags.refuse(_flags(), "classifier")  # the defaults pass


def test_the_layer_and_pooling_checks_have_one_home():
  """The batch flags' messages are the shared checks' own (the embedder
  and run_embed.py raise them too)."""
  with pytest.raises(ValueError) as err:
    layer_indices(["5"], 2)
  assert _refusal(batch_flags.options, _flags(job="embed", layers=["5"]),
                  "language_model", META) == f"--layers=5: {err.value}"
  assert layer_indices([-1, 0, "1"], 2) == (2, 0, 1)
  with pytest.raises(ValueError, match="^unknown pooling 'attn'; use last, "
                     "first, mean, masked_mean$"):
    pooling_names(["attn"], SIGNATURE_POOLINGS)
  assert pooling_names(["attn", "attn"]) == ("attn",)
