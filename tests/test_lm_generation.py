"""Cached generation (xlnet_tf/tasks/generation.py, generation_search.py,
run_generate.py) on tiny random models: the cache equals ONE uncached
two-stream pass over `prompt + generated` (target order -1 prompt, k for
the k-th new token) in tokens and log-probs, greedy and sampled; left-padded
batches equal each prompt alone; stop tokens end rows; one beam is greedy,
V beams over two tokens are the exhaustive search; the text API and the
script write what `decode` generates.
"""

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import assert_close, spiece_path
from lm_checkpoints import write_checkpoints
from data_utils.errors import UsageError, UserError
from data_utils.tokenization import PAD_ID
from xlnet_tf.pretrained import (build_model, load_language_model,
                                 save_hf_weights)
from xlnet_tf.tasks.language_model.generation import (choose_tokens, decode, prefill, step,
                                       step_seed, top_k_filter, top_p_filter)
from xlnet_tf.tasks.language_model.generation_search import (beam_search,
                                              continuation_text, generate,
                                              left_pad)
from xlnet_tf.tasks.language_model.passes import log_probs_of, two_stream_pass

import run_generate

VOCAB = 40
PROMPTS = [[11, 12, 13], [20, 21, 22, 23, 24], [30]]
NEW = 6


def random_lm(n_token, seed, tie_weight=True):
  config = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=n_token, ff_activation="gelu",
                          untie_r=True)
  lm = build_model("lm", config, xt.RunOptions(dropout=0.0, dropatt=0.0),
                   tie_weight=tie_weight)
  rng = np.random.RandomState(seed)
  for name, var in sorted(lm.original_weights().items()):
    gain = 1.0 if name.endswith("gamma") else 0.0
    # No LM bias: a random one would make every row pick the same tokens.
    scale = 0.0 if name.endswith("lm_loss/bias") else 0.2
    var.assign((rng.normal(0, scale, var.shape) + gain).astype(np.float32))
  return lm


@pytest.fixture(scope="module")
def lm():
  """Its own softmax weight (the transformers models here tie theirs)."""
  return random_lm(VOCAB, 4, tie_weight=False)


@pytest.fixture(scope="module")
def batch():
  return left_pad(PROMPTS, multiple=1)


@pytest.fixture(scope="module")
def greedy(lm, batch):
  return {k: v.numpy() for k, v in decode(lm, *batch, NEW).items()}


def uncached_logits(lm, ids, mask, tokens):
  """`[B, T, V]`: every new token's logits from one two-stream pass over
  `prompt + tokens` (prompt context, token k the k-th target)."""
  rows, new = tokens.shape
  order = np.concatenate([np.full(ids.shape, -1),
                          np.tile(np.arange(new), [rows, 1])], 1)
  full_mask = np.concatenate([mask, np.zeros(tokens.shape, np.float32)], 1)
  return two_stream_pass(lm, np.concatenate([ids, tokens], 1),
                         order.astype(np.int32),
                         input_mask=full_mask)["logits"].numpy()


def test_cache_steps_equal_one_uncached_pass_for_any_tokens(lm, batch):
  tokens = np.random.RandomState(0).randint(9, VOCAB, [len(PROMPTS), NEW])
  want = uncached_logits(lm, *batch, tokens)
  logits, cache = prefill(lm, *batch, NEW)
  got = [logits]
  for k in range(1, NEW):
    logits, cache = step(lm, tokens[:, k - 1], cache)
    got.append(logits)
  assert_close(np.stack(got, 1), want)
  keys, values, cache_mask = cache
  assert [k.shape.as_list() for k in keys + values] == [[3, 2, 5 + NEW, 8]] * 4
  # One empty slot left, then the prompt (its padding hidden), then the
  # NEW - 1 tokens fed back.
  np.testing.assert_array_equal(cache_mask, np.concatenate(
      [np.ones([3, 1]), batch[1], np.zeros([3, NEW - 1])], 1))


