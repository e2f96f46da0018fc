"""Tag schemes of word-labelled data: IOB1, IOB2 and BIOES.

A tag is `O` or `P-TYPE`: a prefix P and an entity type (`B-PER`, `I-LOC`).
  IOB1   (CoNLL-2003's) an entity's words are `I-TYPE`; `B-TYPE` only opens
         an entity that directly follows another of the same type
  IOB2   an entity's first word is `B-TYPE`, the others `I-TYPE`
  BIOES  `S-TYPE` for a one-word entity, else `B-TYPE I-TYPE… E-TYPE`

Entities are read from a tag sequence with conlleval's rules (`entities`),
which are the same for all three schemes and accept sequences a scheme
would not write (an IOB2 `I-PER` after `O` opens an entity), so a model's
predictions always have a reading. Converting renders those entities in
the target scheme; for a sequence written as its scheme writes it
(`canonical`), converting there and back gives the same tags.

Entities are `(type, start, end)` with word indices, `end` exclusive.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

IOB1, IOB2, BIOES = "IOB1", "IOB2", "BIOES"
SCHEMES = (IOB1, IOB2, BIOES)
# The internal scheme: every entity marks its own start.
INTERNAL = IOB2

PREFIXES = {IOB1: "BI", IOB2: "BI", BIOES: "BIES"}
# Every prefix, O's included; a prefix's code is its index (`boundary_table`).
PREFIX_CODES = ("O", "B", "I", "E", "S")

Entity = Tuple[str, int, int]


def split_tag(tag: str) -> Tuple[str, str]:
  """`(prefix, type)`; `("O", "")` for `O`. No checking (see `tag_problem`).

  Example:
    >>> split_tag("B-MISC"), split_tag("O"), split_tag("I-a-b")
    (('B', 'MISC'), ('O', ''), ('I', 'a-b'))
  """
  if tag == "O":
    return "O", ""
  prefix, _, entity_type = tag.partition("-")
  return prefix, entity_type


def tag_problem(tag: str, scheme: Optional[str] = None) -> Optional[str]:
  """What is wrong with `tag` in `scheme` (any scheme if None), or None.

  Example:
    >>> tag_problem("X-PER")
    'tag X-PER is not O or B-, I-, E-, S- followed by a type'
    >>> tag_problem("E-LOC", IOB2)
    'tag E-LOC is not in scheme IOB2 (O, B-, I-)'
    >>> tag_problem(""), tag_problem("B-LOC", IOB2) is None
    ('empty tag', True)
  """
  if not tag:
    return "empty tag"
  if tag == "O":
    return None
  prefix, entity_type = split_tag(tag)
  if len(prefix) != 1 or prefix not in "BIES" or not entity_type:
    return f"tag {tag} is not O or B-, I-, E-, S- followed by a type"
  if scheme is not None and prefix not in PREFIXES[scheme]:
    allowed = ", ".join(["O"] + [p + "-" for p in PREFIXES[scheme]])
    return f"tag {tag} is not in scheme {scheme} ({allowed})"
  return None


def _boundary(prev: str, prefix: str, other: bool):
  """conlleval's endOfChunk and startOfChunk: `(an entity ends just before
  this tag, an entity starts at it)` for a tag of prefix `prefix` after one
  of prefix `prev`, `other` if their types differ (O's type is "")."""
  ends = prev in "ES" or prev in "BI" and (prefix in "BSO" or other)
  starts = prefix in "BS" or prefix in "IE" and (prev in "ESO" or other)
  return ends, starts


def boundary_table() -> Tuple[list, list]:
  """`_boundary` of every case, for readers of prefix codes (the token
  classifier's export reads entities in its graph with it): `(ends,
  starts)`, each `[prev code][prefix code][other]` nested lists of bool,
  a prefix's code being its index in `PREFIX_CODES`.

  Example:
    >>> ends, starts = boundary_table()
    >>> B, I, O = (PREFIX_CODES.index(p) for p in "BIO")
    >>> ends[B][I][False], ends[B][I][True], starts[O][I][True]
    (False, True, True)
  """
  return tuple([[[_boundary(prev, prefix, other)[i] for other in (False, True)]
                 for prefix in PREFIX_CODES] for prev in PREFIX_CODES]
               for i in (0, 1))


def entities(tags: Sequence[str]) -> List[Entity]:
  """The entities of `tags` (any scheme), read as conlleval reads them.

  Example:
    >>> entities(["I-PER", "I-PER", "B-PER", "O", "I-LOC"])   # IOB1
    [('PER', 0, 2), ('PER', 2, 3), ('LOC', 4, 5)]
    >>> entities(["B-ORG", "E-ORG", "S-ORG", "I-MISC"])        # BIOES (+ odd)
    [('ORG', 0, 2), ('ORG', 2, 3), ('MISC', 3, 4)]
  """
  out: List[Entity] = []
  prev, prev_type, start = "O", "", -1
  for i, tag in enumerate(tags):
    prefix, entity_type = split_tag(tag)
    ends, starts = _boundary(prev, prefix, entity_type != prev_type)
    if start >= 0 and ends:
      out.append((prev_type, start, i))
      start = -1
    if starts:
      start = i
    prev, prev_type = prefix, entity_type
  if start >= 0:
    out.append((prev_type, start, len(tags)))
  return out


def render(spans: Sequence[Entity], length: int, scheme: str) -> List[str]:
  """The tags of `length` words holding the (non-overlapping) `spans`.

  Example:
    >>> spans = [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]
    >>> render(spans, 5, IOB1)
    ['I-PER', 'I-PER', 'B-PER', 'O', 'I-LOC']
    >>> render(spans, 5, IOB2)
    ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']
    >>> render(spans, 5, BIOES)
    ['B-PER', 'E-PER', 'S-PER', 'O', 'S-LOC']
  """
  if scheme not in SCHEMES:
    raise ValueError(f"unknown tag scheme {scheme!r} (one of {SCHEMES})")
  tags = ["O"] * length
  prev_end, prev_type = -1, ""
  for entity_type, start, end in spans:
    tags[start:end] = ["I-" + entity_type] * (end - start)
    if scheme == IOB2:
      tags[start] = "B-" + entity_type
    elif scheme == IOB1:
      if start == prev_end and entity_type == prev_type:
        tags[start] = "B-" + entity_type
    elif end - start == 1:
      tags[start] = "S-" + entity_type
    else:
      tags[start], tags[end - 1] = "B-" + entity_type, "E-" + entity_type
    prev_end, prev_type = end, entity_type
  return tags


def convert(tags: Sequence[str], scheme: str) -> List[str]:
  """`tags` (any scheme) rewritten in `scheme`, entity by entity.

  Example:
    >>> convert(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"], IOB2)
    ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC']
    >>> convert(["B-PER", "I-PER", "O", "B-LOC", "B-LOC"], BIOES)
    ['B-PER', 'E-PER', 'O', 'S-LOC', 'S-LOC']
  """
  return render(entities(tags), len(tags), scheme)


def canonical(tags: Sequence[str], scheme: str) -> bool:
  """True when `tags` are written as `scheme` writes its entities (then
  converting to another scheme and back gives `tags` again).

  Example:
    >>> canonical(["B-LOC"], IOB1), canonical(["B-LOC"], IOB2)
    (False, True)
  """
  return list(tags) == convert(tags, scheme)


def detect_scheme(sentences: Sequence[Sequence[str]]) -> str:
  """The scheme the tag sequences are written in: BIOES if any tag is `E-`
  or `S-`; IOB1 if any entity opens with `I-` (IOB2 never writes that);
  otherwise IOB2 (also when there is no entity, where all schemes agree).
  Tags must be well formed (`tag_problem(tag) is None`).

  Example:
    >>> detect_scheme([["O", "I-PER"], ["B-LOC"]])
    'IOB1'
    >>> detect_scheme([["B-PER", "I-PER"]]), detect_scheme([["O"], ["S-X"]])
    ('IOB2', 'BIOES')
  """
  seen_iob1 = False
  for tags in sentences:
    prev, prev_type = "O", ""
    for tag in tags:
      prefix, entity_type = split_tag(tag)
      if prefix in "ES":
        return BIOES
      if prefix == "I" and (prev == "O" or entity_type != prev_type):
        seen_iob1 = True
      prev, prev_type = prefix, entity_type
  return IOB1 if seen_iob1 else IOB2


def label_list(tags: Sequence[str]) -> List[str]:
  """The model's labels for the entity types of `tags` (any scheme, or bare
  type names): `O`, then per type in sorted order `B-T`, `I-T` (IOB2, the
  internal scheme; both prefixes so any entity can be written).

  Example:
    >>> label_list(["I-PER", "O", "B-LOC", "S-PER", "MISC"])
    ['O', 'B-LOC', 'I-LOC', 'B-MISC', 'I-MISC', 'B-PER', 'I-PER']
  """
  types = set()
  for tag in tags:
    if tag == "O":
      continue
    prefix, entity_type = split_tag(tag)
    tagged = entity_type and prefix in "BIES" and len(prefix) == 1
    types.add(entity_type if tagged else tag)
  return ["O"] + [f"{p}-{t}" for t in sorted(types) for p in "BI"]
