"""The word-labelled data reader and tag schemes, on the shared CoNLL-2003
files and on small bad files."""

import collections
import json
import os
import random

import pytest
from seqeval.metrics.sequence_labeling import get_entities

from data_utils.ner import schemes
from data_utils.ner.reader import NerDataError, read_ner


@pytest.fixture(scope="module")
def conll(shared):
  folder = os.path.join(shared, "data", "conll2003")
  return {name: read_ner(os.path.join(folder, name))
          for name in ("eng.train", "eng.testa")}


def raw_tags(path):
  """The file's last column per sentence, read independently of the reader."""
  out, current = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      fields = line.split()
      if not fields or fields[0] == "-DOCSTART-":
        if current:
          out.append(current)
        current = []
      else:
        current.append(fields[-1])
  if current:
    out.append(current)
  return out


def test_shared_counts(conll):
  train, testa = conll["eng.train"], conll["eng.testa"]
  assert (len(train.sentences), len(testa.sentences)) == (14041, 3250)
  assert (train.n_words, testa.n_words) == (203621, 51362)
  assert (len(train.documents), len(testa.documents)) == (946, 216)
  assert train.scheme == testa.scheme == schemes.IOB1
  entity_types = collections.Counter(e[0] for s in train.sentences
                                     for e in s.entities)
  assert entity_types == {"PER": 6600, "LOC": 7140, "ORG": 6321, "MISC": 3438}
  assert train.labels() == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC",
                            "B-ORG", "I-ORG", "B-PER", "I-PER"]
  first = train.sentences[0]
  assert first.words[:3] == ["EU", "rejects", "German"]
  assert first.tags[:3] == ["B-ORG", "O", "B-MISC"]   # IOB2 inside
  assert (first.document, first.line) == (0, 3)
  assert [d.line for d in train.documents[:2]] == [1, 492]
  assert all(s.document == d.index for d in train.documents
             for s in d.sentences)
  assert sum(len(d.sentences) for d in train.documents) == 14041


def test_scheme_round_trips_on_shared_data(shared, conll):
  for name, data in conll.items():
    raw = raw_tags(os.path.join(shared, "data", "conll2003", name))
    assert len(raw) == len(data.sentences)
    odd = 0
    for tags, sentence in zip(raw, data.sentences):
      spans = schemes.entities(tags)
      assert sentence.source_tags == tags
      assert sentence.entities == spans
      if not schemes.canonical(tags, schemes.IOB1):
        # eng.train writes two MISC entities `O B-MISC I-MISC`: the same
        # entity as IOB1's `O I-MISC I-MISC`, which is what comes back.
        odd += 1
        assert schemes.entities(data.restore(sentence.tags)) == spans
        tags = schemes.convert(tags, schemes.IOB1)
      assert data.restore(sentence.tags) == tags
      iob2 = schemes.convert(tags, schemes.IOB2)
      bioes = schemes.convert(iob2, schemes.BIOES)
      assert schemes.entities(iob2) == schemes.entities(bioes) == spans
      assert schemes.convert(bioes, schemes.IOB2) == iob2
      assert schemes.convert(bioes, schemes.IOB1) == tags
      assert schemes.convert(iob2, schemes.IOB1) == tags
    assert odd == {"eng.train": 2, "eng.testa": 0}[name]


def test_schemes_hand_worked():
  iob1 = ["I-PER", "B-PER", "I-PER", "O", "I-LOC", "I-ORG", "I-ORG"]
  spans = [("PER", 0, 1), ("PER", 1, 3), ("LOC", 4, 5), ("ORG", 5, 7)]
  iob2 = ["B-PER", "B-PER", "I-PER", "O", "B-LOC", "B-ORG", "I-ORG"]
  bioes = ["S-PER", "B-PER", "E-PER", "O", "S-LOC", "B-ORG", "E-ORG"]
  for tags, scheme in ((iob1, "IOB1"), (iob2, "IOB2"), (bioes, "BIOES")):
    assert schemes.entities(tags) == spans
    assert schemes.detect_scheme([tags]) == scheme
    assert schemes.render(spans, 7, scheme) == tags
  # Predictions a scheme would not write are still read as conlleval does.
  assert schemes.entities(["O", "I-PER", "E-PER", "B-LOC", "O"]) == \
      [("PER", 1, 3), ("LOC", 3, 4)]
  assert schemes.convert(["I-PER", "B-LOC"], schemes.BIOES) == \
      ["S-PER", "S-LOC"]
  assert not schemes.canonical(["O", "B-PER"], schemes.IOB1)
  assert schemes.detect_scheme([["O"], []]) == schemes.IOB2