def test_greedy_cache_equals_one_uncached_pass(lm, batch, greedy):
  tokens = greedy["tokens"]
  logits = uncached_logits(lm, *batch, tokens)
  assert_close(greedy["log_probs"], log_probs_of(logits, tokens))
  # Each token is the uncached argmax given the tokens before it.
  np.testing.assert_array_equal(tokens, np.argmax(logits, -1))
  np.testing.assert_array_equal(greedy["lengths"], [NEW] * len(PROMPTS))
  assert len(set(tokens.ravel().tolist())) >= 4


def test_sampling_cache_equals_uncached(lm, batch, greedy):
  seed = tf.constant([7, 3])
  settings = {"temperature": 1.5, "top_k": 6, "top_p": 0.8}
  out = decode(lm, *batch, NEW, greedy=False, seed=seed, **settings)
  tokens = out["tokens"].numpy()
  logits = uncached_logits(lm, *batch, tokens)
  assert_close(out["log_probs"], log_probs_of(logits, tokens))
  redrawn = [choose_tokens(logits[:, k], greedy=False, seed=step_seed(seed, k),
                           **settings).numpy() for k in range(NEW)]
  np.testing.assert_array_equal(tokens, np.stack(redrawn, 1))
  assert (tokens != greedy["tokens"]).any()


def test_left_padded_batch_equals_each_prompt_alone(lm, greedy):
  wide = decode(lm, *left_pad(PROMPTS, multiple=8), NEW)
  np.testing.assert_array_equal(wide["tokens"], greedy["tokens"])
  assert_close(wide["log_probs"], greedy["log_probs"])
  alone = decode(lm, np.array([PROMPTS[2]], np.int32),
                 np.zeros([1, len(PROMPTS[2])], np.float32), NEW)
  np.testing.assert_array_equal(alone["tokens"][0], greedy["tokens"][2])
  assert_close(alone["log_probs"][0], greedy["log_probs"][2])


@pytest.fixture(scope="module")
def stopped(lm, batch, greedy):
  """Greedy with a stop id (one that row 0 produces early)."""
  stop = int(greedy["tokens"][0, 2])
  return stop, decode(lm, *batch, NEW, stop_ids=tf.constant([VOCAB + 3,
                                                             stop]))


def test_stop_tokens_end_their_rows(greedy, stopped):
  free = greedy["tokens"]
  stop, out = stopped
  ends = [list(row).index(stop) + 1 if stop in row else NEW for row in free]
  assert ends[0] <= 3 and NEW in ends  # one row stops early, one never
  np.testing.assert_array_equal(out["lengths"], ends)
  for b, n in enumerate(ends):
    np.testing.assert_array_equal(out["tokens"][b], list(free[b, :n]) +
                                  [PAD_ID] * (NEW - n))
    assert_close(out["log_probs"][b], list(greedy["log_probs"][b, :n]) +
                 [0.0] * (NEW - n))


def test_one_beam_is_greedy(lm, batch, stopped):
  stop, want = stopped
  got = beam_search(lm, *batch, NEW, 1, stop_ids=[stop])
  np.testing.assert_array_equal(got["tokens"][:, 0], want["tokens"])
  np.testing.assert_array_equal(got["lengths"][:, 0], want["lengths"])
  assert_close(got["log_probs"][:, 0], want["log_probs"])


def test_vocab_many_beams_over_two_tokens_are_the_exhaustive_search(lm,
                                                                    batch):
  ids, mask = batch
  out = beam_search(lm, ids[:2], mask[:2], 2, VOCAB, length_penalty=0.0)
  pairs = np.stack(np.meshgrid(np.arange(VOCAB), np.arange(VOCAB),
                               indexing="ij"), -1).reshape(-1, 2)
  for b in range(2):
    rows = len(pairs)
    logits = uncached_logits(lm, np.repeat(ids[b:b + 1], rows, 0),
                             np.repeat(mask[b:b + 1], rows, 0), pairs)
    sums = log_probs_of(logits, pairs).numpy().sum(1)
    best = np.argsort(-sums, kind="stable")[:VOCAB]
    assert_close(out["scores"][b], sums[best])
    np.testing.assert_array_equal(out["tokens"][b, :10], pairs[best[:10]])


