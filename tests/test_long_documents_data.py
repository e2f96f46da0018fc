"""Long-document features (`--max_segments`): the layout worked by hand and
against a reference that truncates by popping, one segment equal to the
original's features, the counts of long and truncated IMDB reviews, the
cache key, and the flags' one-line errors."""

import json
import os
import sys

import pytest

import xlnet_tf as xt
from data_utils.classification import features as cf
from data_utils.classification import reader as cd
from data_utils.errors import UsageError, run_main
from data_utils.tokenization import (CLS_ID, SEG_ID_A, SEG_ID_B, SEG_ID_CLS,
                                     SEG_ID_PAD, SEP_ID)
from xlnet_tf.training import TrainOptions
from xlnet_tf.tasks.classification.workflow import (ClassifierOptions,
                                           ClassifierWorkflow,
                                           check_segment_options)
from cache_cases import LABELS, TINY, file_bytes, write_sst2
from conftest import (early_result, refused, rte_flags, run, shared_dir,
                      spiece_path)


def _segments(f, s):
  """The record's features cut into its segments of `s` tokens."""
  return [{k: v[i:i + s] for k, v in f.items() if isinstance(v, list)}
          for i in range(0, len(f["input_ids"]), s)]


# 1. The layout, worked by hand ------------------------------------------------
def test_single_text_by_hand():
  doc = list(range(11, 24))  # 13 pieces; S=4, N=3: L=12 keeps 10
  f = cf.convert_document(doc, None, 4, 3)
  assert f["input_ids"] == [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 4, 3]
  assert f["segment_ids"] == [0] * 11 + [2]
  assert f["input_mask"] == [0.0] * 12
  f = cf.convert_document(doc, None, 4, 3, keep_end=True)
  assert f["input_ids"] == [14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 4, 3]
  assert cf.length_stats(13, 0, 4, 3) == {"longer_than_segment": 1,
                                          "truncated": 1}
  # Exactly L-2 pieces: nothing cut, no padding, either end.
  f = cf.convert_document(doc[:10], None, 4, 3, keep_end=True)
  assert f["input_ids"] == doc[:10] + [SEP_ID, CLS_ID]
  assert cf.length_stats(10, 0, 4, 3) == {"longer_than_segment": 1,
                                          "truncated": 0}


def test_short_document_gets_leading_empty_segments():
  f = cf.convert_document([11, 12, 13], None, 4, 3, keep_end=True)
  assert f["input_ids"] == [0] * 7 + [11, 12, 13, 4, 3]
  assert f["segment_ids"] == [4] * 7 + [0, 0, 0, 0, 2]
  assert f["input_mask"] == [1.0] * 7 + [0.0] * 5
  first, second, last = _segments(f, 4)
  assert first == {"input_ids": [0] * 4, "segment_ids": [SEG_ID_PAD] * 4,
                   "input_mask": [1.0] * 4}  # fully masked
  assert second["input_mask"] == [1.0, 1.0, 1.0, 0.0]
  assert last["input_ids"] == [12, 13, SEP_ID, CLS_ID]
  assert cf.length_stats(3, 0, 4, 3) == {"longer_than_segment": 1,
                                         "truncated": 0}
  assert cf.length_stats(2, 0, 4, 3) == {"longer_than_segment": 0,
                                         "truncated": 0}


def test_pair_keeps_the_second_text_in_the_last_segment():
  a, b = list(range(11, 20)), [91, 92, 93, 94, 95]  # S=5, N=2: L=10
  f = cf.convert_document(a, b, 5, 2)  # B keeps S-3=2, A keeps 10-3-2=5
  assert f["input_ids"] == [11, 12, 13, 14, 15, 4, 91, 92, 4, 3]
  assert f["segment_ids"] == [0] * 6 + [1, 1, 1, 2]
  assert f["input_mask"] == [0.0] * 10
  assert cf.convert_document(a, b, 5, 2, keep_end=True)["input_ids"] == [
      15, 16, 17, 18, 19, 4, 91, 92, 4, 3]  # keep_end is for A only
  f = cf.convert_document(a, [91], 5, 2)  # B whole, A keeps 6
  assert f["input_ids"] == [11, 12, 13, 14, 15, 16, 4, 91, 4, 3]
  f = cf.convert_document([11], [91], 5, 2)
  assert f["input_ids"] == [0] * 5 + [11, 4, 91, 4, 3]
  assert f["segment_ids"] == [4] * 5 + [0, 0, 1, 1, 2]
  assert cf.length_stats(9, 5, 5, 2) == {"longer_than_segment": 1,
                                         "truncated": 1}
  assert cf.length_stats(5, 2, 5, 2) == {"longer_than_segment": 1,
                                         "truncated": 0}
  assert cf.length_stats(1, 1, 5, 2) == {"longer_than_segment": 0,
                                         "truncated": 0}
  # One segment: the original's longest-first truncation.
  assert cf.length_stats(1, 2, 5) == {"longer_than_segment": 1,
                                      "truncated": 1}
  with pytest.raises(ValueError, match="keep_end needs max_segments > 1"):
    cf.convert_document(a, b, 5, 1, keep_end=True)


