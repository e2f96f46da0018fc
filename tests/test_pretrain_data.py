"""Pretraining records: contents, the reader's masks, determinism, errors."""

import glob
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils.pretraining import examples as pd
from data_utils.pretraining import reference_examples as ref
from data_utils.atomic import temp_prefix
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from data_utils.pretraining.reader import (expand_example,
                                           load_record_infos,
                                           pretrain_dataset)
from data_utils.tokenization import CLS_ID, SEP_ID
from conftest import corpus_slice, early_result, run, shared_dir, spiece_path

CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)


def _perm_mask_by_the_rule(tokens, order, target_pos, target_mask, reuse_len):
  """Independent loop-by-loop statement of the original's `_local_perm` rule
  (per part; reuse part blind to the rest; the rest sees the reuse part)."""
  n = len(tokens)
  targets = {int(p) for p, m in zip(target_pos, target_mask) if m}
  mask = np.zeros((n, n), np.float32)
  for i in range(n):
    for j in range(n):
      if (i < reuse_len) != (j < reuse_len):
        mask[i, j] = 1.0 if i < reuse_len else 0.0
        continue
      j_hidden = j in targets or tokens[j] in (SEP_ID, CLS_ID)
      if not j_hidden:
        continue  # plain context: visible to everyone
      rank_j = order[j]
      rank_i = order[i] if (i in targets or tokens[i] in (SEP_ID, CLS_ID)) \
          else -1
      if i in targets:
        mask[i, j] = 1.0 if rank_i <= rank_j else 0.0
      else:
        mask[i, j] = 1.0 if rank_i + 1 <= rank_j else 0.0
  return mask


@pytest.fixture(scope="module")
def built(shared, tmp_path_factory):
  """Records from the first 1500 lines of the real corpus, two passes."""
  work = tmp_path_factory.mktemp("pretrain")
  corpus = corpus_slice(shared, work, 1500)
  sp = spiece_path(shared)
  infos = create_pretrain_data([corpus], CFG, str(work / "out"), sp,
                               pass_ids=[0, 1], seed=7)
  return {"dir": work, "sp": sp, "corpus": corpus, "infos": infos}


def _records(path, limit=None):
  spec = {k: tf.io.VarLenFeature(tf.float32 if k == "target_mask" else
                                 tf.int64)
          for k in ("input", "seg_id", "label", "perm_order", "target_pos",
                    "target_id", "target_mask")}
  out = []
  for raw in tf.data.TFRecordDataset(path).take(limit or -1):
    ex = tf.io.parse_single_example(raw, spec)
    out.append({k: tf.sparse.to_dense(v).numpy() for k, v in ex.items()})
  return out


def test_record_contents(built):
  info = built["infos"][0]
  path = os.path.join(built["dir"], "out", "tfrecords", info["filenames"][0])
  records = _records(path, limit=200)
  assert info["num_example"] == info["num_batch"] * CFG.bsz_per_host
  for rec in records:
    tokens, seg = rec["input"], rec["seg_id"]
    assert tokens.shape == (32,) and seg.shape == (32,)
    assert len(rec["target_pos"]) == len(rec["target_id"]) == 6
    # [reuse] A <sep> B <sep> <cls> with segments 0..0 1..1 2
    assert tokens[-1] == CLS_ID and seg[-1] == 2
    seps = np.flatnonzero(tokens[CFG.reuse_len:] == SEP_ID) + CFG.reuse_len
    a_sep = seps[0]
    assert tokens[30] == SEP_ID   # B's <sep>, just before <cls>
    np.testing.assert_array_equal(seg[:a_sep + 1], 0)
    np.testing.assert_array_equal(seg[a_sep + 1:31], 1)
    # targets: ascending, never functional, ids = the tokens there
    n = int(rec["target_mask"].sum())
    pos = rec["target_pos"][:n]
    assert np.all(np.diff(pos) > 0)
    assert not np.isin(tokens[pos], [SEP_ID, CLS_ID]).any()
    np.testing.assert_array_equal(rec["target_id"][:n], tokens[pos])
    np.testing.assert_array_equal(rec["target_pos"][n:], 0)
    # order: a permutation of each part, the same shuffle in every block
    order = rec["perm_order"]
    assert sorted(order[:16]) == list(range(16))
    assert sorted(order[16:]) == list(range(16))
    np.testing.assert_array_equal(order[8:16] - 8, order[:8])
    assert rec["label"][0] in (0, 1)
    # exactly num_predict positions were chosen, ceil(6/2) in the reuse part
    # (raw text has no <sep>/<cls>, so all are targets); in the rest, chosen
    # <sep>/<cls> are dropped: at most 3 of them
    assert (pos < 16).sum() == 3
    assert 3 <= (pos >= 16).sum() + 3 <= 6


