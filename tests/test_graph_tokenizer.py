"""The in-graph tokenizer gives the Python path's ids, and survives saving.

Reference: `SentencePieceTokenizer.encode_ids` (data_utils/tokenization.py)
on the released XLNet model; targeted strings, real text (corpus, SST-2 dev,
IMDB reviews), every code point through `preprocess`, a SavedModel round
trip and what it embeds of the model, and a model whose pieces hold a
character that is no piece of its own.
"""

import glob
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.protobuf import saved_model_pb2

from data_utils.graph_tokenizer import GraphTokenizer
from data_utils.tokenization import (SentencePieceTokenizer, TokenizerError,
                                     preprocess_text)

TARGETED = [
    "In 1,234,567, the 92000, dollars",
    "born in 2000, and",
    "x2000, ab12,cd 3, 1,",
    "falsé naïve Café résumé",
    "``like this'' and ''that``",
    "a <eop> b<eop>c <eop>",
    "  many   spaces\tand\t\ttabs \n and\u3000odd\u00a0ones\u2009 ",
    "",
    " \t ",
    "Ὀδυσσεύς ΟΔΥΣΣΕΥΣ ΑΣ. Σ",   # final sigma
    "İstanbul ǅ ﬁ ｆｕｌｌ ① ²",    # multi-code-point and compat mappings
    "a\x00b Σ\x00Σ ΑΣ\x00",        # U+0000 stops regex_split
    "\u2c2f \ua7c0 \U00010570",    # capitals new in Unicode 14
    "\U0001ccd6 \U000105c9",       # Unicode 16, unassigned for Python 3.11
    "x\u2581y \u2581 1\u2581,",    # a literal "▁" in the text
    "١٢٣, ۳, 𝟚,",                  # non-ASCII digits before a comma
]


@pytest.fixture(scope="module")
def model_path(shared):
  return os.path.join(shared, "data", "spiece", "spiece.model")


@pytest.fixture(scope="module")
def tokenizers(model_path):
  cache = {}

  def get(lower, keep_accents=False):
    key = (lower, keep_accents)
    if key not in cache:
      cache[key] = (GraphTokenizer(model_path, lower, keep_accents),
                    SentencePieceTokenizer(model_path, lower, keep_accents))
    return cache[key]
  return get


@pytest.fixture(scope="module")
def real_text(shared):
  data = os.path.join(shared, "data")
  with open(os.path.join(data, "corpus", "gutenberg_state_union.txt"),
            encoding="utf-8") as f:
    corpus = f.read().split("\n")[:2000]
  with open(os.path.join(data, "glue", "SST-2", "dev.tsv"),
            encoding="utf-8") as f:
    sst = [line.split("\t")[0] for line in f.read().split("\n")[1:] if line]
  imdb = []
  for part in ("train/pos", "train/neg", "test/pos", "test/neg"):
    files = sorted(glob.glob(os.path.join(data, "imdb", "aclImdb", part,
                                          "*.txt")))[:100]
    for name in files:
      with open(name, encoding="utf-8") as f:
        imdb.append(f.read())
  assert len(corpus) == 2000 and len(sst) == 872 and len(imdb) == 400
  return {"corpus": corpus, "sst2_dev": sst, "imdb": imdb}


def mismatches(graph, python, texts):
  got = graph.tokenize(tf.constant(texts)).to_list()
  return [t for t, ids in zip(texts, got) if ids != python.encode_ids(t)]


@pytest.mark.parametrize("lower,keep_accents",
                         [(False, False), (True, False), (False, True),
                          (True, True)])
def test_targeted_strings(tokenizers, lower, keep_accents):
  graph, python = tokenizers(lower, keep_accents)
  got = graph.tokenize(tf.constant(TARGETED)).to_list()
  for text, ids in zip(TARGETED, got):
    assert ids == python.encode_ids(text), (text, python.encode_pieces(text))
  pre = graph.preprocess(tf.constant(TARGETED)).numpy()
  assert [p.decode("utf-8") for p in pre] == [
      preprocess_text(t, lower=lower, keep_accents=keep_accents)
      for t in TARGETED]


def test_digit_comma_resplit(tokenizers):
  graph, python = tokenizers(False)
  pieces = graph.encode_pieces(tf.constant(["born in 2000, and"])).to_list()
  assert [p.decode() for p in pieces[0]] == [
      "\u2581born", "\u2581in", "\u25812000", ",", "\u2581and"]
  # A batch where only some rows re-split, and an empty row between them.
  texts = ["In 1,234,567, the 92000, dollars", "", "no numbers", "7,"]
  assert (graph.tokenize(tf.constant(texts)).to_list()
          == [python.encode_ids(t) for t in texts])


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("name", ["corpus", "sst2_dev", "imdb"])
def test_real_text_ids_identical(tokenizers, real_text, name, lower):
  graph, python = tokenizers(lower)
  assert mismatches(graph, python, real_text[name]) == []


