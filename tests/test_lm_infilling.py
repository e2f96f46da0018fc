"""Infilling (data_utils/lm/infill.py, xlnet_tf/tasks/infilling.py,
run_infill.py) on a tiny random XLNet: one hole of one piece is the
two-stream prediction for that position (reference built by hand); every
fill's log-probability equals one two-stream pass of the filled text with
its fill order; "confident" fills the most probable position first; batching
and left padding change nothing (greedy or sampled); `<mask>` pieces and
character spans parse, encode and fill back exactly; the script writes what
the API returns and refuses bad input in one line.
"""

import contextlib
import io
import json
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import ROOT, assert_close, spiece_path
from entry_points import own_flags
from data_utils.errors import UserError, run_main
from data_utils.lm import infill
from data_utils.tokenization import CLS_ID, MASK_ID, SEP_ID
from xlnet_tf import pretrained
from xlnet_tf.tasks.language_model import infilling
from xlnet_tf.tasks.language_model.passes import lm_logits, two_stream_pass

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_infill  # noqa: E402  pylint: disable=wrong-import-position

VOCAB = 60


def tiny_lm(vocab=VOCAB, seed=0):
  config = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                          d_inner=32, n_token=vocab, ff_activation="gelu",
                          untie_r=True)
  lm = xt.XLNetPretrainer(xt.XLNetModel(
      config, xt.RunOptions(dropout=0.0, dropatt=0.0)))
  lm.encoder(np.zeros((1, 2), np.int32))
  rng = np.random.RandomState(seed)
  for name, var in sorted(lm.original_weights().items()):
    gain = 1.0 if name.endswith("gamma") else 0.0
    var.assign(rng.normal(gain, 0.3, var.shape.as_list()).astype("f4"))
  enc = lm.encoder
  enc.mask_emb.assign(rng.normal(0, 0.3, enc.mask_emb.shape).astype("f4"))
  return lm


@pytest.fixture(scope="module")
def lm():
  return tiny_lm(seed=2)  # a seed whose fills vary


@pytest.fixture(scope="module")
def filler(lm):
  return infilling.Infiller(lm, graph=False)


ROWS = [[11, 12, 13, 14, 15, 16], [20, 21, 22], [30, 31, 32, 33, 34, 35, 36],
        [40, 41]]
HOLES = [[1, 3, 4], [2], [0, 1, 5, 6], []]


def test_one_piece_is_the_two_stream_prediction_by_hand(lm, filler):
  row, hole = [11, 12, 13, 14, 15], 2
  ids = np.array([row + [SEP_ID, CLS_ID]], np.int32)
  length = ids.shape[1]
  perm = np.zeros((1, length, length), np.float32)
  perm[0, :, hole] = 1.0  # nobody sees the hole, its own query included
  mapping = np.zeros((1, 1, length), np.float32)
  mapping[0, 0, hole] = 1.0
  ids[0, hole] = MASK_ID
  out = lm.encoder(ids, perm_mask=perm, target_mapping=mapping,
                   input_q=mapping[:, 0])
  log_p = tf.nn.log_softmax(lm_logits(lm, out["sequence_output"]))[0, 0]
  best = int(np.argmax(log_p.numpy()[infilling.FIRST_ORDINARY_ID:])) + \
      infilling.FIRST_ORDINARY_ID
  for placeholder in (MASK_ID, 50):  # the hole's id is never read
    for order in infilling.FILL_ORDERS:
      got = filler.fill_ids([row[:hole] + [placeholder] + row[hole + 1:]],
                            [[hole]], order=order)[0]
      assert got["positions"] == [hole] and got["tokens"] == [best]
      assert got["ids"] == row[:hole] + [best] + row[hole + 1:]
      assert_close(got["log_probs"], [log_p[best]])
  with pytest.raises(ValueError, match=r"row 0: holes \[2, 2\] are not "):
    filler.fill_ids([row], [[2, 2]])


def _fill_order_pass(lm, result, length):
  """log p of each fill from ONE two-stream pass over the filled text with
  its fill order (the k-th filled piece the k-th target)."""
  order = np.full((1, length + 2), -1, np.int32)
  for k, p in enumerate(result["positions"]):
    order[0, p] = k
  ids = np.array([result["ids"] + [SEP_ID, CLS_ID]], np.int32)
  out = two_stream_pass(lm, ids, order)
  log_p = tf.nn.log_softmax(out["logits"])[0].numpy()
  return [log_p[k, t] for k, t in enumerate(result["tokens"])]


