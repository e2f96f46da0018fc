"""Text classification / regression data: task readers and features.

Readers return `InputExample`s from the released file layouts:
  GLUE TSVs   cola, sst-2, mrpc, sts-b (regression), qqp, mnli (matched and
              mismatched dev/test), qnli, rte, wnli
  aclImdb     imdb  (`{train,test}/{pos,neg}/*.txt`; dev = test)
  CSVs        yelp-2, yelp-5, amazon-2, amazon-5, dbpedia, ag_news
              (`train.csv`, `test.csv`; dev = test)
  your own    `generic` with column settings (`GenericSpec`)

Features, exactly as the original classifier builds them:
  `A <sep> B <sep> <cls>` (or `A <sep> <cls>`), longest-first truncation,
  LEFT padding with id 0, segment ids 0 (A and its <sep>), 1 (B and its
  <sep>), 2 (<cls>), 4 (padding); `input_mask` float 1 = padding.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence

from data_utils.errors import UsageError, UserError, utf8_error
from data_utils.tokenization import CLS_ID, SEP_ID

SEG_ID_A, SEG_ID_B, SEG_ID_CLS, SEG_ID_PAD = 0, 1, 2, 4

csv.field_size_limit(sys.maxsize)


class TaskDataError(UserError):
  """Bad task name, missing file or malformed row; names file and line."""


@dataclasses.dataclass
class InputExample:
  guid: str
  text_a: str
  text_b: Optional[str] = None
  label: Optional[object] = None   # label string, float score, or None (test)


@dataclasses.dataclass(frozen=True)
class TsvSpec:
  """Columns of a GLUE-style TSV task (negative indices count from the end)."""
  labels: Optional[Sequence[str]]          # None = regression
  text_a: int
  text_b: Optional[int]
  label: int
  test_text_a: Optional[int] = None
  test_text_b: Optional[int] = None
  header: bool = True
  test_header: bool = True
  files: Dict[str, str] = dataclasses.field(default_factory=lambda: {
      "train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"})


_MNLI_FILES = {"train": "train.tsv", "dev": "dev_matched.tsv",
               "test": "test_matched.tsv"}
_MNLI_MM_FILES = {"train": "train.tsv", "dev": "dev_mismatched.tsv",
                  "test": "test_mismatched.tsv"}
_NLI = ["contradiction", "entailment", "neutral"]

GLUE_TASKS: Dict[str, TsvSpec] = {
    "cola": TsvSpec(["0", "1"], 3, None, 1, test_text_a=1, header=False),
    "sst-2": TsvSpec(["0", "1"], 0, None, 1, test_text_a=1),
    "mrpc": TsvSpec(["0", "1"], 3, 4, 0),
    "sts-b": TsvSpec(None, 7, 8, 9),
    "qqp": TsvSpec(["0", "1"], 3, 4, 5, test_text_a=1, test_text_b=2),
    "mnli": TsvSpec(_NLI, 8, 9, -1, files=_MNLI_FILES),
    "mnli-mm": TsvSpec(_NLI, 8, 9, -1, files=_MNLI_MM_FILES),
    "qnli": TsvSpec(["entailment", "not_entailment"], 1, 2, -1),
    "rte": TsvSpec(["entailment", "not_entailment"], 1, 2, -1),
    "wnli": TsvSpec(["0", "1"], 1, 2, -1),
}


@dataclasses.dataclass(frozen=True)
class CsvSpec:
  """A released text-classification CSV: label column, then text columns
  (several are joined with a space, e.g. title and body)."""
  labels: Sequence[str]
  text_columns: Sequence[int]


CSV_TASKS: Dict[str, CsvSpec] = {
    "yelp-2": CsvSpec(["1", "2"], [1]),
    "yelp-5": CsvSpec(["1", "2", "3", "4", "5"], [1]),
    "amazon-2": CsvSpec(["1", "2"], [1, 2]),
    "amazon-5": CsvSpec(["1", "2", "3", "4", "5"], [1, 2]),
    "dbpedia": CsvSpec([str(i) for i in range(1, 15)], [1, 2]),
    "ag_news": CsvSpec(["1", "2", "3", "4"], [1, 2]),
}


@dataclasses.dataclass(frozen=True)
class GenericSpec:
  """Your own TSV/CSV: `{split}.{tsv|csv}` in data_dir."""
  text_a: int = 0
  text_b: Optional[int] = None
  label: int = 1
  labels: Optional[Sequence[str]] = None  # None with is_regression
  header: bool = True
  delimiter: str = "\t"


TASK_NAMES = sorted(list(GLUE_TASKS) + list(CSV_TASKS) + ["imdb", "generic"])


def labels_of(task: str, generic: Optional[GenericSpec] = None):
  """The label list of a task (None for regression)."""
  task = task.lower()
  if task in GLUE_TASKS:
    return GLUE_TASKS[task].labels
  if task in CSV_TASKS:
    return list(CSV_TASKS[task].labels)
  if task == "imdb":
    return ["neg", "pos"]
  if task == "generic":
    return None if generic is None or generic.labels is None else list(
        generic.labels)
  raise TaskDataError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")


def _column(row, index, path, line_no, what):
  if index >= len(row) or -index > len(row):
    raise TaskDataError(f"{path}:{line_no}: row has {len(row)} column(s), "
                        f"{what} is column {index}")
  return row[index]


def _check_label(label, labels, path, line_no):
  if labels is None:
    try:
      score = float(label)
    except ValueError:
      raise TaskDataError(f"{path}:{line_no}: score {label!r} is not a "
                          "number") from None
    # float() takes 'nan' and 'inf', which would train to a NaN loss.
    if not math.isfinite(score):
      raise TaskDataError(f"{path}:{line_no}: score {label!r} is not a "
                          "finite number")
    return score
  if label not in labels:
    raise TaskDataError(f"{path}:{line_no}: label {label!r} not in "
                        f"{list(labels)}")
  return label


def _read_rows(path: str, delimiter: str, quoting):
  if not os.path.isfile(path):
    raise TaskDataError(f"{path}: no such data file")
  # utf-8-sig drops the BOM some GLUE files (MRPC) start with.
  try:
    with open(path, encoding="utf-8-sig", newline="") as f:
      reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
      # The line a row starts on (a quoted CSV field may hold line breaks).
      line_no = 1
      for row in reader:
        if row:
          yield line_no, row
        line_no = reader.line_num + 1
  except UnicodeDecodeError:
    raise TaskDataError(utf8_error(path)) from None
  except csv.Error as e:
    raise TaskDataError(f"{path}:{reader.line_num}: {e}") from None


def read_tsv_task(spec: TsvSpec, data_dir: str, split: str, task: str
                  ) -> List[InputExample]:
  path = os.path.join(data_dir, spec.files[split])
  test = split == "test"
  a_col = spec.test_text_a if test and spec.test_text_a is not None \
      else spec.text_a
  b_col = spec.test_text_b if test and spec.test_text_b is not None \
      else spec.text_b
  header = spec.test_header if test else spec.header
  examples = []
  for k, (line_no, row) in enumerate(_read_rows(path, "\t",
                                                csv.QUOTE_NONE)):
    if k == 0 and header:
      continue
    text_a = _column(row, a_col, path, line_no, "text_a")
    text_b = None if b_col is None else _column(row, b_col, path, line_no,
                                                "text_b")
    label = None
    if not test:
      label = _check_label(_column(row, spec.label, path, line_no, "label"),
                           spec.labels, path, line_no)
    guid = row[0] if test and header else f"{split}-{k}"
    examples.append(InputExample(guid, text_a, text_b, label))
  return examples


def _csv_file(split: str) -> str:
  return "train.csv" if split == "train" else "test.csv"   # dev = test


def _imdb_root(split: str) -> str:
  return "train" if split == "train" else "test"   # dev = test


def _generic_file(spec: GenericSpec, split: str) -> str:
  ext = "tsv" if spec.delimiter == "\t" else "csv"
  return f"{split}.{ext}"


def read_csv_task(spec: CsvSpec, data_dir: str, split: str
                  ) -> List[InputExample]:
  path = os.path.join(data_dir, _csv_file(split))
  examples = []
  for line_no, row in _read_rows(path, ",", csv.QUOTE_MINIMAL):
    label = _check_label(_column(row, 0, path, line_no, "label"), spec.labels,
                         path, line_no)
    parts = [_column(row, c, path, line_no, "text") for c in spec.text_columns]
    # The released files escape quotes and newlines inside fields.
    text = " ".join(p for p in parts if p).replace('\\"', '"').replace(
        "\\n", " ")
    examples.append(InputExample(f"{split}-{line_no}", text, None, label))
  return examples


def text_files(folder: str, layout: str) -> List[str]:
  """The `*.txt` files of a release folder, numeric names in number order
  ("2.txt" before "10.txt"); a missing folder names the expected layout."""
  if not os.path.isdir(folder):
    raise TaskDataError(f"{folder}: no such folder (expected the {layout})")
  return [os.path.join(folder, n) for n in sorted(
      os.listdir(folder), key=lambda n: (len(n), n)) if n.endswith(".txt")]


def read_imdb(data_dir: str, split: str) -> List[InputExample]:
  root = os.path.join(data_dir, _imdb_root(split))
  examples = []
  for label in ("neg", "pos"):
    for path in text_files(os.path.join(root, label), "aclImdb layout "
                           "{train,test}/{pos,neg}/*.txt"):
      name = os.path.basename(path)
      try:
        with open(path, encoding="utf-8") as f:
          text = f.read().strip().replace("<br />", " ")
      except UnicodeDecodeError:
        raise TaskDataError(utf8_error(path)) from None
      examples.append(InputExample(f"{label}/{name}", text, None, label))
  return examples


def read_generic(spec: GenericSpec, data_dir: str, split: str
                 ) -> List[InputExample]:
  path = os.path.join(data_dir, _generic_file(spec, split))
  quoting = csv.QUOTE_NONE if spec.delimiter == "\t" else csv.QUOTE_MINIMAL
  examples = []
  for k, (line_no, row) in enumerate(_read_rows(path, spec.delimiter,
                                                quoting)):
    if k == 0 and spec.header:
      continue
    text_a = _column(row, spec.text_a, path, line_no, "text_a")
    text_b = None if spec.text_b is None else _column(
        row, spec.text_b, path, line_no, "text_b")
    label = None
    if split != "test" or spec.label < len(row):
      label = _check_label(_column(row, spec.label, path, line_no, "label"),
                           spec.labels, path, line_no)
    examples.append(InputExample(f"{split}-{k}", text_a, text_b, label))
  return examples


SPLITS = ("train", "dev", "test")


def split_files(task: str, split: str, generic: Optional[GenericSpec] = None
                ) -> List[str]:
  """What reading `split` of `task` opens, relative to data_dir (files; for
  imdb the folders of its review files), named without reading anything.

  Example:
    >>> split_files("mnli", "dev"), split_files("imdb", "test")
    (['dev_matched.tsv'], ['test/neg', 'test/pos'])
  """
  task = task.lower()
  if split not in SPLITS:
    raise TaskDataError(f"split must be train, dev or test, got {split!r}")
  if task in GLUE_TASKS:
    return [GLUE_TASKS[task].files[split]]
  if task in CSV_TASKS:
    return [_csv_file(split)]
  if task == "imdb":
    return [f"{_imdb_root(split)}/{label}" for label in ("neg", "pos")]
  if task == "generic":
    return [_generic_file(generic or GenericSpec(), split)]
  raise TaskDataError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")


def check_split_files(data_dir: str, names: Sequence[str], split: str,
                      needed_by: str) -> None:
  """UsageError naming --data_dir unless each of `names` (files or folders
  relative to it, see `split_files`) is there; `needed_by` is the flag of
  the step that reads `split`."""
  if not data_dir:
    raise UsageError(f"--data_dir is required by {needed_by}")
  if not os.path.isdir(data_dir):
    raise UsageError(f"--data_dir={data_dir}: no such folder")
  for name in names:
    if not os.path.exists(os.path.join(data_dir, name)):
      raise UsageError(f"--data_dir={data_dir}: {name} not found (needed by "
                       f"{needed_by} for split {split!r})")


def is_pair_task(task: str, generic: Optional[GenericSpec] = None) -> bool:
  """Whether examples of `task` have a second text (`A <sep> B <sep> <cls>`)."""
  task = task.lower()
  if task in GLUE_TASKS:
    return GLUE_TASKS[task].text_b is not None
  if task == "generic":
    return (generic or GenericSpec()).text_b is not None
  return False


def min_seq_length(task: str, generic: Optional[GenericSpec] = None) -> int:
  """The shortest max_seq_length that keeps a token of every text:
  `a <sep> <cls>` (3) or `a <sep> b <sep> <cls>` (5). Shorter, truncation
  leaves nothing (or drops the second text)."""
  return 5 if is_pair_task(task, generic) else 3


def read_examples(task: str, data_dir: str, split: str,
                  generic: Optional[GenericSpec] = None
                  ) -> List[InputExample]:
  """Examples of `split` ('train', 'dev', 'test') of `task` in data_dir."""
  task = task.lower()
  if split not in SPLITS:
    raise TaskDataError(f"split must be train, dev or test, got {split!r}")
  if task in GLUE_TASKS:
    return read_tsv_task(GLUE_TASKS[task], data_dir, split, task)
  if task in CSV_TASKS:
    return read_csv_task(CSV_TASKS[task], data_dir, split)
  if task == "imdb":
    return read_imdb(data_dir, split)
  if task == "generic":
    return read_generic(generic or GenericSpec(), data_dir, split)
  raise TaskDataError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")


def truncate_pair(len_a: int, len_b: int, budget: int):
  """Lengths kept by the original's longest-first truncation (pop from the
  longer, from B on ties) in closed form.

  Example:
    >>> truncate_pair(10, 3, 8), truncate_pair(5, 5, 7), truncate_pair(6, 10, 9)
    ((5, 3), (4, 3), (5, 4))
  """
  if len_a + len_b <= budget:
    return len_a, len_b
  if 2 * min(len_a, len_b) <= budget:  # the shorter one survives whole
    return ((len_a, budget - len_a) if len_a < len_b
            else (budget - len_b, len_b))
  return (budget + 1) // 2, budget // 2


def convert_example(tokens_a: List[int], tokens_b: Optional[List[int]],
                    max_seq_length: int) -> dict:
  """Token ids -> `input_ids`, `segment_ids` (int lists) and `input_mask`
  (float list, 1 = padding) of length `max_seq_length`, LEFT-padded.

  Example:
    >>> f = convert_example([11, 12], [13], 7)
    >>> f["input_ids"], f["segment_ids"]
    ([0, 11, 12, 4, 13, 4, 3], [4, 0, 0, 0, 1, 1, 2])
    >>> f["input_mask"]
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  """
  if tokens_b:
    keep_a, keep_b = truncate_pair(len(tokens_a), len(tokens_b),
                                   max_seq_length - 3)
    tokens_a, tokens_b = tokens_a[:keep_a], tokens_b[:keep_b]
  else:
    tokens_a = tokens_a[:max_seq_length - 2]
  ids = list(tokens_a) + [SEP_ID]
  segs = [SEG_ID_A] * (len(tokens_a) + 1)
  if tokens_b:
    ids += list(tokens_b) + [SEP_ID]
    segs += [SEG_ID_B] * (len(tokens_b) + 1)
  ids.append(CLS_ID)
  segs.append(SEG_ID_CLS)
  pad = max_seq_length - len(ids)
  return {"input_ids": [0] * pad + ids,
          "segment_ids": [SEG_ID_PAD] * pad + segs,
          "input_mask": [1.0] * pad + [0.0] * len(ids)}


def example_features(example: InputExample, encode: Callable[[str], List[int]],
                     max_seq_length: int, labels) -> dict:
  """Features of one example with its label id (int) or score (float)."""
  tokens_a = encode(example.text_a)
  tokens_b = encode(example.text_b) if example.text_b else None
  features = convert_example(tokens_a, tokens_b, max_seq_length)
  if labels is None:
    features["label"] = float(example.label or 0.0)
  else:
    features["label"] = labels.index(example.label) \
        if example.label is not None else 0
  return features
