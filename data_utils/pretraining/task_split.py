"""Which input bytes each task of the record builder reads.

A task is a list of byte ranges of input files (`InputRange`); its passes
are built from those ranges alone, so any task can be built on its own, by
the plain CLI (`--task=i`) or as one unit of a Beam pipeline, with the same
bytes. Two ways to split, both deterministic functions of the sorted input
paths (and their sizes and blank lines):

  by files  (`--num_task=N`)      task i takes whole files i, i + N, ...
                                  (the original's split)
  by size   (`--task_size_mb=M`)  the files in order, cut into tasks of about
                                  M MiB: a big file is cut at document
                                  boundaries (just after a blank line) and
                                  small files are grouped; a document is
                                  never cut, and a file's end always ends a
                                  document

The split is recorded in every record-info (`split_record`). Inputs may
lie in a bucket (`gs://`, `s3://`): a range is read as a stream of its
bytes (`paths.open_file`), never a whole file at once.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence

from data_utils import paths as paths_module
from data_utils.errors import UsageError
from data_utils.text_files import file_problem

MIB = 1 << 20
# The most bytes read at once while looking for a document end.
PIECE = 1 << 16


@dataclasses.dataclass(frozen=True)
class InputRange:
  """Bytes `[begin, end)` of the file at `path` (absolute, or a URL)."""
  path: str
  begin: int
  end: int

  @property
  def size(self) -> int:
    return self.end - self.begin

  def to_list(self) -> list:
    return [self.path, self.begin, self.end]


def _is_blank(line: bytes) -> bool:
  # The readers' rule is `not line.strip()` on the decoded text: ASCII
  # whitespace here, and a short line is decoded for Unicode spaces.
  if not line.strip():
    return True
  return len(line) <= 16 and not line.decode("utf-8", "ignore").strip()


def next_document_end(path: str, at: int) -> Optional[int]:
  """The offset just after the first blank line that starts at or after
  the first line start `>= at`; None when the file has no such line. Reads
  pieces of at most `PIECE` bytes, so a line of any length costs no more
  memory than a short one.

  Example:
    >>> import tempfile
    >>> path = tempfile.mkstemp()[1]
    >>> _ = open(path, "wb").write(b"a\\nb\\n\\nc\\n \\nd\\n")
    >>> [next_document_end(path, at) for at in (0, 3, 5, 10)]
    [5, 5, 9, None]
  """
  with paths_module.open_file(path, "rb") as f:
    # At a line start: at 0, or just after a newline; else skip to the next.
    starting = at == 0
    if at > 0:
      f.seek(at - 1)
      starting = f.read(1) == b"\n"
    offset = f.tell()
    blank = True  # the line read so far is blank
    while True:
      piece = f.readline(PIECE)
      if not piece:
        return None
      offset += len(piece)
      blank = blank and _is_blank(piece)
      if piece.endswith(b"\n"):
        if starting and blank:
          return offset
        starting, blank = True, True


def check_input_files(paths: Sequence[str], flag: Optional[str] = None,
                      text: bool = True) -> None:
  """A one-line UsageError naming the first of `paths` that
  `text_files.file_problem` refuses (`text=False`: a model, not text):
  `--input_glob=<glob>: <path>: a named pipe (FIFO), not a regular file`
  (`flag`: `input_glob=<glob>`, or None for a list of paths). A FIFO or a
  device would block the reader or never end."""
  for path in paths:
    problem = file_problem(path, text)
    if problem:
      where = f"--{flag}: " if flag else ""
      raise UsageError(f"{where}{path}: {problem}")


def split_by_files(paths: Sequence[str], num_task: int
                   ) -> List[List[InputRange]]:
  """Task i takes the whole files `sorted(paths)[i::num_task]`."""
  ordered = sorted(paths_module.absolute(p) for p in paths)
  return [[InputRange(p, 0, paths_module.getsize(p))
           for p in ordered[i::num_task]] for i in range(num_task)]


def split_by_size(paths: Sequence[str], task_size_mb: float
                  ) -> List[List[InputRange]]:
  """The files in sorted order, cut into tasks of at least `task_size_mb`
  MiB (the last may be smaller) at document boundaries; empty files add
  nothing. A task ends at the first document end at or after its size."""
  target = max(1, int(task_size_mb * MIB))
  tasks: List[List[InputRange]] = []
  current: List[InputRange] = []
  current_bytes = 0
  for path in sorted(paths_module.absolute(p) for p in paths):
    size = paths_module.getsize(path)
    pos = 0
    while pos < size:
      want = target - current_bytes
      cut = size if size - pos <= want else (
          next_document_end(path, pos + want) or size)
      current.append(InputRange(path, pos, cut))
      current_bytes += cut - pos
      pos = cut
      if current_bytes >= target:
        tasks.append(current)
        current, current_bytes = [], 0
  if current:
    tasks.append(current)
  return tasks


def plan_tasks(paths: Sequence[str], num_task: int = 1,
               task_size_mb: Optional[float] = None
               ) -> List[List[InputRange]]:
  """The tasks of a build: `split_by_size` when `task_size_mb` is given
  (then `num_task` must be 1, its default, or the number of tasks it
  makes), else `split_by_files`. Raises a one-line UsageError."""
  if task_size_mb is None:
    return split_by_files(paths, num_task)
  if not (task_size_mb > 0 and math.isfinite(task_size_mb)):
    raise UsageError(f"--task_size_mb={task_size_mb}: must be a positive, "
                     "finite number of MiB")
  tasks = split_by_size(paths, task_size_mb)
  if num_task not in (1, len(tasks)):
    raise UsageError(f"--num_task={num_task}: --task_size_mb={task_size_mb} "
                     f"splits the input into {len(tasks)} tasks (leave "
                     "--num_task out or set it to that)")
  return tasks


def split_record(num_task: int, task_size_mb: Optional[float]) -> dict:
  """How the tasks were made, as record-infos store it."""
  if task_size_mb is None:
    return {"by": "files", "num_task": num_task}
  return {"by": "size", "num_task": num_task, "task_size_mb": task_size_mb}