def test_ties_after_unknown_characters(tokenizers, real_text):
  # Runs of one character have segmentations of equal score; which one wins
  # depends on float rounding, hence on an unknown character's penalty.
  graph, python = tokenizers(False)
  rng = random.Random(0)
  words = " ".join(real_text["corpus"][:200]).split()
  texts = []
  for _ in range(3000):
    w = rng.sample(words, 3)
    unknown = "".join(rng.choice(["\u0662", "\u0138", "\U0001f642", "\x00",
                                  "\ua66e"]) for _ in range(rng.randint(0, 2)))
    run = rng.choice("!?.*-=xeAZ05") * rng.randint(2, 30)
    texts.append(f"{w[0]} {unknown}{w[1]}{run}{rng.choice(['', ',', '1,'])} "
                 f"{w[2]}")
  assert mismatches(graph, python, texts) == []


@pytest.mark.parametrize("keep_accents", [False, True])
def test_lowercase_contexts(tokenizers, keep_accents):
  # Final sigma: cased, case-ignorable (some only since Unicode 14) and
  # other neighbours; U+0130 -> "i\u0307"; capitals new in Unicode 14.
  graph, _ = tokenizers(True, keep_accents)
  rng = random.Random(1)
  alphabet = ["\u03a3"] * 3 + ["A", "a", "\u03c3", "\u0301", "\u00ad", "'",
                                 ".", ":", "\u02b0", "\u0345", "\u0890",
                                 "\u0130", "\x00", " ", "1", "\u2c2f",
                                 "\U0001ccd6", "\u01c5"]
  texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
           for _ in range(5000)]
  got = graph.preprocess(tf.constant(texts)).numpy()
  bad = [t for t, g in zip(texts, got)
         if g.decode("utf-8") != preprocess_text(t, lower=True,
                                                 keep_accents=keep_accents)]
  assert bad == []


@pytest.mark.parametrize("lower,keep_accents", [(False, False), (True, False)])
def test_every_code_point(tokenizers, lower, keep_accents):
  graph, python = tokenizers(lower, keep_accents)
  cps = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
  # Each code point alone, then 24 at a time with spaces, for context; the
  # latter also through to ids.
  texts = [chr(c) for c in cps]
  texts += ["".join(chr(c) + " " * (j % 3 == 0)
                    for j, c in enumerate(cps[i:i + 24]))
            for i in range(0, len(cps), 24)]
  got = graph.preprocess(tf.constant(texts)).numpy()
  bad = [t for t, g in zip(texts, got)
         if g.decode("utf-8") != preprocess_text(t, lower=lower,
                                                 keep_accents=keep_accents)]
  assert bad == []
  chunks = texts[len(cps):]
  assert mismatches(graph, python, chunks) == []


