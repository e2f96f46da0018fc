"""What every Apache Beam job of this project shares.

  flags        `--runner` (a Beam runner name: DirectRunner, DataflowRunner,
               FlinkRunner, SparkRunner, ...) and `--pipeline_options` (Beam's
               own options as one string), checked before any work
  errors       a unit's one-line `UserError` travels to the driver inside
               Beam's exception text (`marked`) and is raised there again as
               one line (`run`)
  counters     `Metrics` counters under one namespace per job (`count`),
               read back after the run (`run` returns them)
  runners      `--runner=DirectRunner` runs Beam's Python runner, never
               Prism (`beam_direct.py`); a runner known to lose this
               project's data is refused (`REFUSED`)

Beam itself is imported on use: a plain run of a script never loads it.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
import shlex
from typing import Callable, Dict, List, Optional

from absl import flags

from data_utils.errors import UsageError, UserError, describe_os_error

_MARK = "<<xlnet-tf-error>>"
_MARKED = re.compile(re.escape(_MARK) + "(.*?)" + re.escape(_MARK))


# The names that mean the local runner (Beam's own spellings), and the
# class that runs it.
_DIRECT = ("directrunner", "direct", "switchingdirectrunner")
LOCAL = "data_utils.beam_direct.PythonDirectRunner"
# The runners the suite runs both jobs on (docs/beam.md).
TESTED = ("DirectRunner in process and with 2 worker processes",)
# Runner class name -> why it is refused.
REFUSED = {
    "DaskRunner": "Beam's DaskRunner sends every tagged output to every "
                  "consumer and drops all sinks but the last and the outputs "
                  "of finish_bundle, so this job would lose rows on it",
}


def define_flags() -> None:
  flags.DEFINE_string("runner", None, "Run as one Apache Beam pipeline on "
                      "this runner (DirectRunner, DataflowRunner, "
                      "FlinkRunner, SparkRunner, ...). DirectRunner is Beam's "
                      "Python runner, never Prism. Tested on: "
                      f"{'; '.join(TESTED)}. Refused: "
                      f"{', '.join(REFUSED)} (they lose this "
                      "job's data).")
  flags.DEFINE_string("pipeline_options", None, "Beam's own options for "
                      "--runner, as one string (e.g. \"--direct_num_workers=2"
                      " --direct_running_mode=multi_processing\").")


def check_options(runner: Optional[str], pipeline_options: Optional[str]
                  ) -> Optional[List[str]]:
  """Beam's argument list for `--runner` and `--pipeline_options` (None
  without `--runner`), checked before any work (one-line UsageError): the
  runner exists and is not refused (`REFUSED`), and Beam knows
  every option and takes its value. `DirectRunner` is
  `beam_direct.PythonDirectRunner` (see there)."""
  if not runner:
    if pipeline_options:
      raise UsageError("--pipeline_options: needs --runner (the Beam runner "
                       "that takes them)")
    return None
  try:
    args = shlex.split(pipeline_options or "")
  except ValueError as e:
    raise UsageError(f"--pipeline_options={pipeline_options!r}: {e}") \
        from None
  if any(a == "--runner" or a.startswith("--runner=") for a in args):
    raise UsageError("--pipeline_options: give the runner as --runner, "
                     "not inside the pipeline options")
  name = runner.rsplit(".", 1)[-1].lower()
  refused = {k.lower(): why for k, why in REFUSED.items()}
  if name in refused:
    raise UsageError(f"--runner={runner}: refused: {refused[name]} (tested "
                     f"on: {'; '.join(TESTED)})")
  beam_runner = LOCAL if name in _DIRECT else runner
  try:
    from apache_beam.runners.runner import create_runner
    create_runner(beam_runner)  # also registers the runner's own options
  except ImportError as e:
    raise UsageError(f"--runner={runner}: needs a Beam extra that is not "
                     f"installed ({e}); e.g. pip install "
                     "'apache-beam[gcp]' for Dataflow") from None
  except ValueError as e:
    raise UsageError(f"--runner={runner}: {' '.join(str(e).split())}") \
        from None
  _check_known(args, runner)
  _check_values(args)
  return [f"--runner={beam_runner}"] + args




def runner_name(beam_args: List[str]) -> str:
  """The runner of `check_options`' arguments as the user named it.

  >>> runner_name(["--runner=data_utils.beam_runners.PythonDirectRunner"])
  'DirectRunner'
  >>> runner_name(["--runner=FlinkRunner", "--parallelism=2"])
  'FlinkRunner'
  """
  given = beam_args[0].split("=", 1)[1]
  return "DirectRunner" if given.endswith(".PythonDirectRunner") else given


def _check_known(args: List[str], runner: str) -> None:
  """Beam only logs "Discarding unparseable args" for an option it does not
  know (a typo runs with the default): here it is one line."""
  # Beam's own parser with every options class loaded so far (the runner's
  # among them): what PipelineOptions.get_all_options builds.
  from apache_beam.options import pipeline_options as po
  parser = po._BeamArgumentParser(allow_abbrev=False)  # pylint: disable=protected-access
  classes = {str(c): c for c in po.PipelineOptions.__subclasses__()}
  for cls in classes.values():
    cls._add_argparse_args(parser)  # pylint: disable=protected-access
  with contextlib.redirect_stderr(io.StringIO()):
    try:
      _, unknown = parser.parse_known_args(args)
    except SystemExit:
      return  # a bad value: _check_values names it
  if not unknown:
    return
  arg = unknown[0]
  known = [o for a in parser._actions for o in a.option_strings]  # pylint: disable=protected-access
  close = difflib.get_close_matches(arg.split("=", 1)[0], known, n=1)
  hint = f" (did you mean {close[0]}?)" if close else ""
  raise UsageError(f"--pipeline_options: {arg} is not an option of Beam or "
                   f"of the {runner}{hint}")


def _check_values(args: List[str]) -> None:
  """Beam parses its options with argparse, which prints its usage and
  exits on a bad value: here that is one line naming --pipeline_options."""
  from apache_beam.options.pipeline_options import (DebugOptions,
                                                    DirectOptions,
                                                    PipelineOptions)
  captured = io.StringIO()
  try:
    with contextlib.redirect_stderr(captured):
      PipelineOptions(args).get_all_options()
  except SystemExit:
    lines = captured.getvalue().strip().splitlines() or ["not valid"]
    message = lines[-1].split(" error: ", 1)[-1]
    raise UsageError(f"--pipeline_options: {message}") from None
  for experiment in PipelineOptions(args).view_as(DebugOptions).experiments \
      or []:
    name, _, value = experiment.partition("=")
    if name == "data_buffer_time_limit_ms" and value.strip() not in ("", "0"):
      raise UsageError(
          f"--pipeline_options: --experiments={experiment}: refused: Beam "
          "flushes its data streams on that timer without the writer's "
          "lock, which loses rows (beam_direct.py)")
  # Beam takes any int here; below 0 its local runner fails on an empty
  # worker list (an IndexError traceback).
  workers = PipelineOptions(args).view_as(DirectOptions).direct_num_workers
  if workers is not None and workers < 0:
    raise UsageError(f"--pipeline_options: --direct_num_workers={workers}: "
                     "must be at least 0 (0: one per CPU)")


def marked(e: Exception) -> RuntimeError:
  """What a unit raises for a user error (a `UserError`, or an `OSError`:
  an input gone since the driver checked it, a full disk): Beam wraps it
  in its own exception, and `run` finds the line again."""
  line = describe_os_error(e) if isinstance(e, OSError) else str(e)
  return RuntimeError(f"{_MARK}{line}{_MARK}")


def count(namespace: str) -> Callable[[str, int], None]:
  """`count(name, n)` adding to the Beam counter `namespace:name`."""
  def add(name: str, n: int) -> None:
    if n:
      from apache_beam.metrics import Metrics
      Metrics.counter(namespace, name).inc(n)
  return add


def run(pipeline, namespace: str, error: Callable[[str], UserError]
        ) -> Dict[str, int]:
  """Runs `pipeline` to the end; returns its counters of `namespace` (none
  where the runner keeps no metrics). A unit's `marked` error is raised as
  `error(line)`; a runner other than the local one that cannot take the
  job (no job server, a jar it cannot fetch) is one line too."""
  from apache_beam.options.pipeline_options import StandardOptions
  runner = pipeline.options.view_as(StandardOptions).runner
  try:
    result = pipeline.run()
  except Exception as e:  # pylint: disable=broad-except
    _reraise_marked(e, error)
    if runner == LOCAL:
      raise  # the local runner runs the whole job inside run(): a bug
    why = " ".join(str(e).split()) or f"{type(e).__name__} (no answer)"
    raise UsageError(f"--runner={runner}: the job could not be submitted: "
                     f"{why}") from None
  try:
    result.wait_until_finish()
  except Exception as e:  # Beam wraps a worker's error in its own
    _reraise_marked(e, error)
    raise
  counters: Dict[str, int] = {}
  try:
    found = result.metrics().query()["counters"]
  except NotImplementedError:
    found = []
  for c in found:
    if c.key.metric.namespace == namespace:
      value = c.committed if c.committed is not None else c.attempted
      counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + value
  return counters


def _reraise_marked(e: Exception, error: Callable[[str], UserError]) -> None:
  found = _MARKED.search(str(e))
  if found:
    raise error(found.group(1)) from None
