"""Embeddings (`xlnet_tf/tasks/embeddings.py`, `data_utils/lm/
embedding_files.py`, `run_embed.py`): the vectors are the encoder's hidden
states, padding and batching change nothing, long texts read in segments
equal one pass with the equivalent attention mask, the `embed_text`
signature equals the Python path, offsets point at the pieces' text, and
the files round-trip exactly."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT, assert_close, spiece_path
from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.lm.embedding_files import (EmbeddingWriter, TextPieces,
                                           read_embedding_file, text_pieces,
                                           window_features)
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.io import save_original_checkpoint
from xlnet_tf.pretrained import build_model, save_hf_weights
from xlnet_tf.tasks.language_model.embeddings import (Embedder, check_attn_summary,
                                       embed_text_signature, embed_texts,
                                       layer_indices, load_attn_summary)
from xlnet_tf.tasks.pooling import SequenceSummary

CONFIG = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                     n_token=32000)
ALL = ("last", "first", "mean", "masked_mean")


@pytest.fixture(scope="module")
def lm():
  tf.random.set_seed(7)
  model = build_model("lm", CONFIG, RunOptions(dropout=0.0, dropatt=0.0))
  model.encoder(tf.constant([[5, 6]]))
  return model


@pytest.fixture(scope="module")
def full(lm):
  """Every layer and pooling but attn; 'mean' pads to whole windows."""
  return Embedder(lm.encoder, layers=[0, 1, -1], poolings=ALL,
                  max_seq_length=16)


@pytest.fixture(scope="module")
def short(lm):
  """Batches padded to the longest text (a multiple of 8)."""
  return Embedder(lm.encoder, layers=[0, 1, 2],
                  poolings=("last", "masked_mean"), max_seq_length=16)


def _hidden(encoder, ids, length, perm_mask=None):
  """Reference: the encoder's hidden states `[n_layer + 1, T, D]` of one
  text laid out in `length`, one pass."""
  f = window_features([ids], length)
  out = encoder(f["input_ids"], segment_ids=f["segment_ids"],
                input_mask=f["input_mask"], perm_mask=perm_mask,
                return_hidden_states=True)
  return np.stack([h[0].numpy() for h in out["hidden_states"]]), f


def test_vectors_equal_hidden_states_and_pools(lm, full):
  texts = [[101, 102, 103], list(range(200, 211)), [300]]
  got = full.embed_ids(texts)
  for ids, (vectors, pooled) in zip(texts, got):
    n = len(ids)
    alone, _ = _hidden(lm.encoder, ids, n + 2)  # no padding at all
    assert vectors.shape == (n, 3, 16)
    assert_close(vectors, alone[:, :n].transpose(1, 0, 2), name="pieces")
    assert_close(pooled["last"], alone[:, -1], name="last")
    assert_close(pooled["first"], alone[:, 0], name="first")
    assert_close(pooled["masked_mean"], alone.mean(axis=1), name="mmean")
    window, _ = _hidden(lm.encoder, ids, 16)  # the original's mean
    assert_close(pooled["mean"], window.mean(axis=1), name="mean")


def test_masked_mean_and_vectors_unchanged_by_padding(short, full):
  ids = [400, 401, 402, 403]
  alone = short.embed_ids([ids])[0]  # T = 8
  batched = short.embed_ids([list(range(500, 510)), ids])[1]  # T = 16
  windowed = full.embed_ids([ids])[0]  # T = 16, other rows of the graph
  for other in (batched, windowed):
    assert_close(other[0], alone[0])
    assert_close(other[1]["masked_mean"], alone[1]["masked_mean"])


def test_long_text_in_segments_equals_one_pass_with_memory_mask(lm):
  segment, mem = 16, 10
  ids = list(range(600, 637))  # 39 tokens with <sep> <cls>: 3 segments
  embedder = Embedder(lm.encoder, layers=[0, 1, 2], poolings=ALL,
                      max_seq_length=segment, mem_len=mem)
  vectors, pooled = embedder.embed_ids([ids])[0]
  # Query i sees its own segment and the `mem` positions before it.
  length = 48
  seg = np.arange(length) // segment
  start = seg * segment
  j = np.arange(length)[None]
  sees = (seg[:, None] == seg[None]) | ((j < start[:, None])
                                        & (j >= start[:, None] - mem))
  perm = tf.constant((~sees)[None].astype(np.float32))
  ref, f = _hidden(lm.encoder, ids, length, perm)
  real = f["input_mask"][0] == 0
  assert_close(vectors, ref[:, length - 2 - len(ids):-2].transpose(1, 0, 2))
  assert_close(pooled["masked_mean"], ref[:, real].mean(axis=1))
  assert_close(pooled["last"], ref[:, -1])
  assert_close(pooled["first"], ref[:, length - segment])
  assert_close(pooled["mean"], ref[:, length - segment:].mean(axis=1))


def test_embed_text_signature_equals_embedder(lm, full, shared,
                                              sp_tokenizer):
  texts = ["a gripping, funny film", "",
           " ".join(["the state of the union"] * 7)]  # 35 pieces
  root = tf.Module()
  fn = embed_text_signature(root, lm.encoder,
                            GraphTokenizer(spiece_path(shared)), 16)
  out = {k: v.numpy() for k, v in fn(text=tf.constant(texts)).items()}
  want = embed_texts(full, sp_tokenizer, texts)
  length = out["input_ids"].shape[1]
  assert length == 48  # 3 windows: the longest text has 35 pieces + 2
  for b, row in enumerate(want):
    n = len(row["ids"])
    assert out["input_ids"][b, length - n - 2:-2].tolist() == row["ids"]
    assert out["input_mask"][b].sum() == length - n - 2
    assert_close(out["sequence_output"][b, length - n - 2:-2],
                 row["vectors"][:, 2])
    for name in ALL:
      assert_close(out[name][b], row["pooled"][name][2], name=name)


def test_offsets_point_at_the_pieces(sp_tokenizer):
  text = "  ``Café''  born in 2000, and 1,234 ＡＢ"
  got = text_pieces(sp_tokenizer, text)
  assert got.ids == sp_tokenizer.encode_ids(text)
  spans = [(p, text[s:e]) for p, s, e in zip(got.pieces, got.starts,
                                               got.ends)]
  assert spans == [
      ("▁", ""), ('"', "``"), ("Ca", "Ca"), ("fe", "fé"), ('"', "''"),
      ("▁born", "born"), ("▁in", "in"), ("▁2000", "2000"), (",", ","),
      ("▁and", "and"), ("▁", ""), ("1,2", "1,2"), ("34", "34"),
      ("▁", ""), ("AB", "ＡＢ")]
  assert got.starts[0] == got.ends[0] == text.index("``")


@pytest.mark.parametrize("suffix", ["jsonl", "tfrecord"])
def test_writers_round_trip_exactly(tmp_path, suffix):
  rng = np.random.default_rng(3)
  texts = [TextPieces("ab c", ["▁ab", "▁c"], [10, 11], [0, 3], [2, 4]),
           TextPieces("", [], [], [], []),
           TextPieces("é", ["▁é"], [12], [0], [1])]
  vectors = [rng.standard_normal([len(t.ids), 2, 4]).astype(np.float32)
             for t in texts]
  pooled = [{"last": rng.standard_normal([2, 4]).astype(np.float32)}
            for _ in texts]
  path = str(tmp_path / f"emb.{suffix}")
  with EmbeddingWriter(path, [len(t.ids) for t in texts], [0, 2], 4,
                       ["last"]) as out:
    for i in (2, 0, 1):  # any order
      out.add(i, texts[i], vectors[i], pooled[i])
  rows = read_embedding_file(path, ["last"])
  assert [r["index"] for r in rows] == [0, 1, 2]
  for t, v, p, r in zip(texts, vectors, pooled, rows):
    assert (r["text"], r["pieces"], r["ids"], r["starts"], r["ends"],
            r["layers"]) == (t.text, t.pieces, t.ids, t.starts, t.ends, [0, 2])
    np.testing.assert_array_equal(r["vectors"].reshape(v.shape), v)
    np.testing.assert_array_equal(r["pooled"]["last"], p["last"])
  with pytest.raises(RuntimeError):
    with EmbeddingWriter(str(tmp_path / f"x.{suffix}"), [1], [0], 4,
                         ["last"]) as out:
      raise RuntimeError("interrupted")
  with pytest.raises(ValueError, match=r"y\.\w+: 2 texts were never added"):
    with EmbeddingWriter(str(tmp_path / f"y.{suffix}"), [2, 0, 1], [0, 2], 4,
                         ["last"]) as out:
      out.add(1, texts[1], vectors[1], pooled[1])
  assert sorted(os.listdir(tmp_path)) == sorted(
      {"jsonl": ["emb.jsonl", "emb.last.npy", "emb.pieces.npy"],
       "tfrecord": ["emb.tfrecord"]}[suffix])


def test_attn_summary_loaded_and_refused(lm, tmp_path):
  summary = SequenceSummary(CONFIG, "attn", use_summ_proj=False)
  summary(tf.zeros([1, 2, 16]))
  prefix = save_original_checkpoint(summary, str(tmp_path / "s" / "m.ckpt"))
  loaded = load_attn_summary(prefix, CONFIG)
  for a, b in zip(summary.weights, loaded.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  ids = [700, 701, 702]
  embedder = Embedder(lm.encoder, poolings=("attn",), max_seq_length=16,
                      summary=loaded)
  pooled = embedder.embed_ids([list(range(800, 810)), ids])[1][1]
  hidden, f = _hidden(lm.encoder, ids, 5)
  want = summary(hidden[-1][None], input_mask=tf.zeros([1, 5]))[0]
  assert_close(pooled["attn"][0], want)
  bare = save_original_checkpoint(lm, str(tmp_path / "lm" / "m.ckpt"))
  with pytest.raises(ValueError) as e:
    check_attn_summary(bare)
  assert str(e.value) == (
      f"--pooling=attn: {bare} has no trained attn summary "
      "(model/sequnece_summary/summary_bias: a checkpoint fine-tuned with "
      "summary_type=attn, in the original layout, has one)")
  with pytest.raises(ValueError, match=r"^layer 3: the model has layers 0 "
                     r"\(embeddings\) to 2 \(-1 = 2\)$"):
    layer_indices([3], 2)


def test_run_embed_writes_what_the_api_computes(lm, short, shared,
                                                sp_tokenizer, tmp_path):
  save_hf_weights(lm, str(tmp_path / "hf"))
  texts = ["a gripping, funny film", "", "Café au lait, 1,234 times"]
  (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
  out = tmp_path / "emb.jsonl"
  res = subprocess.run(
      [sys.executable, "run_embed.py", f"--init_checkpoint={tmp_path}/hf",
       f"--spiece_model_file={spiece_path(shared)}",
       f"--input_file={tmp_path}/in.txt", f"--output_file={out}",
       "--layers=0,-1", "--pooling=last,masked_mean", "--max_seq_length=16",
       "--batch_size=2"], cwd=ROOT, capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  summary = json.loads(res.stdout.strip().splitlines()[-1])
  stem = str(tmp_path / "emb")
  assert summary["files"] == [f"{stem}.jsonl", f"{stem}.pieces.npy",
                              f"{stem}.last.npy", f"{stem}.masked_mean.npy"]
  want = embed_texts(short, sp_tokenizer, texts)  # layers 0, 1, 2
  rows = read_embedding_file(str(out), ["last", "masked_mean"])
  assert summary["texts"] == len(rows) == 3
  for w, r in zip(want, rows):
    assert (r["pieces"], r["ids"], r["starts"], r["ends"], r["layers"]) == (
        w["pieces"], w["ids"], w["starts"], w["ends"], [0, 2])
    assert_close(r["vectors"], w["vectors"][:, [0, 2]])
    for name in ("last", "masked_mean"):
      assert_close(r["pooled"][name], w["pooled"][name][[0, 2]])
  # Bad choices are refused before any work, with the shared check's line.
  bad = subprocess.run(
      [sys.executable, "run_embed.py", f"--init_checkpoint={tmp_path}/hf",
       f"--spiece_model_file={spiece_path(shared)}",
       f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/b.jsonl",
       "--layers=0,5", "--pooling=last"], cwd=ROOT, capture_output=True,
      text=True)
  assert (bad.returncode, bad.stderr.strip().splitlines()[-1]) == (
      2, "run_embed: --layers=0,5: layer 5: the model has layers 0 "
      "(embeddings) to 2 (-1 = 2)")
  assert not (tmp_path / "b.jsonl").exists()
