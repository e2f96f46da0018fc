"""Scoring (xlnet_tf/tasks/scoring.py, run_score.py) on a tiny transformers
`XLNetLMHeadModel` with random weights, imported by `load_language_model`:
left-to-right log-probabilities equal a transformers token-by-token
reference (one forward per target, the same perm_mask, a one-hot
target_mapping), pseudo-log-likelihood equals references in which the scored
token is replaced and hidden from everyone, batching and padding change no
score, and the script's body writes exactly what the API returns.
"""

import contextlib
import io
import json
import os
import sys
import types

import numpy as np
import pytest
import torch
import transformers

from conftest import ROOT, assert_close, spiece_path
from entry_points import own_flags
from data_utils.errors import UserError, run_main
from data_utils.tokenization import CLS_ID, MASK_ID, SEP_ID
from xlnet_tf.pretrained import load_language_model
from xlnet_tf.tasks.language_model import scoring

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_score  # noqa: E402  pylint: disable=wrong-import-position

VOCAB = 60
TEXTS = [[11, 12, 13, 14, 15], [20, 21], [30, 31, 32, 33, 34, 35, 36], [],
         [40]]
CONTEXTS = [[50, 51], [], [52], [53, 54, 55], []]


def hf_lm(directory, vocab=VOCAB, seed=0):
  """A tiny random transformers XLNetLMHeadModel saved to `directory`
  (every weight random, LayerNorm gains around 1)."""
  config = transformers.XLNetConfig(vocab_size=vocab, d_model=16, n_layer=2,
                                    n_head=2, d_inner=32, dropout=0.0,
                                    ff_activation="gelu_new")
  torch.manual_seed(seed)
  model = transformers.XLNetLMHeadModel(config)
  with torch.no_grad():
    for name, param in sorted(model.named_parameters()):
      gain = 1.0 if name.endswith("layer_norm.weight") else 0.0
      param.copy_(torch.randn(param.shape) * 0.3 + gain)
  model.eval().save_pretrained(str(directory))
  return model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  directory = tmp_path_factory.mktemp("hf_lm")
  theirs = hf_lm(directory)
  ours, _ = load_language_model(str(directory))
  return theirs, ours


@pytest.fixture(scope="module")
def scorer(models):
  """One traced scorer for the module (its batch size is set per test)."""
  return scoring.TextScorer(models[1])


def _hf_log_prob(model, row, perm, position, token):
  """transformers' log p(token) at `position` of one unpadded row."""
  length = len(row)
  mapping = np.zeros((1, 1, length), np.float32)
  mapping[0, 0, position] = 1.0
  with torch.no_grad():
    logits = model(input_ids=torch.tensor([row]),
                   perm_mask=torch.tensor(perm[None]),
                   target_mapping=torch.tensor(mapping)).logits
  return float(torch.log_softmax(logits[0, 0].double(), -1)[token])


def _l2r_perm(n_context, n_text):
  """The left-to-right perm_mask, by hand: text piece k (k-th target) sees
  the context, the markers and text pieces < k; context and markers see no
  text piece."""
  length = n_context + n_text + 2
  is_text = np.zeros(length, bool)
  is_text[n_context:n_context + n_text] = True
  perm = np.zeros((length, length), np.float32)
  for i in range(length):
    for j in range(length):
      if is_text[j] and (not is_text[i] or j >= i):
        perm[i, j] = 1.0
  return perm


def test_l2r_equals_transformers_token_by_token(models, scorer):
  theirs, _ = models
  scorer.batch_size = 3
  got = scorer.score_ids(TEXTS, CONTEXTS)
  for text, context, result in zip(TEXTS, CONTEXTS, got):
    row = list(context) + list(text) + [SEP_ID, CLS_ID]
    perm = _l2r_perm(len(context), len(text))
    expected = [_hf_log_prob(theirs, row, perm, len(context) + k, token)
                for k, token in enumerate(text)]
    assert result["ids"] == text
    assert result["log_probs"].shape == (len(text),)
    assert_close(result["log_probs"], expected)


def test_pll_equals_hidden_token_references(models, scorer):
  theirs, _ = models
  scorer.batch_size = 4
  got = scorer.score_ids(TEXTS, CONTEXTS, order="pll")
  for text, context, result in zip(TEXTS[:3], CONTEXTS, got):
    expected = []
    for k, token in enumerate(text):
      row = list(context) + list(text) + [SEP_ID, CLS_ID]
      position = len(context) + k
      row[position] = MASK_ID  # the scored token is never read
      perm = np.zeros((len(row), len(row)), np.float32)
      perm[:, position] = 1.0
      expected.append(_hf_log_prob(theirs, row, perm, position, token))
    assert_close(result["log_probs"], expected)
  assert got[3]["log_probs"].shape == (0,)