# 2. Real texts against a reference that pops ----------------------------------
def _reference(a, b, s, n, keep_end):
  """The layout by popping one piece at a time, independent of features.py."""
  a, b, total = list(a), list(b or []), s * n
  if n == 1 and b:
    while len(a) + len(b) > s - 3:
      (a if len(a) > len(b) else b).pop()
  while len(b) > s - 3:
    b.pop()
  while len(a) + len(b) > total - (3 if b else 2):
    a.pop(0) if keep_end else a.pop()
  real = a + [SEP_ID] + (b + [SEP_ID] if b else []) + [CLS_ID]
  segs = [SEG_ID_A] * (len(a) + 1) + [SEG_ID_B] * (len(b) + 1 if b else 0)
  pad = total - len(real)
  return {"input_ids": [0] * pad + real,
          "segment_ids": [SEG_ID_PAD] * pad + segs + [SEG_ID_CLS],
          "input_mask": [1.0] * pad + [0.0] * len(real)}


def test_real_texts_equal_the_reference(shared, sp_tokenizer):
  glue = os.path.join(shared, "data", "glue")
  imdb = cd.read_examples("imdb", os.path.join(shared, "data", "imdb",
                                               "aclImdb"), "dev")
  texts = [(sp_tokenizer.encode_ids(e.text_a), None)
           for e in imdb[:60] + imdb[-60:]]
  texts += [(sp_tokenizer.encode_ids(e.text_a), None) for e in
            cd.read_examples("sst-2", os.path.join(glue, "SST-2"), "dev")[:60]]
  texts += [(sp_tokenizer.encode_ids(e.text_a),
             sp_tokenizer.encode_ids(e.text_b)) for e in
            cd.read_examples("mrpc", os.path.join(glue, "MRPC"), "dev")[:80]]
  for a, b in texts:
    for s, n, keep_end in ((16, 1, False), (64, 1, False), (16, 4, False),
                           (16, 4, True), (32, 3, True), (128, 4, False)):
      got = cf.convert_document(a, b, s, n, keep_end)
      assert got == _reference(a, b, s, n, keep_end), (s, n, keep_end)
      if n == 1:  # one segment: the original's features, bit for bit
        assert got == cf.convert_example(a, b, s)
      last = _segments(got, s)[-1]
      assert last["input_ids"][-2:] == [SEP_ID, CLS_ID]
      if b and n > 1:  # B, its <sep> and <cls> all in the last segment
        assert got["segment_ids"].count(SEG_ID_B) == \
            last["segment_ids"].count(SEG_ID_B) == min(len(b), s - 3) + 1


# 3. Counts on the shared IMDB reviews, the cache key, the flags --------------
def _workflow(tmp_path, task, data_dir, sp, length, segments=1, mem_len=0,
              keep_end=False, bptt=1, out="out"):
  return ClassifierWorkflow(ClassifierOptions(
      config=TINY, run=xt.RunOptions(mem_len=mem_len),
      train=TrainOptions(model_dir=str(tmp_path / "model"), train_steps=1),
      task_name=task, data_dir=str(data_dir), output_dir=str(tmp_path / out),
      spiece_model_file=sp, max_seq_length=length, max_segments=segments,
      keep_end=keep_end, bptt_segments=bptt))