def test_saved_model_round_trip(model_path, tokenizers, real_text, tmp_path):
  class Export(tf.Module):

    def __init__(self):
      super().__init__()
      self.tokenizer = GraphTokenizer(model_path, lower=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def ids(self, texts):
      ids = self.tokenizer.tokenize(texts)
      return {"ids": ids.to_tensor(default_value=5),
              "lengths": ids.row_lengths()}

  texts = TARGETED + real_text["sst2_dev"][:50]
  module = Export()
  before = module.ids(tf.constant(texts))
  tf.saved_model.save(module, str(tmp_path / "tok"))
  del module
  loaded = tf.saved_model.load(str(tmp_path / "tok"))
  after = loaded.ids(tf.constant(texts))
  np.testing.assert_array_equal(after["ids"], before["ids"])
  np.testing.assert_array_equal(after["lengths"], before["lengths"])
  _, python = tokenizers(True)
  lengths = after["lengths"].numpy()
  for text, row, n in zip(texts, after["ids"].numpy(), lengths):
    assert row[:n].tolist() == python.encode_ids(text), text
  # The tokenizer's own saved function, ragged output.
  ragged = loaded.tokenizer.tokenize(tf.constant(texts[:3]))
  assert ragged.to_list() == [python.encode_ids(t) for t in texts[:3]]


NORMAL = 1  # sentencepiece_model.proto's SentencePiece.Type


def _model_proto_class():
  """A ModelProto schema of its own (sentencepiece_model.proto's field
  numbers, the specs kept as bytes): sentencepiece's generated module wants
  a protobuf runtime as new as its gencode (7.36), which an install on
  Python 3.10 does not get (6.32)."""
  field = descriptor_pb2.FieldDescriptorProto
  schema = descriptor_pb2.FileDescriptorProto(
      name="xlnet_tf_test_spiece.proto", package="xlnet_tf_test",
      syntax="proto2")
  piece = schema.message_type.add(name="SentencePiece")
  for name, number, kind, default in (
      ("piece", 1, field.TYPE_STRING, None),
      ("score", 2, field.TYPE_FLOAT, None),
      ("type", 3, field.TYPE_INT32, str(NORMAL))):
    piece.field.add(name=name, number=number, type=kind,
                    label=field.LABEL_OPTIONAL, default_value=default)
  model = schema.message_type.add(name="ModelProto")
  model.field.add(name="pieces", number=1, type=field.TYPE_MESSAGE,
                  label=field.LABEL_REPEATED,
                  type_name=".xlnet_tf_test.SentencePiece")
  for name, number in (("trainer_spec", 2), ("normalizer_spec", 3),
                       ("self_test_data", 4), ("denormalizer_spec", 5)):
    model.field.add(name=name, number=number, type=field.TYPE_BYTES,
                    label=field.LABEL_OPTIONAL)
  pool = descriptor_pool.DescriptorPool()
  pool.Add(schema)
  return message_factory.GetMessageClass(
      pool.FindMessageTypeByName("xlnet_tf_test.ModelProto"))


ModelProto = _model_proto_class()


def test_saved_model_embeds_pieces_once(model_path, tmp_path):
  """saved_model.pb of a module holding a tokenizer (and its `tokenize`):
  the model file occurs 0 times; exactly one constant holds the piece list;
  the SentencepieceOp (written twice: graph and restoring function) holds
  the model's normalizer with only the unknown, control, user-defined and
  one-character pieces."""
  module = tf.Module()
  module.tokenizer = GraphTokenizer(model_path)
  tf.saved_model.save(module, str(tmp_path / "tok"))
  saved = (tmp_path / "tok" / "saved_model.pb").read_bytes()
  with open(model_path, "rb") as f:
    proto = f.read()
  assert saved.count(proto) == 0
  model = ModelProto.FromString(proto)
  graph = saved_model_pb2.SavedModel.FromString(saved).meta_graphs[0].graph_def
  nodes = list(graph.node) + [node for function in graph.library.function
                              for node in function.node_def]
  pieces = [p.piece.encode("utf-8") for p in model.pieces]
  assert sum(node.op == "Const"
             and list(node.attr["value"].tensor.string_val) == pieces
             for node in nodes) == 1
  reduced = [p for p in model.pieces
             if p.type != NORMAL or len(p.piece) == 1]
  embedded = [ModelProto.FromString(
      node.attr["model"].s) for node in nodes if node.op == "SentencepieceOp"]
  assert len(embedded) == 2
  for got in embedded:
    assert list(got.pieces) == reduced
    assert got.normalizer_spec == model.normalizer_spec
    assert got.trainer_spec == model.trainer_spec


def test_unknown_character_inside_pieces(model_path, real_text, tmp_path):
  # Without the piece "z", "z" is unknown alone but not in the 490 pieces
  # that hold it: the normalizer must get the whole model to tell.
  model = ModelProto()
  with open(model_path, "rb") as f:
    model.ParseFromString(f.read())
  z = [p.piece for p in model.pieces].index("z")
  assert z > 8 and model.pieces[z].type == NORMAL
  del model.pieces[z]
  path = str(tmp_path / "no_z.model")
  with open(path, "wb") as f:
    f.write(model.SerializeToString())
  graph, python = GraphTokenizer(path), SentencePieceTokenizer(path)
  texts = TARGETED + real_text["sst2_dev"][:200] + [
      "z", "zz Zz", "Pizza, jazz and zebra", "1,z0, z1,2 ٢z٢zz"]
  assert any(0 in python.encode_ids(t) for t in texts)
  assert mismatches(graph, python, texts) == []


def test_bad_model(tmp_path):
  with pytest.raises(TokenizerError, match="not found"):
    GraphTokenizer(str(tmp_path / "missing.model"))
  bad = tmp_path / "bad.model"
  bad.write_bytes(b"not a model")
  with pytest.raises(TokenizerError, match="bad.model"):
    GraphTokenizer(str(bad))