def test_reader_masks_follow_the_original_rule(built):
  info = built["infos"][1]
  path = os.path.join(built["dir"], "out", "tfrecords", info["filenames"][0])
  records = _records(path, limit=60)
  ds = pretrain_dataset([path], CFG, batch_size=4, shuffle_files=False,
                        repeat=False)
  batches = list(ds.take(15).as_numpy_iterator())
  for k, rec in enumerate(records):
    got = {key: value[k % 4] for key, value in batches[k // 4].items()}
    np.testing.assert_array_equal(got["input_ids"], rec["input"])
    want = _perm_mask_by_the_rule(rec["input"], rec["perm_order"],
                                  rec["target_pos"], rec["target_mask"], 16)
    np.testing.assert_array_equal(got["perm_mask"], want)
    assert got["perm_mask"][:16, 16:].min() == 1   # reuse never sees the rest
    assert got["perm_mask"][16:, :16].max() == 0   # the rest sees all reuse
    for p in range(6):
      row = np.zeros(32)
      if rec["target_mask"][p]:
        row[rec["target_pos"][p]] = 1
      np.testing.assert_array_equal(got["target_mapping"][p], row)
    np.testing.assert_array_equal(
        got["input_q"], np.isin(np.arange(32),
                                rec["target_pos"][rec["target_mask"] > 0]))


def test_reader_reproduces_golden_local_perm(golden):
  """The original's `_local_perm` outputs in ../shared/golden/case_pretrain
  come back from a record holding only the order they imply."""
  case = golden("case_pretrain")
  reuse = case.run["reuse_len"]
  for b in range(4):
    tokens = case["raw_input"][b].astype(np.int64)
    func = np.isin(tokens, [SEP_ID, CLS_ID])
    targets = case["is_masked"][b].astype(bool) & ~func
    hidden = targets | func
    golden_mask = case["perm_mask_bm"][b]
    order = np.zeros(12, np.int64)
    for lo, hi in ((0, reuse), (reuse, 12)):
      idx = [i for i in range(lo, hi) if hidden[i]]
      # a target sees the hidden ones ranked below it; <sep>/<cls> also
      # themselves: that count gives the rank order back
      seen = {i: sum(golden_mask[i, j] == 0 for j in idx) - func[i]
              for i in idx}
      ranked = sorted(idx, key=lambda i: seen[i])
      plain = [i for i in range(lo, hi) if not hidden[i]]
      for r, i in enumerate(ranked + plain):
        order[i] = r
    pos = np.flatnonzero(targets)
    pad = 4 - len(pos)
    example = {
        "input": tf.constant(tokens), "seg_id": tf.constant(
            case["seg_id_bm"][b].astype(np.int64)),
        "label": tf.constant([0], tf.int64), "perm_order": tf.constant(order),
        "target_pos": tf.constant(np.r_[pos, np.zeros(pad, np.int64)]),
        "target_id": tf.constant(np.r_[tokens[pos], np.zeros(pad, np.int64)]),
        "target_mask": tf.constant(np.r_[np.ones(len(pos)), np.zeros(pad)],
                                   tf.float32)}
    got = expand_example(example, reuse)
    np.testing.assert_array_equal(got["perm_mask"], golden_mask)
    np.testing.assert_array_equal(got["target_mapping"],
                                  case["target_mapping_bm"][b])
    np.testing.assert_array_equal(got["target"], case["target_bm"][b])
    np.testing.assert_array_equal(got["target_mask"], case["target_mask_bm"][b])
    np.testing.assert_array_equal(got["input_q"], case["input_q_bm"][b])
    np.testing.assert_array_equal(got["input_ids"], case["input_k_bm"][b])


def test_bi_data_streams_and_reversed_halves():
  cfg = pd.PretrainDataConfig(seq_len=12, reuse_len=4, bsz_per_host=4,
                              num_core_per_host=1, bi_data=True,
                              num_predict=2, perm_size=4)
  data = np.arange(100, 300, dtype=np.int64)
  sent = (np.arange(200) // 5) % 2 == 0
  table = np.ones(400, bool)
  steps = list(ref.host_steps(data, sent, cfg, table,
                              np.random.default_rng(0)))
  assert len(steps) >= 2
  fwd = data[:200].reshape(2, 100)
  for t, step in enumerate(steps):
    reuse = [ex["input"][:4] for ex in step]
    np.testing.assert_array_equal(reuse[0], fwd[0, 4 * t:4 * t + 4])
    np.testing.assert_array_equal(reuse[1], fwd[1, 4 * t:4 * t + 4])
    np.testing.assert_array_equal(reuse[2], fwd[0, ::-1][4 * t:4 * t + 4])
    np.testing.assert_array_equal(reuse[3], fwd[1, ::-1][4 * t:4 * t + 4])


def test_two_cores_hold_forward_then_reversed_each():
  cfg = pd.PretrainDataConfig(seq_len=12, reuse_len=4, bsz_per_host=8,
                              num_core_per_host=2, bi_data=True,
                              num_predict=2, perm_size=4)
  rows, _ = pd.stream_layout(np.arange(80), np.zeros(80, bool), cfg)
  fwd = np.arange(80).reshape(4, 20)
  # core 0: streams 0,1 then reversed 0,1; core 1: streams 2,3 then reversed
  expected = [fwd[0], fwd[1], fwd[0, ::-1], fwd[1, ::-1],
              fwd[2], fwd[3], fwd[2, ::-1], fwd[3, ::-1]]
  np.testing.assert_array_equal(rows, np.stack(expected))


@pytest.mark.parametrize("piece_count", [False, True])
def test_span_sampling_exact_budget_and_word_spans(piece_count):
  cfg = pd.PretrainDataConfig(num_predict=10, original_ngram_count=piece_count,
                              mask_alpha=6, mask_beta=1)
  rng = np.random.default_rng(3)
  # word starts every 3 pieces
  tokens = np.arange(200) % 50
  table = (np.arange(50) % 3) == 0
  partial_spans = []
  for _ in range(50):
    mask = ref.sample_span_mask(tokens, 10, cfg, table, rng)
    assert mask.sum() == 10
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(int), 0]))
    lengths = edges[1::2] - edges[::2]
    # every span starts on a word start
    assert table[tokens[edges[::2]]].all()
    partial_spans.append(int((lengths % 3 != 0).sum()))
  if piece_count:
    # n pieces per n-gram: spans end inside words all the time
    assert sum(partial_spans) > 50
  else:
    # n whole words (3 pieces each); only the budget may cut the last span
    assert max(partial_spans) <= 1