def test_counts_of_long_and_truncated_imdb_reviews(shared, sp_tokenizer,
                                                   tmp_path):
  root = os.path.join(shared, "data", "imdb", "aclImdb")
  lengths = [len(sp_tokenizer.encode_ids(e.text_a))
             for e in cd.read_examples("imdb", root, "dev")]
  wf = _workflow(tmp_path, "imdb", root, spiece_path(shared), 128, 4, 128)
  info = wf.features("dev", pad_to=32)
  want = {"longer_than_segment": sum(n > 126 for n in lengths),
          "truncated": sum(n > 4 * 128 - 2 for n in lengths)}
  assert info["stats"] == want and info["num_examples"] == 2500
  assert 0 < want["truncated"] < want["longer_than_segment"] < 2500
  with open(info["path"] + ".json") as f:
    assert json.load(f)["stats"] == want
  assert wf.documents(info) == dict(want, segment_length=128, max_segments=4,
                                    keep_end=False)
  assert wf.features("dev", pad_to=32)["stats"] == want  # reused, kept


def test_cache_key_follows_the_settings(shared, tmp_path):
  sp = spiece_path(shared)
  write_sst2(tmp_path / "data", LABELS)

  def path(**kw):
    return _workflow(tmp_path, "sst-2", tmp_path / "data", sp, 16,
                     **kw).features("train")["path"]
  one = path()
  # The name one-segment caches had before segments existed.
  assert os.path.basename(one) == "sst-2.train.len-16.f757598e3ff3.tf_record"
  two = path(segments=2, mem_len=16)
  assert os.path.basename(two).startswith("sst-2.train.len-32.")
  assert len({one, two, path(segments=2, mem_len=16, keep_end=True),
              path(segments=4, mem_len=16)}) == 4
  # Memory and back-propagation do not shape the records.
  assert path(segments=2, mem_len=8, bptt=2) == two
  # A cache from before the counts existed: built again, same bytes.
  before = file_bytes(one)
  with open(one + ".json") as f:
    info = json.load(f)
  del info["stats"]
  with open(one + ".json", "w") as f:
    json.dump(info, f)
  again = _workflow(tmp_path, "sst-2", tmp_path / "data", sp,
                    16).features("train")
  assert again["stats"] == {"longer_than_segment": 0, "truncated": 0}
  assert file_bytes(one) == before


FLAG_ERRORS = [
    (["--max_segments=4"], "--mem_len=0: must be positive with "
     "--max_segments=4 (the memory carries the earlier segments)"),
    (["--keep_end"], "--keep_end: needs --max_segments > 1 (one window keeps "
     "the beginning, as the original)"),
]


def flag_runs(work):
  """run_classifier.py with each case's flags, each in a folder of its own
  (an early run: see conftest): flags -> (folder, result)."""
  runs = {}
  for k, (flags, _) in enumerate(FLAG_ERRORS):
    tmp_path = work / str(k)
    tmp_path.mkdir()
    config = tmp_path / "xlnet_config.json"
    TINY.to_json(str(config))
    args = rte_flags(shared_dir(), tmp_path, str(config)) + ["--do_train"]
    runs[tuple(flags)] = tmp_path, run(
        [sys.executable, "run_classifier.py", *args, *flags], 600)
  return runs


@pytest.mark.early("flag_runs")
@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("flags, line", FLAG_ERRORS)
def test_flag_errors_are_one_line(flags, line):
  tmp_path, res = early_result(flag_runs)[tuple(flags)]
  assert refused(res) == f"run_classifier: {line}"
  assert not os.path.exists(tmp_path / "data")  # refused before any work


def test_every_segment_option_error(capsys, tmp_path):
  # What run_classifier.py prints for each (two of them run above).
  check_segment_options(4, 128, 4, True)
  check_segment_options(1, 0, 1, False)
  for args, line in (
      ((0, 0, 1, False), "--max_segments=0: must be at least 1"),
      ((1, -1, 1, False), "--mem_len=-1: must be at least 0"),
      ((4, -3, 1, False), "--mem_len=-3: must be at least 0"),
      ((4, 0, 1, True), "--mem_len=0: must be positive with "
       "--max_segments=4 (the memory carries the earlier segments)"),
      ((4, 32, 5, False), "--bptt_segments=5: must be between 1 and "
       "--max_segments=4"),
      ((2, 8, 0, False), "--bptt_segments=0: must be between 1 and "
       "--max_segments=2"),
      ((1, 0, 1, True), "--keep_end: needs --max_segments > 1 (one window "
       "keeps the beginning, as the original)")):
    assert run_main("run_classifier",
                    lambda: check_segment_options(*args)) == 2
    assert capsys.readouterr().err == f"run_classifier: {line}\n"
  with pytest.raises(UsageError, match="^--mem_len=0: must be positive"):
    _workflow(tmp_path, "imdb", "unused", "unused", 128, segments=4)
