"""What every Apache Beam job of this project shares.

  flags        `--runner` (a Beam runner name: DirectRunner, DataflowRunner,
               FlinkRunner, SparkRunner, ...) and `--pipeline_options` (Beam's
               own options as one string), checked before any work
  errors       a unit's one-line `UserError` travels to the driver inside
               Beam's exception text (`marked`) and is raised there again as
               one line (`run`)
  counters     `Metrics` counters under one namespace per job (`count`),
               read back after the run (`run` returns them)

Beam itself is imported on use: a plain run of a script never loads it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from typing import Callable, Dict, List, Optional

from absl import flags

from data_utils.errors import UsageError, UserError

_MARK = "<<xlnet-tf-error>>"
_MARKED = re.compile(re.escape(_MARK) + "(.*?)" + re.escape(_MARK))


def define_flags() -> None:
  flags.DEFINE_string("runner", None, "Run as one Apache Beam pipeline on "
                      "this runner (DirectRunner, DataflowRunner, "
                      "FlinkRunner, SparkRunner, ...).")
  flags.DEFINE_string("pipeline_options", None, "Beam's own options for "
                      "--runner, as one string (e.g. \"--direct_num_workers=2"
                      " --direct_running_mode=multi_processing\").")


def check_options(runner: Optional[str], pipeline_options: Optional[str]
                  ) -> Optional[List[str]]:
  """Beam's argument list for `--runner` and `--pipeline_options` (None
  without `--runner`), checked before any work (one-line UsageError)."""
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
  _check_values(args)
  try:
    from apache_beam.runners.runner import create_runner  # heavy: on use
    create_runner(runner)
  except ImportError as e:
    raise UsageError(f"--runner={runner}: needs a Beam extra that is not "
                     f"installed ({e}); e.g. pip install "
                     "'apache-beam[gcp]' for Dataflow") from None
  except ValueError as e:
    raise UsageError(f"--runner={runner}: {' '.join(str(e).split())}") \
        from None
  return [f"--runner={runner}"] + args


def _check_values(args: List[str]) -> None:
  """Beam parses its options with argparse, which prints its usage and
  exits on a bad value: here that is one line naming --pipeline_options."""
  from apache_beam.options.pipeline_options import PipelineOptions
  captured = io.StringIO()
  try:
    with contextlib.redirect_stderr(captured):
      PipelineOptions(args).get_all_options()
  except SystemExit:
    lines = captured.getvalue().strip().splitlines() or ["not valid"]
    message = lines[-1].split(" error: ", 1)[-1]
    raise UsageError(f"--pipeline_options: {message}") from None


def marked(e: UserError) -> RuntimeError:
  """What a unit raises for a user error: Beam wraps it in its own
  exception, and `run` finds the line again."""
  return RuntimeError(f"{_MARK}{e}{_MARK}")


def count(namespace: str) -> Callable[[str, int], None]:
  """`count(name, n)` adding to the Beam counter `namespace:name`."""
  def add(name: str, n: int) -> None:
    if n:
      from apache_beam.metrics import Metrics
      Metrics.counter(namespace, name).inc(n)
  return add


def run(pipeline, namespace: str, error: Callable[[str], UserError]
        ) -> Dict[str, int]:
  """Runs `pipeline` to the end; returns its counters of `namespace`. A
  unit's `marked` error is raised as `error(line)`."""
  try:
    result = pipeline.run()
    result.wait_until_finish()
  except Exception as e:  # Beam wraps a worker's error in its own
    found = _MARKED.search(str(e))
    if found:
      raise error(found.group(1)) from None
    raise
  counters: Dict[str, int] = {}
  for c in result.metrics().query()["counters"]:
    if c.key.metric.namespace == namespace:
      value = c.committed if c.committed is not None else c.attempted
      counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + value
  return counters