def test_entities_read_as_seqeval_reads_them():
  # seqeval's default reading is conlleval's; any mix of prefixes and types.
  rng = random.Random(0)
  tags = ["O"] + [p + "-" + k for p in "BIES" for k in ("A", "B")]
  for _ in range(5000):
    seq = [rng.choice(tags) for _ in range(rng.randint(0, 8))]
    assert schemes.entities(seq) == \
        [(kind, start, end + 1) for kind, start, end in get_entities(seq)]


def write(tmp_path, name, text):
  path = os.path.join(str(tmp_path), name)
  mode = "wb" if isinstance(text, bytes) else "w"
  with open(path, mode) as f:
    f.write(text)
  return path


def test_documents_and_schemes_given(tmp_path):
  path = write(tmp_path, "a.txt", "Ann B-PER\nlives O\n\n-DOCSTART- O\n\n"
               "in O\nParis S-LOC\n\n\n-DOCSTART- O\n-DOCSTART- O\nBob S-PER\n")
  data = read_ner(path)
  assert data.scheme == "BIOES"
  assert [s.words for s in data.sentences] == [["Ann", "lives"],
                                               ["in", "Paris"], ["Bob"]]
  assert [(s.document, s.line) for s in data.sentences] == \
      [(0, 1), (1, 6), (3, 12)]
  assert [(d.index, d.line, len(d.sentences)) for d in data.documents] == \
      [(0, 1, 1), (1, 4, 1), (2, 10, 0), (3, 11, 1)]
  # "Ann" alone: B- without E- reads as a one-word entity.
  assert data.sentences[0].tags == ["B-PER", "O"]
  assert data.restore(data.sentences[0].tags) == ["S-PER", "O"]
  iob2 = write(tmp_path, "b.txt", "Ann I-PER\n")
  assert read_ner(iob2).scheme == "IOB1"
  assert read_ner(iob2, scheme="IOB2").restore(["B-PER"]) == ["B-PER"]