@pytest.mark.parametrize("order,strategy", [
    ("left_to_right", "greedy"), ("confident", "greedy"),
    ("confident", "sample")])
def test_fills_equal_one_pass_in_fill_order(lm, filler, order, strategy):
  results = filler.fill_ids(ROWS, HOLES, order=order, strategy=strategy,
                            temperature=2.0, top_k=20, seed=3)
  for row, holes, result in zip(ROWS, HOLES, results):
    assert sorted(result["positions"]) == holes
    if order == "left_to_right":
      assert result["positions"] == holes
    assert all(t >= infilling.FIRST_ORDINARY_ID for t in result["tokens"])
    assert [result["ids"][p] for p in result["positions"]] == \
        result["tokens"]
    assert [t for p, t in enumerate(result["ids"]) if p not in holes] == [
        t for p, t in enumerate(row) if p not in holes]
    if holes:
      assert_close(result["log_probs"],
                   _fill_order_pass(lm, result, len(row)))


def test_confident_fills_the_most_probable_position_first(lm, filler):
  row, holes = ROWS[2], HOLES[2]
  result = filler.fill_ids([row], [holes], order="confident")[0]
  ids = np.array([row + [SEP_ID, CLS_ID]], np.int32)
  for k, chosen in enumerate(result["positions"]):
    open_now = [p for p in holes if p not in result["positions"][:k]]
    order = np.full(ids.shape, -1, np.int32)
    for j, p in enumerate(result["positions"][:k]):
      order[0, p] = j
      ids[0, p] = result["tokens"][j]
    order[0, open_now] = k
    out = two_stream_pass(lm, ids, order,
                          output_positions=np.array([open_now]))
    best = tf.nn.log_softmax(out["logits"])[0].numpy()[
        :, infilling.FIRST_ORDINARY_ID:].max(axis=1)
    assert open_now[int(np.argmax(best))] == chosen


def test_batching_and_padding_change_no_fill(lm, filler):
  for strategy in infilling.STRATEGIES:
    filler.batch_size = 1
    alone = [filler.fill_ids([r], [h], "confident", strategy, seed=7 + i)[0]
             for i, (r, h) in enumerate(zip(ROWS, HOLES))]
    filler.batch_size = 3
    batched = filler.fill_ids(ROWS, HOLES, "confident", strategy, seed=7)
    for a, b in zip(alone, batched):
      assert (a["ids"], a["positions"]) == (b["ids"], b["positions"])
      assert_close(b["log_probs"], a["log_probs"], name=strategy)


def test_sample_piece_filters():
  log_p = np.log([0.05, 0.5, 0.3, 0.15])
  rng = np.random.default_rng(0)
  draws = {infilling.sample_piece(log_p, rng, top_p=0.7) for _ in range(200)}
  assert draws == {1, 2}
  draws = {infilling.sample_piece(log_p, rng, top_k=3) for _ in range(200)}
  assert draws == {1, 2, 3}
  assert infilling.sample_piece(np.array([-np.inf, 0.0, -np.inf]), rng) == 1


def test_masks_and_spans_parse_encode_and_fill(sp_tokenizer):
  tok = sp_tokenizer
  item = infill.parse_masks("The <mask> sat on the <mask><mask>.")
  ids, holes = infill.encode(tok, item)
  assert [tok.id_to_piece(i) for i in ids] == [
      "\u2581The", "<mask>", "\u2581sat", "\u2581on", "\u2581the", "<mask>",
      "<mask>", "."]
  assert holes == [[1], [5, 6]]
  assert infill.fill_text(item, [["\u2581cat"], ["\u2581m", "at"]]) == \
      "The cat sat on the mat."
  spans = infill.parse_spans("The cat sat on the mat.", [[4, 7], [19, 22]])
  assert infill.encode(tok, spans) == (ids[:5] + [MASK_ID] + ids[7:],
                                       [[1], [5]])
  inserted = infill.parse_spans("The cat", [[3, 3, 2]])
  assert infill.encode(tok, inserted)[1] == [[1, 2]]
  assert infill.fill_text(inserted, [["\u2581big", "\u2581black"]]) == \
      "The big black cat"
  glued = infill.encode(tok, infill.parse_masks("un<mask>able"))[0]
  assert [tok.id_to_piece(i) for i in glued] == ["\u2581un", "<mask>",
                                                 "able"]
  assert infill.parse_span_flag("4:7,19:22:3") == [[4, 7], [19, 22, 3]]
  for spans, message in [
      ([[4, 30]], "x: [4, 30]: outside the text (0..23)"),
      ([[4, 7], [5, 9]], "x: [5, 9]: overlaps or precedes the span before "
       "it (spans go left to right)"),
      ([[4, 4]], "x: [4, 4]: an empty span needs a number of pieces"),
      ([[4, 7, 0]], "x: [4, 7, 0]: pieces must be at least 1"),
      ([["a", 7]], 'x: ["a", 7]: not [start, end] or [start, end, pieces] '
       "(integers)")]:
    with pytest.raises(UserError) as e:
      infill.parse_spans("The cat sat on the mat.", spans, "x")
    assert str(e.value) == message