def test_determinism_and_rerun_keeps_files(built, tmp_path):
  first = built["infos"][0]
  again = create_pretrain_data([built["corpus"]], CFG, str(tmp_path / "a"),
                               built["sp"], pass_ids=[0], seed=7)
  a = os.path.join(built["dir"], "out", "tfrecords", first["filenames"][0])
  b = os.path.join(tmp_path, "a", "tfrecords", again[0]["filenames"][0])
  with open(a, "rb") as f, open(b, "rb") as g:
    assert f.read() == g.read()
  other = create_pretrain_data([built["corpus"]], CFG, str(tmp_path / "b"),
                               built["sp"], pass_ids=[0], seed=8)
  c = os.path.join(tmp_path, "b", "tfrecords", other[0]["filenames"][0])
  with open(a, "rb") as f, open(c, "rb") as g:
    assert f.read() != g.read()
  # passes differ from each other
  p1 = os.path.join(built["dir"], "out", "tfrecords",
                    built["infos"][1]["filenames"][0])
  with open(a, "rb") as f, open(p1, "rb") as g:
    assert f.read() != g.read()
  # a re-run with the same settings keeps what is built; a stale temp file
  # of an interrupted run (a writer that is gone) is removed
  gone = subprocess.Popen(["true"])
  gone.wait()
  stale = os.path.join(tmp_path, "a", "tfrecords", temp_prefix().replace(
      f"-{os.getpid()}-", f"-{gone.pid}-") + "junk")
  open(stale, "w").close()
  mtime = os.path.getmtime(b)
  assert create_pretrain_data([built["corpus"]], CFG, str(tmp_path / "a"),
                              built["sp"], pass_ids=[0], seed=7) == []
  assert os.path.getmtime(b) == mtime
  assert not os.path.exists(stale)