def test_beam_hypotheses_are_scored_like_uncached(lm, batch, greedy):
  stop = int(greedy["tokens"][0, 2])
  out = {k: v.numpy() for k, v in beam_search(
      lm, *batch, NEW, 3, stop_ids=[stop], length_penalty=0.7).items()}
  position = np.arange(NEW)[None, :]
  for k in range(3):
    tokens, lengths = out["tokens"][:, k], out["lengths"][:, k]
    live = position < lengths[:, None]
    logits = uncached_logits(lm, *batch, tokens)
    assert_close(out["log_probs"][:, k],
                 np.where(live, log_probs_of(logits, tokens), 0.0))
    for row, n in zip(tokens, lengths):
      assert (row[n:] == PAD_ID).all() and stop not in row[:n - 1]
      assert n == NEW or row[n - 1] == stop
  assert_close(out["scores"], out["log_probs"].sum(-1) / out["lengths"]**0.7)
  assert (np.diff(out["scores"], axis=1) <= 0).all()
  assert (out["lengths"] < NEW).any()


def test_filters_keep_exactly_the_chosen_tokens():
  logits = tf.math.log([[0.1, 0.4, 0.2, 0.3]])
  inf = float("-inf")
  assert top_k_filter(logits, tf.constant(0)).numpy().tolist() == \
      logits.numpy().tolist()
  kept = top_k_filter(logits, tf.constant(2)).numpy()[0]
  assert np.isinf(kept[[0, 2]]).all() and np.isfinite(kept[[1, 3]]).all()
  # The most probable tokens until they reach top_p: 0.4 + 0.3 covers 0.65,
  # 0.75 needs 0.2 as well.
  for top_p, dropped in [(0.65, [True, False, True, False]),
                         (0.75, [True, False, False, False])]:
    nucleus = top_p_filter(logits, tf.constant(top_p)).numpy()[0]
    assert [bool(x == inf) for x in nucleus] == dropped
  single = top_p_filter(logits, 0.1).numpy()[0]
  assert [bool(x == inf) for x in single] == [True, False, True, True]
  for seed in range(5):
    assert choose_tokens(logits, greedy=False, top_k=1,
                         seed=tf.constant([seed, 0])).numpy().tolist() == [1]


class Flags(SimpleNamespace):
  """The script's flag values with absl's `f[name].present`."""

  def __getitem__(self, name):
    return SimpleNamespace(present=name in self.given)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
  """A model of the released vocabulary (the flags' checks read its shapes
  and compare the tokenizer with them)."""
  return write_checkpoints(tmp_path_factory.mktemp("lm"))


def _flags(shared, ckpts, **given):
  defaults = dict(init_checkpoint=ckpts.original,
                  model_config_path=None,
                  spiece_model_file=spiece_path(shared), uncased=False, clamp_len=None,
                  input_file=None, text_column=None, batch_size=8,
                  overwrite=False, prompt=["Hi"], strategy="greedy",
                  max_new_tokens=4, temperature=1.0, top_k=0, top_p=1.0,
                  seed=None, num_beams=4, length_penalty=1.0,
                  stop_ids=["7"], stop=None, output_file=None)
  defaults.update(given)
  return Flags(given=set(given), **defaults)


