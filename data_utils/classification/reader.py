"""Text classification / regression data: the tasks and their readers.

Readers return `InputExample`s from the released file layouts:
  GLUE TSVs   cola, sst-2, mrpc, sts-b (regression), qqp, mnli (matched and
              mismatched dev/test), qnli, rte, wnli
  aclImdb     imdb  (`{train,test}/{pos,neg}/*.txt`; dev = test)
  CSVs        yelp-2, yelp-5, amazon-2, amazon-5, dbpedia, ag_news
              (`train.csv`, `test.csv`; dev = test)
  your own    `generic` with column settings (`GenericSpec`)

The feature layout is in `data_utils/classification/features.py`, the
records in `data_utils/classification/records.py`.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from typing import Dict, List, Optional, Sequence

from data_utils import paths
from data_utils.errors import UsageError, UserError
from data_utils.text_files import utf8_error

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
  if not paths.isfile(path):
    raise TaskDataError(f"{path}: no such data file")
  # utf-8-sig drops the BOM some GLUE files (MRPC) start with.
  try:
    with paths.open_file(path, encoding="utf-8-sig", newline="") as f:
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
  path = paths.join(data_dir, spec.files[split])
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
  path = paths.join(data_dir, _csv_file(split))
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
  if not paths.isdir(folder):
    raise TaskDataError(f"{folder}: no such folder (expected the {layout})")
  return [paths.join(folder, n) for n in sorted(
      paths.listdir(folder), key=lambda n: (len(n), n)) if n.endswith(".txt")]


def read_imdb(data_dir: str, split: str) -> List[InputExample]:
  root = paths.join(data_dir, _imdb_root(split))
  examples = []
  for label in ("neg", "pos"):
    for path in text_files(paths.join(root, label), "aclImdb layout "
                           "{train,test}/{pos,neg}/*.txt"):
      name = paths.basename(path)
      try:
        with paths.open_file(path, encoding="utf-8") as f:
          text = f.read().strip().replace("<br />", " ")
      except UnicodeDecodeError:
        raise TaskDataError(utf8_error(path)) from None
      examples.append(InputExample(f"{label}/{name}", text, None, label))
  return examples


def read_generic(spec: GenericSpec, data_dir: str, split: str
                 ) -> List[InputExample]:
  path = paths.join(data_dir, _generic_file(spec, split))
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
  if not paths.isdir(data_dir):
    raise UsageError(f"--data_dir={data_dir}: no such folder")
  for name in names:
    if not paths.exists(paths.join(data_dir, name)):
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