def test_record_info_checked_by_reader(built):
  tfdir = os.path.join(built["dir"], "out", "tfrecords")
  expected = dict(CFG.to_dict())
  info = load_record_infos(tfdir, "train", expected)
  assert info["num_batch"] == sum(i["num_batch"] for i in built["infos"])
  assert len(load_record_infos(tfdir, "train", expected, num_passes=1)
             ["filenames"]) == 1
  with pytest.raises(pd.DataError, match=r"record_info-train-0-0.*built with "
                     r"seq_len=32, this run asks seq_len=64"):
    load_record_infos(tfdir, "train", dict(expected, seq_len=64))
  with pytest.raises(pd.DataError, match="no record_info-dev"):
    load_record_infos(tfdir, "dev", expected)


@pytest.mark.parametrize("changes,message", [
    ({"reuse_len": 29}, r"reuse_len \(29\) must be < seq_len - 3 \(29\)"),
    ({"bsz_per_host": 6, "num_core_per_host": 2},
     r"bi_data needs bsz_per_host \(6\) divisible by 2 x num_core_per_host"),
    ({"perm_size": 5}, r"perm_size \(5\) must divide reuse_len"),
])
def test_bad_settings(changes, message):
  cfg = pd.PretrainDataConfig(**dict(CFG.to_dict(), **changes))
  with pytest.raises(pd.DataError, match=message):
    cfg.validate()


def test_bad_inputs(built, tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n")
  with pytest.raises(pd.DataError, match="no example could be built"):
    create_pretrain_data([str(empty)], CFG, str(tmp_path / "o1"), built["sp"])
  blank = tmp_path / "blank.txt"
  blank.write_text("")
  with pytest.raises(pd.DataError, match="input is empty"):
    create_pretrain_data([str(blank)], CFG, str(tmp_path / "o2"), built["sp"])
  short = tmp_path / "short.txt"
  short.write_text("One short document.\n\nAnd another.\n")
  with pytest.raises(pd.DataError, match="no example could be built"):
    create_pretrain_data([str(short)], CFG, str(tmp_path / "o3"), built["sp"])
  with pytest.raises(pd.DataError, match="no input file"):
    create_pretrain_data([], CFG, str(tmp_path / "o4"), built["sp"])
  ids = tmp_path / "ids.txt"
  ids.write_text("12 13 14\n15 x 16\n")
  with pytest.raises(pd.DataError, match=r"ids.txt:2: not a line of token ids"):
    create_pretrain_data([str(ids)], CFG, str(tmp_path / "o5"), built["sp"],
                         from_raw_text=False)
  # nothing half-written is left behind
  for out in ("o1", "o2", "o3", "o5"):
    assert glob.glob(str(tmp_path / out / "tfrecords" / "*")) == []


def cli_error_runs(tmp_path):
  """The builder's command line twice, each time wrong (an early run: see
  conftest); the corpus is `built`'s."""
  (tmp_path / "in").mkdir()
  (tmp_path / "out").mkdir()
  corpus = corpus_slice(shared_dir(), tmp_path / "in", 1500)
  cmd = [sys.executable, "-m",
         "data_utils.pretraining.create_pretrain_data",
         f"--input_glob={corpus}", f"--save_dir={tmp_path / 'out'}",
         "--seq_len=16", "--reuse_len=13", "--perm_size=13"]
  return [run(cmd + ["--sp_path=/nonexistent/spiece.model"]),
          run(cmd[:5] + ["--sp_path=/nonexistent/spiece.model"])]


@pytest.mark.early("cli_error_runs")
@pytest.mark.usefixtures("shared")
def test_cli_errors_are_one_line():
  runs = early_result(cli_error_runs)
  res = runs[0]
  assert res.returncode == 2
  last = res.stderr.strip().splitlines()[-1]
  assert last.startswith("create_pretrain_data: reuse_len (13) must be < "
                         "seq_len - 3")
  assert "Traceback" not in res.stderr
  res = runs[1]
  assert res.returncode == 2 and "Traceback" not in res.stderr
  assert res.stderr.strip().splitlines()[-1] == (
      "create_pretrain_data: /nonexistent/spiece.model: SentencePiece model "
      "not found")
