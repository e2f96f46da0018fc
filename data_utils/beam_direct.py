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
"""

from __future__ import annotations

from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle

class PythonDirectRunner(fn_runner.FnApiRunner):
  """Beam's DirectRunner as its batch path runs it (the FnApiRunner, with
  the pipeline options provisioned to its workers), without Prism."""

  def run_pipeline(self, pipeline, options):
    encoded = JobServiceHandle.encode_pipeline_options(
        options.get_all_options())
    self._provision_info = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return super().run_pipeline(pipeline, options)
