"""The language model's SavedModel (xlnet_tf/tasks/lm_serving.py): the
loaded export answers what `decode` answers in Python on the same prompts
(built here by the Python tokenizer, the end of a long one kept, left-padded):
greedy, and sampled with a fixed seed, with a stop token that ends one text
early; its text is `continuation_text` of the prompt and the new tokens; an
empty prompt is an error. `embed_text` gives the encoder's states on the
window layout of `window_features`. Bad arguments are refused before
anything is written."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the export uses)

import xlnet_tf as xt
from conftest import assert_close, spiece_path, tree_digest
from data_utils.errors import UsageError, UserError
from data_utils.lm.embedding_files import window_features
from data_utils.tokenization import PAD_ID
from xlnet_tf.export.directory import EXPORT_MARKER
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks.language_model.generation import decode
from xlnet_tf.tasks.language_model.generation_search import continuation_text
from xlnet_tf.tasks.language_model.serving import (EXPORT_KIND, GENERATION_OUTPUTS,
                                       export_language_model, prompt_features)

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                        d_inner=32, n_token=32000, ff_activation="gelu")
LENGTH, NEW = 8, 6  # the prompt window (pieces) and tokens generated
PROMPTS = ["The quick brown fox", "a",
           "In 1,234 cases, Zürich's  lake was \u00a0frozen over again.",
           "Once upon a time there lived a king"]
SAMPLING = dict(temperature=0.7, top_k=40, top_p=0.9)
SEED = [11, 3]


@pytest.fixture(scope="module")
def lm():
  model = build_model("lm", CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0))
  model.build()
  # Weights far from the initializer's, so that greedy choices vary with
  # the input: unit-direction embeddings (no token wins by its norm), no
  # LM bias and LayerNorms near the identity (no constant direction).
  rng = np.random.RandomState(20)
  for var in model.weights:
    value = rng.normal(0, 0.3, var.shape.as_list())
    if "word_embedding" in var.name:
      value *= 3 / np.linalg.norm(value, axis=-1, keepdims=True)
    elif "LayerNorm/gamma" in var.name:
      value = 1 + 0.3 * value
    elif "LayerNorm/beta" in var.name or var.name.startswith("lm_loss/"):
      value = 0 * value
    var.assign(value.astype(np.float32))
  return model


@pytest.fixture(scope="module")
def prompts(sp_tokenizer):
  """The prompts as `decode` takes them, built here without the graph:
  the last LENGTH ids, left-padded with PAD_ID."""
  ids = np.full([len(PROMPTS), LENGTH], PAD_ID, np.int32)
  mask = np.ones([len(PROMPTS), LENGTH], np.float32)
  for row, text in enumerate(PROMPTS):
    pieces = sp_tokenizer.encode_ids(text)[-LENGTH:]
    ids[row, LENGTH - len(pieces):] = pieces
    mask[row, LENGTH - len(pieces):] = 0.0
  return tf.constant(ids), tf.constant(mask)


@pytest.fixture(scope="module")
def stop(lm, prompts):
  """Greedy decoding without a stop id (`tokens`), and a token it emits for
  the first time at `step` of `row`: as a stop id it ends that row there."""
  tokens = decode(lm, *prompts, NEW)["tokens"].numpy()
  for step in range(1, NEW - 1):
    for row in range(len(PROMPTS)):
      if tokens[row, step] not in tokens[row, :step]:
        return {"tokens": tokens, "row": row, "step": step,
                "token": int(tokens[row, step])}
  raise AssertionError(f"no token to stop at in {tokens.tolist()}")


@pytest.fixture(scope="module")
def exported(shared, lm, stop, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("lm") / "saved_model")
  assert export_language_model(lm, spiece_path(shared), path, LENGTH, NEW,
                               stop_ids=[stop["token"]]) == path
  return path, tf.saved_model.load(path)


def _check_generation(got, want, sp_tokenizer):
  assert sorted(got) == sorted(GENERATION_OUTPUTS)
  tokens, lengths = want["tokens"].numpy(), want["lengths"].numpy()
  np.testing.assert_array_equal(got["tokens"].numpy(), tokens)
  np.testing.assert_array_equal(got["lengths"].numpy(), lengths)
  assert_close(got["log_probs"], want["log_probs"], atol=1e-5, rtol=0)
  kept = [sp_tokenizer.encode_ids(t)[-LENGTH:] for t in PROMPTS]
  assert [t.decode() for t in got["text"].numpy()] == [
      continuation_text(sp_tokenizer, prompt, row[:n])
      for prompt, row, n in zip(kept, tokens, lengths)]
  assert got["prompt_lengths"].numpy().tolist() == [
      min(len(sp_tokenizer.encode_ids(t)), LENGTH) for t in PROMPTS]


def test_greedy_equals_python_decode(exported, lm, prompts, stop,
                                     sp_tokenizer):
  want = decode(lm, *prompts, NEW, stop_ids=[stop["token"]])
  got = exported[1].signatures["generate_greedy"](text=tf.constant(PROMPTS))
  _check_generation(got, want, sp_tokenizer)
  # The stop id ended its row there (itself included), padding after it.
  row, n = stop["row"], stop["step"] + 1
  assert want["lengths"].numpy()[row] == n
  assert want["tokens"].numpy()[row, n - 1] == stop["token"]
  assert want["tokens"].numpy()[row, n:].tolist() == [PAD_ID] * (NEW - n)


def test_sampling_with_a_seed_equals_python_decode(exported, lm, prompts,
                                                   stop, sp_tokenizer):
  want = decode(lm, *prompts, NEW, greedy=False, seed=tf.constant(SEED),
                stop_ids=[stop["token"]],
                **{k: tf.constant(v) for k, v in SAMPLING.items()})
  got = exported[1].signatures["generate_sample"](
      text=tf.constant(PROMPTS), seed=tf.constant(SEED),
      temperature=tf.constant(SAMPLING["temperature"]),
      top_k=tf.constant(SAMPLING["top_k"]),
      top_p=tf.constant(SAMPLING["top_p"]))
  _check_generation(got, want, sp_tokenizer)
  # It did sample: the first tokens are not all greedy's.
  assert (want["tokens"].numpy()[:, 0] != stop["tokens"][:, 0]).any()


def test_a_prompt_without_tokens_is_an_error(exported):
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text: a prompt without tokens"):
    exported[1].signatures["generate_greedy"](text=tf.constant(["a", " "]))


def test_embed_text_is_the_encoder_on_the_window_layout(exported, lm,
                                                       sp_tokenizer):
  texts = ["The quick brown fox", "a", ""]  # one window each
  got = exported[1].signatures["embed_text"](text=tf.constant(texts))
  features = window_features([sp_tokenizer.encode_ids(t) for t in texts],
                             LENGTH)
  np.testing.assert_array_equal(got["input_ids"].numpy(),
                                features["input_ids"])
  np.testing.assert_array_equal(got["input_mask"].numpy(),
                                features["input_mask"])
  states = lm.encoder(**features)["sequence_output"].numpy()
  assert_close(got["sequence_output"], states, atol=1e-5, rtol=0)
  real = 1.0 - features["input_mask"][:, :, None]
  assert_close(got["masked_mean"], (states * real).sum(1) / real.sum(1),
               atol=1e-5, rtol=0)


def test_marker(exported):
  with open(os.path.join(exported[0], EXPORT_MARKER), encoding="utf-8") as f:
    marker = json.load(f)
  assert marker["kind"] == EXPORT_KIND == "language_model"
  assert marker["signatures"] == ["embed_ids", "embed_text",
                                  "generate_greedy", "generate_sample",
                                  "score_ids"]


def test_prompt_features_keep_the_end_left_padded():
  ids = tf.ragged.constant([[21, 22, 23, 24, 25], [31], [], [41, 42, 43]])
  prompt_ids, mask, kept = prompt_features(ids, 3)
  assert prompt_ids.numpy().tolist() == [[23, 24, 25], [PAD_ID, PAD_ID, 31],
                                         [PAD_ID] * 3, [41, 42, 43]]
  assert mask.numpy().tolist() == [[0, 0, 0], [1, 1, 0], [1, 1, 1],
                                   [0, 0, 0]]
  assert kept.numpy().tolist() == [3, 1, 0, 3]
  empty = prompt_features(tf.ragged.constant([[]], dtype=tf.int32), 2)
  assert empty[0].numpy().tolist() == [[PAD_ID, PAD_ID]]


@pytest.mark.parametrize("args, kwargs, line", [
    ((0, NEW), {}, "--max_seq_length=0: must be at least 1"),
    ((LENGTH, 0), {}, "--max_new_tokens=0: must be at least 1"),
    ((LENGTH, NEW), {"stop_ids": [7, 32000]},
     "--stop_ids: 32000 is not a token id of the model (0..31999)"),
])
def test_bad_arguments_are_refused_before_writing(lm, shared, tmp_path, args,
                                                  kwargs, line):
  target = tmp_path / "out"
  with pytest.raises(UsageError) as e:
    export_language_model(lm, spiece_path(shared), str(target), *args,
                          **kwargs)
  assert str(e.value) == line
  assert os.listdir(tmp_path) == []


def test_a_user_directory_is_not_replaced(lm, shared, tmp_path):
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "notes.txt").write_text("keep me\n")
  before = tree_digest(tmp_path)
  with pytest.raises(UserError) as e:
    export_language_model(lm, spiece_path(shared), str(tmp_path / "mine"),
                          LENGTH, NEW)
  assert str(e.value) == (
      f"--export_dir={tmp_path / 'mine'}: exists and is not an xlnet-tf "
      "language_model export (no xlnet_tf_export.json); choose another "
      "directory or remove it yourself")
  assert tree_digest(tmp_path) == before
