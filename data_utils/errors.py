"""The project's error vocabulary and the one place where entry points turn
expected errors into a single line.

`UserError` is bad input: a file, flag or record the user gave, or a machine
condition the user can fix (a full disk, an unwritable folder). Its message
names the file, flag or record and says what is wrong. Every other exception
is a bug and keeps its traceback.

Every entry point's body runs through `run_main`:

    >>> import io
    >>> def body():
    ...   raise UserError("--max_seq_length=0: must be at least 4")
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...   code = run_main("run_classifier", body)
    >>> code, err.getvalue()
    (2, 'run_classifier: --max_seq_length=0: must be at least 4\\n')
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, List, Optional

from absl import app, flags


class UserError(ValueError):
  """Bad input, named in the message: printed as one line, exit code 2.

  A ValueError, so library callers that caught ValueError still do.
  """


class UsageError(UserError):
  """A flag or option value that cannot work (the message names the flag)."""


def one_line(text) -> str:
  """Folds whitespace, so whatever a library said stays on one line.

  >>> one_line("a\\n  b\\tc ")
  'a b c'
  """
  return " ".join(str(text).split())


def describe_os_error(e: OSError) -> str:
  """`path: reason` for an OSError (both paths for a rename).

  >>> describe_os_error(PermissionError(13, "Permission denied", "/x/y"))
  '/x/y: Permission denied'
  """
  names = [str(n) for n in (e.filename, e.filename2) if n]
  reason = e.strerror or str(e)
  return ": ".join([" -> ".join(names), reason]) if names else reason


def _tf_errors():
  # Looked up, not imported: this module stays light (tokenizer worker
  # processes import it) and TensorFlow's errors can only come from a
  # process that has imported TensorFlow.
  tf = sys.modules.get("tensorflow")
  return getattr(tf, "errors", None)


def _tf_input_error(e: BaseException) -> bool:
  # TensorFlow's file-system and record errors: a path or a record the user
  # gave, not a bug. TF's own message names the file where it knows it.
  errors = _tf_errors()
  return errors is not None and isinstance(
      e, (errors.DataLossError, errors.NotFoundError,
          errors.PermissionDeniedError))


def _tf_message(e) -> str:
  # TF appends op context ("[Op:IteratorGetNext]", "\n\t [[{{node ...") to
  # the message; the first line is what the user needs.
  first = str(e.message).strip().splitlines()[0] if e.message else str(e)
  return first.split(" [Op:")[0].strip()


def is_disk_full(e: BaseException) -> bool:
  """True for a write that failed for lack of space (OS or TensorFlow)."""
  if isinstance(e, OSError) and e.errno == 28:
    return True
  errors = _tf_errors()
  return errors is not None and isinstance(e, errors.OpError) and \
      "No space left on device" in str(e)


@contextlib.contextmanager
def disk_full_is(message: str):
  """Inside the block, a write that fails for lack of space raises
  `UserError(message)` (one line naming what was being written)."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    if is_disk_full(e):
      raise UserError(message) from None
    raise


def user_message(e: BaseException) -> Optional[str]:
  """The one-line message for an expected error, None for a bug."""
  if isinstance(e, UserError):
    return one_line(e)
  if isinstance(e, OSError):
    return one_line(describe_os_error(e))
  if _tf_input_error(e) or is_disk_full(e):
    return one_line(_tf_message(e))
  return None


def run_main(program: str, body: Callable[[], Optional[int]]) -> int:
  """Runs an entry point's `body`; an expected error becomes
  `program: message` on stderr and exit code 2, a bug keeps its traceback."""
  try:
    return body() or 0
  except Exception as e:  # pylint: disable=broad-except
    message = user_message(e)
    if message is None:
      raise
    sys.stderr.write(f"{program}: {message}\n")
    sys.stderr.flush()
    return 2


def parse_flags(program: str, argv: List[str],
                flag_values: flags.FlagValues = flags.FLAGS) -> List[str]:
  """absl's flag parsing for `app.run`, where a flag that does not parse and
  an argument that is not a flag are one line `program: ...` on stderr with
  exit code 2 (absl prints its usage and exits 1; a stray argument it hands
  to the script, which ignored it: an unquoted `--input_glob corpus/*.txt`,
  expanded by the shell, silently lost all files but the first).

    >>> import io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...   try:
    ...     parse_flags("run_x", ["run_x", "b.txt", "c.txt"],
    ...                 flags.FlagValues())
    ...   except SystemExit as e:
    ...     code = e.code
    >>> code, err.getvalue()  # doctest: +NORMALIZE_WHITESPACE
    (2, 'run_x: unexpected arguments b.txt c.txt: every option is
    --name=value (a glob the shell expanded? put it in quotes)\\n')
  """
  try:
    rest = flag_values(argv)
  except flags.Error as e:
    _usage_exit(program, one_line(e))
  if len(rest) > 1:
    plural = "s" if len(rest) > 2 else ""
    _usage_exit(program, f"unexpected argument{plural} {' '.join(rest[1:])}:"
                " every option is --name=value (a glob the shell expanded? "
                "put it in quotes)")
  return rest


def _usage_exit(program: str, message: str) -> None:
  sys.stderr.write(f"{program}: {message}\n")
  sys.stderr.flush()
  sys.exit(2)


def run_app(program: str, main: Callable[[List[str]], Optional[int]]
            ) -> None:
  """`app.run(main)` with `parse_flags`: every entry script's last line."""
  app.run(main, flags_parser=lambda argv: parse_flags(program, argv))


def check_positive(value, flag: str, minimum: int = 1) -> None:
  """UsageError unless `value >= minimum`.

  >>> check_positive(0, "train_batch_size")
  Traceback (most recent call last):
  ...
  data_utils.errors.UsageError: --train_batch_size=0: must be at least 1
  """
  if value is None or value < minimum:
    raise UsageError(f"--{flag}={value}: must be at least {minimum}")
