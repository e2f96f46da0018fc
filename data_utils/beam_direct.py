"""The local runner of this project's Beam jobs (`--runner=DirectRunner`).

Beam 2.77's `DirectRunner` first tries Prism, a Go binary it downloads at
run time, and falls back to its Python runner only when that fails: offline
users would get one runner and online users another, with other options.
`PythonDirectRunner` is that Python runner (the FnApiRunner, as the
DirectRunner's batch path runs it), in process or, with
`--direct_num_workers=N --direct_running_mode=multi_processing`, on N worker
processes: the runner the tests run is the one users get.
`beam_jobs.check_options` names it by its class path, so only a job that
runs on Beam imports this module (and Beam).

Beam 2.77's FnApiRunner flushes the driver's gRPC data streams from a timer
thread (`worker_handlers.DATA_BUFFER_TIME_LIMIT_MS`, 1 s) that does not
hold the writer's lock: while the driver writes a stage's input to a worker
(`BundleManager._send_input_to_worker`), a flush that blocks on a full send
queue (past 100 MB) resets the buffer after the writer has appended more,
and those chunks never reach the worker. A job with 2 workers lost
thousands of rows that way, silently. This runner turns the timer off
(size-based flushing only, as the SDK workers already do by default); an
`--experiments=data_buffer_time_limit_ms=N` that would turn it on in the
workers is refused (`beam_jobs.check_options`).

Its worker processes are `beam_worker.py`'s: Beam's own keep running after
a killed driver (a minute or two, or to the end of a long element), and
these stop within a second.
"""

from __future__ import annotations

import os
import sys

from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import (fn_runner,
                                                           worker_handlers)
from apache_beam.runners.portability.portable_runner import JobServiceHandle

from data_utils import beam_worker

# The worker command FnApiRunner.run_pipeline gives multi_processing.
_BEAM_WORKER = f"{sys.executable} -m apache_beam.runners.worker.sdk_worker_main"


class PythonDirectRunner(fn_runner.FnApiRunner):
  """Beam's DirectRunner as its batch path runs it (the FnApiRunner, with
  the pipeline options provisioned to its workers), without Prism."""

  def run_pipeline(self, pipeline, options):
    encoded = JobServiceHandle.encode_pipeline_options(
        options.get_all_options())
    self._provision_info = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    # Read when the run builds its gRPC server and embedded workers.
    timed = worker_handlers.DATA_BUFFER_TIME_LIMIT_MS
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 0
    try:
      return super().run_pipeline(pipeline, options)
    finally:
      worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = timed

  def run_via_runner_api(self, pipeline_proto, options):
    # Beam's workers outlive a killed driver; ours stop (beam_worker.py).
    for environment in pipeline_proto.components.environments.values():
      if (environment.urn == python_urns.SUBPROCESS_SDK and
          environment.payload == _BEAM_WORKER.encode("utf-8")):
        environment.payload = beam_worker.worker_command(
            os.getpid()).encode("utf-8")
    return super().run_via_runner_api(pipeline_proto, options)