def test_jsonl_matches_conll(tmp_path, conll):
  train = conll["eng.train"]
  path = os.path.join(str(tmp_path), "train.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    for s in train.sentences[:300]:
      f.write(json.dumps({"tokens": s.words, "tags": train.restore(s.tags)})
              + "\n\n")
  data = read_ner(path)
  assert data.scheme == "IOB1"
  assert [s.words for s in data.sentences] == \
      [s.words for s in train.sentences[:300]]
  assert [s.tags for s in data.sentences] == \
      [s.tags for s in train.sentences[:300]]
  assert [s.line for s in data.sentences[:3]] == [1, 3, 5]
  assert len(data.documents) == 1


def error_of(path, scheme=None):
  with pytest.raises(NerDataError) as e:
    read_ner(path, scheme)
  message = str(e.value)
  assert "\n" not in message
  return message


def test_conll_errors(tmp_path):
  p = write(tmp_path, "cols.txt", "EU NNP I-NP I-ORG\n\nrejects VBZ O\n")
  assert error_of(p) == f"{p}:3: 3 columns, the file's first word line has 4"
  p = write(tmp_path, "one.txt", "-DOCSTART- -X- O O\n\nEU\n")
  assert error_of(p) == f"{p}:3: one column ('EU'); a word line is " \
      "`word … TAG`"
  p = write(tmp_path, "x.txt", "EU I-ORG\nsays O\nBob X-PER\n")
  assert error_of(p) == \
      f"{p}:3: tag X-PER is not O or B-, I-, E-, S- followed by a type"
  p = write(tmp_path, "bare.txt", "EU ORG\n")
  assert error_of(p) == \
      f"{p}:1: tag ORG is not O or B-, I-, E-, S- followed by a type"
  p = write(tmp_path, "e.txt", "EU B-ORG\n\nsays O\nBob E-PER\n")
  assert error_of(p, "IOB2") == \
      f"{p}:4: tag E-PER is not in scheme IOB2 (O, B-, I-)"
  p = write(tmp_path, "bytes.txt", b"EU I-ORG\n\nna\xefve O\n")
  assert error_of(p) == f"{p}:3: not UTF-8 text (byte 0xef at column 3)"
  assert error_of(p, "IOB3") == \
      f"{p}: unknown tag scheme 'IOB3' (one of IOB1, IOB2, BIOES)"
  missing = os.path.join(str(tmp_path), "none.txt")
  assert error_of(missing) == f"{missing}: cannot read (No such file or " \
      "directory)"
  p = write(tmp_path, "nul.txt", b"EU I-ORG\n\nna\x00ve O\n")
  assert error_of(p) == f"{p}:3: NUL byte at column 3 (a binary file, not " \
      "text)"
  # A line over 1 MiB is named, read in bounded pieces.
  p = write(tmp_path, "long.txt", b"EU I-ORG\n" + b"x" * (3 << 20))
  assert error_of(p) == f"{p}:2: line too long: 3145728 bytes (the limit " \
      "is 1 MiB)"


def test_a_utf8_bom_is_an_encoding_mark(tmp_path):
  """Not part of the first word: a marked `-DOCSTART-` line is still the
  document marker (it used to become a sentence of one word)."""
  text = "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nsays VBZ I-VP O\n"
  plain = read_ner(write(tmp_path, "plain.txt", text))
  marked = read_ner(write(tmp_path, "bom.txt", b"\xef\xbb\xbf" +
                          text.encode()))
  assert marked.sentences == plain.sentences
  assert [s.words for s in marked.sentences] == [["EU", "says"]]


def test_jsonl_errors(tmp_path):
  ok = '{"tokens": ["a"], "tags": ["O"]}\n'
  cases = {
      '{"tokens": ["a"], "tags": [""]}': "tag 0: empty tag",
      '{"tokens": ["a", "b"], "tags": ["O"]}': "2 tokens but 1 tags",
      '{"tokens": ["a b"], "tags": ["O"]}':
          "token 0 ('a b') is empty or holds whitespace",
      '{"tokens": "a", "tags": ["O"]}': '"tokens" is not a list of strings',
      '{"tokens": ["a"]}': 'not an object with "tokens" and "tags"',
      '{"tokens": ["a"],': "not valid JSON (Expecting property name "
                           "enclosed in double quotes at column 18)",
      '{"tokens": ["a", "b"], "tags": ["O", "Q-LOC"]}':
          "tag 1: tag Q-LOC is not O or B-, I-, E-, S- followed by a type",
  }
  for i, (line, problem) in enumerate(cases.items()):
    p = write(tmp_path, f"bad{i}.jsonl", ok + line + "\n")
    assert error_of(p) == f"{p}:2: {problem}"


def test_untagged_files_for_prediction(tmp_path):
  conll = tmp_path / "words.txt"
  conll.write_text("-DOCSTART-\n\nEU\nrejects\n\nPeter\n")
  with pytest.raises(NerDataError, match=r"words.txt:3: one column \('EU'\)"):
    read_ner(str(conll))
  data = read_ner(str(conll), untagged=True)
  assert not data.tagged and data.scheme == "IOB2"
  assert [(s.words, s.tags, s.line) for s in data.sentences] == [
      (["EU", "rejects"], [], 3), (["Peter"], [], 6)]
  rows = tmp_path / "rows.jsonl"
  rows.write_text('{"tokens": ["EU", "rejects"]}\n{"tokens": ["Peter"]}\n')
  with pytest.raises(NerDataError, match=r'rows.jsonl:1: not an object with '
                     r'"tokens" and "tags"$'):
    read_ner(str(rows))
  assert [s.words for s in read_ner(str(rows), untagged=True).sentences] == \
      [["EU", "rejects"], ["Peter"]]
  rows.write_text('{"tokens": ["EU"]}\n{"tokens": ["x"], "tags": ["O"]}\n')
  with pytest.raises(NerDataError, match=r'rows.jsonl:2: "tags" in some rows '
                     r'only \(line 1 differs\)$'):
    read_ner(str(rows), untagged=True)
  # A tagged file reads the same either way.
  rows.write_text('{"tokens": ["EU"], "tags": ["B-ORG"]}\n')
  assert read_ner(str(rows), untagged=True).tagged
