"""Generation (xlnet_tf/tasks/generation.py) against transformers, on a tiny
random `XLNetLMHeadModel` saved by `save_pretrained` and imported with
`load_language_model`: the first new token's distribution, from a
left-padded batch, equals transformers' next-token distribution for each
prompt alone (built by its own `prepare_inputs_for_generation`: a dummy
token nobody sees, predicted through `target_mapping`); and every cached
log-prob equals one transformers forward with our factorization's
`perm_mask` and `target_mapping`.
"""

import numpy as np
import pytest
import torch
import transformers

from conftest import assert_close
from xlnet_tf.factorization import factorization_perm_mask, target_mapping
from xlnet_tf.pretrained import load_language_model
from xlnet_tf.tasks.language_model.generation import decode, prefill
from xlnet_tf.tasks.language_model.generation_search import left_pad

VOCAB = 60
PROMPTS = [[11, 12, 13, 14, 15], [20, 21], [30, 31, 32, 33, 34, 35, 36]]
NEW = 5


def _log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  directory = tmp_path_factory.mktemp("hf_lm")
  config = transformers.XLNetConfig(vocab_size=VOCAB, d_model=16, n_layer=2,
                                    n_head=2, d_inner=32, dropout=0.0,
                                    ff_activation="gelu_new")
  torch.manual_seed(0)
  theirs = transformers.XLNetLMHeadModel(config)
  with torch.no_grad():
    for name, param in sorted(theirs.named_parameters()):
      gain = 1.0 if name.endswith("layer_norm.weight") else 0.0
      param.copy_(torch.randn(param.shape) * 0.3 + gain)
  theirs.eval().save_pretrained(str(directory))
  ours, _ = load_language_model(str(directory))
  return theirs, ours


def test_first_token_distribution_equals_transformers(models):
  theirs, ours = models
  ids, mask = left_pad(PROMPTS, multiple=1)
  logits, _ = prefill(ours, ids, mask, NEW)
  out = decode(ours, ids, mask, NEW)
  for b, prompt in enumerate(PROMPTS):
    inputs = theirs.prepare_inputs_for_generation(torch.tensor([prompt]))
    with torch.no_grad():
      want = _log_softmax(theirs(**inputs).logits[0, 0].numpy())
    assert_close(_log_softmax(logits[b]), want)
    assert int(out["tokens"][b, 0]) == int(np.argmax(want))
    assert_close(out["log_probs"][b, 0], want.max())


def test_cached_log_probs_equal_a_transformers_pass(models):
  theirs, ours = models
  ids, mask = left_pad(PROMPTS, multiple=1)
  out = decode(ours, ids, mask, NEW)
  tokens = out["tokens"].numpy()
  full = np.concatenate([ids, tokens], 1)
  full_mask = np.concatenate([mask, np.zeros(tokens.shape, np.float32)], 1)
  order = np.concatenate([np.full(ids.shape, -1),
                          np.tile(np.arange(NEW), [len(PROMPTS), 1])], 1)
  perm = factorization_perm_mask(order.astype(np.int32), full_mask).numpy()
  positions = np.tile(np.arange(ids.shape[1], full.shape[1]),
                      [len(PROMPTS), 1])
  mapping = target_mapping(positions, full.shape[1]).numpy()
  with torch.no_grad():
    logits = theirs(input_ids=torch.tensor(full, dtype=torch.long),
                    input_mask=torch.tensor(full_mask),
                    perm_mask=torch.tensor(perm),
                    target_mapping=torch.tensor(mapping)).logits.numpy()
  want = np.take_along_axis(_log_softmax(logits), tokens[..., None], -1)
  assert_close(out["log_probs"], want[..., 0])
  np.testing.assert_array_equal(tokens, np.argmax(logits, -1))