def _flags(**kw):
  values = dict(init_checkpoint=None, model_config_path=None,
                spiece_model_file=None, uncased=False, clamp_len=None,
                input_file=None, text_column=None, batch_size=2,
                overwrite=False, text=None, spans=None,
                order="left_to_right", strategy="greedy", temperature=1.0,
                top_k=0, top_p=1.0, seed=0, max_seq_length=512,
                output_file=None)
  values.update(kw)
  return types.SimpleNamespace(**values)


def _run(f):
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main("run_infill", lambda: run_infill.infill_main(f))
  return code, err.getvalue().strip()


def test_run_infill_writes_the_api_fills_and_refuses_bad_input(
    shared, sp_tokenizer, tmp_path):
  model_dir = str(tmp_path / "hf")
  lm = tiny_lm(vocab=32000, seed=1)
  pretrained.save_hf_weights(lm, model_dir)
  data = tmp_path / "in.jsonl"
  rows = [{"text": "The <mask> sat on the <mask><mask>."},
          {"text": "A dog ran home.", "spans": [[2, 5], [15, 15, 2]]}]
  data.write_text("".join(json.dumps(r) + "\n" for r in rows))
  out = tmp_path / "fills.jsonl"
  assert set(vars(_flags())) == own_flags("run_infill.py")
  base = dict(init_checkpoint=model_dir, spiece_model_file=spiece_path(
      shared), input_file=str(data), output_file=str(out), order="confident")
  assert _run(_flags(**base)) == (0, "")
  items = infill.read_infill_file(str(data))
  again, _ = pretrained.load_language_model(model_dir)
  expected = infilling.infill_texts(
      infilling.Infiller(again, graph=False), sp_tokenizer, items,
      order="confident")
  got = [json.loads(l) for l in out.read_text().splitlines()]
  assert [g["text"] for g in got] == [r["text"] for r in rows]
  for g, e in zip(got, expected):
    assert g["filled"] == e["filled"] and g["count"] == e["count"]
    assert [(h["start"], h["end"], h["pieces"], h["steps"])
            for h in g["holes"]] == [(h["start"], h["end"], h["pieces"],
                                      h["steps"]) for h in e["holes"]]
    assert_close([x for h in g["holes"] for x in h["log_probs"]],
                 [x for h in e["holes"] for x in h["log_probs"]])
  assert [len(h["pieces"]) for g in got for h in g["holes"]] == [1, 2, 1, 2]
  before = out.read_text()
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"text": "a<mask>"}\n\n{"text": "ab", "spans": [[1, 0]]}\n')
  nothing = tmp_path / "nothing.jsonl"
  nothing.write_text('{"text": "a <mask>"}\n{"text": "Nothing to fill."}\n')
  for kw, line in [
      ({}, f"--output_file={out}: exists; pass --overwrite to replace it"),
      ({"output_file": None, "order": "random"},
       "--order=random: must be one of left_to_right, confident"),
      ({"output_file": None, "top_p": 0.0},
       "--top_p=0.0: must be in (0, 1]"),
      ({"output_file": None, "text": "a <mask>"},
       "give exactly one of --input_file and --text"),
      ({"output_file": None, "input_file": str(bad)},
       f"{bad}:3: spans: [1, 0]: start after end"),
      ({"output_file": None, "input_file": str(nothing)},
       f"{nothing}:2: nothing to fill (no <mask> marker, no spans)"),
      ({"output_file": None, "max_seq_length": 8},
       f"--input_file={data}: text 1: 10 pieces with the markers, more than "
       "max_seq_length 8"),
      ({"output_file": None, "input_file": None, "text": "ab",
        "spans": "1"}, "--spans=1: '1' is not start:end or start:end:pieces")]:
    assert _run(_flags(**{**base, **kw})) == (2, f"run_infill: {line}")
  assert out.read_text() == before