def test_batching_and_padding_change_no_score(scorer):
  for order in scoring.ORDERS:
    scorer.batch_size = 1
    alone = [scorer.score_ids([t], [c], order)[0]
             for t, c in zip(TEXTS, CONTEXTS)]
    scorer.batch_size = 5
    batched = scorer.score_ids(TEXTS, CONTEXTS, order)
    for a, b in zip(alone, batched):
      assert a["ids"] == b["ids"]
      assert_close(b["log_probs"], a["log_probs"], name=order)


def test_row_layout_and_limits():
  ids, order, mask = scoring.pad_left([[7, 8, 4, 3], [9, 4, 3]],
                                      [[-1, 0, -1, -1], [0, -1, -1]])
  assert ids.tolist() == [[7, 8, 4, 3], [5, 9, 4, 3]]
  assert order.tolist() == [[-1, 0, -1, -1], [-1, 0, -1, -1]]
  assert mask.tolist() == [[0, 0, 0, 0], [1, 0, 0, 0]]
  with pytest.raises(UserError) as e:
    scoring.check_lengths([[1], [1] * 3], [[], [2]], 5, where="in.tsv: text")
  assert str(e.value) == ("in.tsv: text 2: 6 pieces with the context and "
                          "markers, more than max_seq_length 5")
  with pytest.raises(UserError) as e:
    scoring.check_order("r2l")
  assert str(e.value) == "order='r2l': must be one of l2r, pll"
  assert scoring.summarize([-0.5, -1.0, -1.5]) == {
      "sum": -3.0, "mean": -1.0, "count": 3}


def test_run_score_writes_the_api_scores(shared, sp_tokenizer, tmp_path):
  """The script's body on a TSV with a context column, PLL, batch 2 (each
  pass traced): its JSONL equals `score_texts` (eager) line by line, the
  summary is printed; bad flags are refused in one line."""
  model_dir = tmp_path / "hf"
  hf_lm(model_dir, vocab=32000, seed=1)
  data = tmp_path / "in.tsv"
  texts = ["The cat sat.", "", "A dog ran home quickly."]
  contexts = ["Once upon a time", "Nothing", ""]
  data.write_text("sentence\tprefix\n" + "".join(
      f"{t}\t{c}\n" for t, c in zip(texts, contexts)), encoding="utf-8")
  out = tmp_path / "scores.jsonl"
  base = dict(init_checkpoint=str(model_dir), model_config_path=None,
              spiece_model_file=spiece_path(shared), uncased=False,
              clamp_len=None, input_file=str(data), text_column=None,
              batch_size=2, overwrite=False, text=None, context_column=None,
              order="l2r", max_seq_length=512, output_file=None)
  assert set(base) == own_flags("run_score.py")

  def run(**kw):
    err, stdout = io.StringIO(), io.StringIO()
    flag_values = types.SimpleNamespace(**{**base, **kw})
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
      code = run_main("run_score", lambda: run_score.score_main(flag_values))
    return code, err.getvalue().strip(), stdout.getvalue()

  code, _, stdout = run(context_column="prefix", order="pll",
                        output_file=str(out))
  assert code == 0
  lm, _ = load_language_model(str(model_dir))
  expected = scoring.score_texts(lm, sp_tokenizer, texts, contexts,
                                 order="pll", batch_size=3, graph=False)
  lines = [json.loads(l) for l in out.read_text(encoding="utf-8")
           .splitlines()]
  assert len(lines) == 3
  for line, want, context in zip(lines, expected, contexts):
    assert line["order"] == "pll"
    assert {k: line[k] for k in ("text", "context", "pieces", "ids",
                                 "count")} == {
        "text": want["text"], "context": context,
        "pieces": want["pieces"], "ids": want["ids"],
        "count": want["count"]}
    assert_close(line["log_probs"], want["log_probs"])
    assert_close(line["sum"], want["sum"])
  assert lines[1]["count"] == 0 and lines[1]["mean"] is None
  tokens = sum(w["count"] for w in expected)
  total = sum(w["sum"] for w in expected)
  summary = json.loads(stdout.strip().splitlines()[-1])
  assert summary["texts"] == 3 and summary["pieces"] == tokens
  assert_close(summary["mean_log_prob"], total / tokens)

  # Refusals: one line, exit 2, before any model is loaded; the output
  # file is left as it was.
  before = out.read_text(encoding="utf-8")
  for kw, line in [
      ({"output_file": str(out)},
       f"--output_file={out}: exists; pass --overwrite to replace it"),
      ({"order": "r2l"}, "--order=r2l: must be one of l2r, pll"),
      ({"text": ["a b"]}, "give exactly one of --input_file and --text"),
      ({"input_file": None, "text": ["a"], "context_column": "prefix"},
       "--context_column: needs --input_file (a .tsv or .jsonl)"),
      ({"max_seq_length": 2}, "--max_seq_length=2: must be at least 3"),
      ({"context_column": "prefix", "max_seq_length": 9},
       f"--input_file={data}: text 1: 10 pieces with the context and "
       "markers, more than max_seq_length 9")]:
    assert run(**kw)[:2] == (2, f"run_score: {line}")
  assert out.read_text(encoding="utf-8") == before
