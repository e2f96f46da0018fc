"""The issue's acceptance check for long documents: with weights exported by
`pretrained.save_hf_weights`, transformers' `XLNetForSequenceClassification`
(same mem_len, eval, `use_mems=True`) run segment by segment with `mems`
gives the logits of our classifier read in segments, after every segment,
to 1e-5, and the same memory.

HF cannot mask memory, so the documents fill every segment (no padding):
its first segment reads no memory where ours reads the fully masked initial
memory, and its memory is shorter than M until it is full where ours is
always M long with the missing positions masked. Documents are real IMDB
reviews, truncated to N * S tokens of the long-document layout.
"""

import os

import numpy as np
import pytest
import torch
import transformers

import xlnet_tf as xt
from conftest import assert_close
from data_utils.tokenization import CLS_ID, SEG_ID_A, SEG_ID_CLS, SEP_ID
from xlnet_tf import pretrained

S, N = 16, 3
CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=32000, ff_activation="gelu", untie_r=True)
REVIEWS = ("neg/533_1.txt", "pos/428_10.txt", "pos/421_9.txt")


def randomize(model, seed):
  """Every weight random (LayerNorm gains around 1): a swapped or
  mis-transposed tensor cannot hide behind a zero or a one."""
  rng = np.random.RandomState(seed)
  for name, var in sorted(model.original_weights().items()):
    value = rng.normal(0, 0.3, var.shape.as_list())
    var.assign((value + name.endswith("gamma")).astype(np.float32))


@pytest.fixture(scope="module")
def documents(shared, sp_tokenizer):
  """`[3, N * S]` features of the layout: a review's first N * S - 2
  pieces, `<sep> <cls>`; no padding."""
  rows = []
  for name in REVIEWS:
    path = os.path.join(shared, "data", "imdb", "aclImdb", "test", name)
    with open(path, encoding="utf-8") as f:
      pieces = sp_tokenizer.encode_ids(f.read().strip().replace("<br />",
                                                                " "))
    assert len(pieces) >= N * S - 2
    rows.append(pieces[:N * S - 2] + [SEP_ID, CLS_ID])
  ids = np.array(rows, np.int32)
  segs = np.full(ids.shape, SEG_ID_A, np.int32)
  segs[:, -1] = SEG_ID_CLS
  return {"input_ids": ids, "segment_ids": segs,
          "input_mask": np.zeros(ids.shape, np.float32)}


@pytest.mark.parametrize("attn_type,mem_len", [
    ("bi", S // 2), ("bi", S), ("bi", 2 * S + 4), ("uni", S + 4)])
def test_transformers_segment_by_segment_agrees(documents, tmp_path,
                                                attn_type, mem_len):
  options = xt.RunOptions(mem_len=mem_len, attn_type=attn_type, dropout=0.0,
                          dropatt=0.0)
  ours = xt.XLNetClassifier(xt.XLNetModel(CONFIG, options), n_class=3,
                            task_name="imdb", segment_length=S)
  randomize(ours, mem_len)
  out = str(tmp_path / "hf")
  pretrained.save_hf_weights(ours, out)
  theirs = transformers.XLNetForSequenceClassification.from_pretrained(out)
  theirs.eval()
  assert (theirs.config.mem_len, theirs.config.attn_type) == (mem_len,
                                                              attn_type)

  mems, mems_mask = ours.initial_memory(3)
  hf_mems = None
  for k in range(N):
    segment = {key: v[:, k * S:(k + 1) * S] for key, v in documents.items()}
    want, mems, mems_mask = ours.read_segment(segment, mems, mems_mask)
    with torch.no_grad():
      got = theirs(input_ids=torch.tensor(segment["input_ids"]).long(),
                   token_type_ids=torch.tensor(segment["segment_ids"]).long(),
                   mems=hf_mems, use_mems=True)
    hf_mems = got.mems
    assert_close(got.logits.numpy(), want["logits"], name=f"segment {k}")
    # HF's memory [m, B, D] (m = min((k + 1) * S, M)) is the end of ours
    # [B, M, D]; ours masks exactly the positions HF does not have.
    held = min((k + 1) * S, mem_len)
    assert hf_mems[0].shape[0] == held
    np.testing.assert_array_equal(
        mems_mask.numpy(),
        np.tile([1.0] * (mem_len - held) + [0.0] * held, (3, 1)))
    for layer, (a, b) in enumerate(zip(hf_mems, mems)):
      assert_close(a.numpy().transpose(1, 0, 2), b.numpy()[:, mem_len - held:],
                   name=f"segment {k} layer {layer}")
  # The whole document through call: the same final logits.
  assert_close(ours(documents)["logits"], got.logits.numpy())