@pytest.mark.parametrize("given,message", [
    ({"prompt": None}, "give exactly one of --input_file and --prompt (or "
                       "--export_dir alone)"),
    ({"max_new_tokens": 0}, "--max_new_tokens=0: must be at least 1"),
    ({"top_p": 0.9}, "--top_p: only with --strategy=sample"),
    ({"num_beams": 2, "strategy": "sample"},
     "--num_beams: only with --strategy=beam"),
    ({"temperature": 0.0, "strategy": "sample"},
     "--temperature=0.0: must be a finite number above 0"),
    ({"top_p": 1.5, "strategy": "sample"}, "--top_p=1.5: must be in (0, 1]"),
    ({"stop_ids": ["7", "x"]}, "--stop_ids=7,x: 'x' is not a token id"),
    ({"prompt": ["a", " "]}, "--prompt 2 is empty (a prompt needs at least "
                             "one token)"),
])
def test_script_flag_errors_are_one_line(shared, ckpts, given, message):
  f = _flags(shared, ckpts, **given)
  with pytest.raises(UsageError) as e:
    run_generate.check_flags(f)
    run_generate._prompts(f)
  assert str(e.value) == message


def test_script_refuses_an_export_dir_it_did_not_write(shared, ckpts,
                                                       tmp_path):
  user = tmp_path / "mine"
  user.mkdir()
  (user / "notes.txt").write_text("keep")
  f = _flags(shared, ckpts, prompt=None, export_dir=str(user),
             export_prompt_length=16)
  with pytest.raises(UserError) as e:
    run_generate.check_flags(f)
  assert str(e.value) == (
      f"--export_dir={user}: exists and is not an xlnet-tf language_model "
      "export (no xlnet_tf_export.json); choose another directory or remove "
      "it yourself")
  assert (user / "notes.txt").read_text() == "keep"


def test_api_and_script_write_what_decode_generates(shared, ckpts,
                                                    sp_tokenizer, tmp_path):
  model_dir = str(tmp_path / "hf")
  save_hf_weights(random_lm(sp_tokenizer.vocab_size, 2), model_dir)
  lm, _ = load_language_model(model_dir)
  prompts = ["The cat sat on the", "Hello"]
  encoded = [sp_tokenizer.encode_ids(p) for p in prompts]
  ids, mask = left_pad(encoded)
  vocab = sp_tokenizer.vocab_size

  # Sampling: batch 0 draws from seed [seed, 0].
  got = generate(lm, sp_tokenizer, prompts, 5, "sample", traced=False,
                 seed=3, top_k=20, temperature=0.9)
  want = decode(lm, ids, mask, 5, greedy=False, seed=tf.constant([3, 0]),
                top_k=20, temperature=0.9, vocab_size=vocab)
  for b, result in enumerate(got):
    assert result["tokens"] == want["tokens"][b].numpy().tolist()
    assert_close(result["log_probs"], want["log_probs"][b])
    assert result["text"] == sp_tokenizer.decode_ids(
        encoded[b] + result["tokens"])[len(sp_tokenizer.decode_ids(
            encoded[b])):]
    assert result["pieces"] == [sp_tokenizer.id_to_piece(t)
                                for t in result["tokens"]]
    assert result["stop"] == "length"

  # The script (traced, the same seed) with a stop string: the text is cut
  # before it, the tokens kept up to the one that completed it.
  texts = [r["text"] for r in got]
  stop = texts[0].split()[1][:2]
  output = tmp_path / "out.jsonl"
  f = _flags(shared, ckpts, init_checkpoint=model_dir, prompt=prompts,
             strategy="sample", seed=3, top_k=20, temperature=0.9,
             max_new_tokens=5, stop=[stop], output_file=str(output))
  assert run_generate.generate_main(f) == 0
  lines = [json.loads(line) for line in output.read_text().splitlines()]
  assert [r["prompt"] for r in lines] == prompts
  for line, result, text, e in zip(lines, got, texts, encoded):
    kept = line["tokens"]
    assert kept == result["tokens"][:len(kept)]
    assert_close(line["log_probs"], result["log_probs"][:len(kept)])
    if stop in text:
      assert (line["text"], line["stop"]) == (text[:text.index(stop)],
                                              "stop_string")
      assert stop in continuation_text(sp_tokenizer, e, kept)
      assert stop not in continuation_text(sp_tokenizer, e, kept[:-1])
    else:
      assert (line["text"], line["stop"], len(kept)) == (text, "length", 5)
  assert lines[0]["stop"] == "stop_string"
