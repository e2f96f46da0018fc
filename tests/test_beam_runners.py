"""The runner a user names is the runner that runs, and every bad runner,
option or argument of the two Beam jobs is one line before any work.

- `--runner=DirectRunner` runs Beam's Python runner (`beam_direct`), never
  Prism (Beam 2.77's DirectRunner tries Prism first, downloading it).
- A runner known to lose this project's data (DaskRunner) is refused.
- A Beam option Beam does not know (a typo) is refused, with Beam's own
  close match.
- A runner that cannot take the job (no job server) is one line.
- The entry scripts refuse a stray argument and a flag absl cannot parse
  in one line with exit code 2 (absl exits 1 after its usage text).
- A killed driver's worker processes stop within a few seconds.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.runners.worker import data_plane
from apache_beam.testing.util import assert_that, equal_to

from conftest import ROOT, corpus_slice, refused, spiece_path, start
from data_utils import beam_jobs
from data_utils.beam_direct import PythonDirectRunner
from data_utils.errors import UsageError

TWO_WORKERS = "--direct_num_workers=2 --direct_running_mode=multi_processing"


def _count_pipeline(beam_args):
  pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
  add = beam_jobs.count("test")
  _ = (pipeline | beam.Create(list(range(1, 11)))
       | beam.Map(lambda x: add("sum", x)))
  return pipeline


@pytest.mark.parametrize("options", [None, TWO_WORKERS])
def test_direct_runner_is_the_python_runner_never_prism(monkeypatch, options):
  def prism(*args, **kwargs):
    raise AssertionError("Prism was tried")
  monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", prism)
  beam_args = beam_jobs.check_options("DirectRunner", options)
  assert beam_args[0] == f"--runner={beam_jobs.LOCAL}"
  assert beam_jobs.runner_name(beam_args) == "DirectRunner"
  pipeline = _count_pipeline(beam_args)
  assert type(pipeline.runner) is PythonDirectRunner  # pylint: disable=unidiomatic-typecheck
  # Every element counted once, in process and on two worker processes.
  assert beam_jobs.run(pipeline, "test", UsageError) == {"sum": 55}


@pytest.mark.parametrize("runner, options, line", [
    ("DirectRunner", "--direct_num_workerz=2",
     "--pipeline_options: --direct_num_workerz=2 is not an option of Beam "
     "or of the DirectRunner (did you mean --direct_num_workers?)"),
    ("DirectRunner", "--direct_num_workers=2 stray",
     "--pipeline_options: stray is not an option of Beam or of the "
     "DirectRunner"),
    ("FlinkRunner", "--parallelizm=2",
     "--pipeline_options: --parallelizm=2 is not an option of Beam or of "
     "the FlinkRunner (did you mean --parallelism?)"),
    ("DirectRunner", "--direct_num_workers=two",
     "--pipeline_options: argument --direct_num_workers: invalid int value: "
     "'two'"),
    ("DirectRunner", "--experiments=data_buffer_time_limit_ms=1000",
     "--pipeline_options: --experiments=data_buffer_time_limit_ms=1000: "
     "refused: Beam flushes its data streams on that timer without the "
     "writer's lock, which loses rows (beam_direct.py)"),
    ("DaskRunner", None,
     "--runner=DaskRunner: refused: Beam's DaskRunner sends every tagged "
     "output to every consumer and drops all sinks but the last and the "
     "outputs of finish_bundle, so this job would lose rows on it (tested "
     "on: DirectRunner in process and with 2 worker processes)"),
])
def test_bad_runner_and_options_are_one_line(runner, options, line):
  with pytest.raises(UsageError) as e:
    beam_jobs.check_options(runner, options)
  assert str(e.value) == line


def test_refused_by_class_path_too():
  with pytest.raises(UsageError) as e:
    beam_jobs.check_options("apache_beam.runners.dask.dask_runner.DaskRunner",
                            None)
  assert str(e.value).startswith(
      "--runner=apache_beam.runners.dask.dask_runner.DaskRunner: refused: ")


def test_runner_without_a_job_server_is_one_line(monkeypatch, tmp_path):
  """Flink offline: Beam cannot fetch its job server's jar (a RuntimeError
  with a traceback before); a portable endpoint that nothing answers."""
  monkeypatch.setenv("HOME", str(tmp_path))  # no jar cached

  def offline(*args, **kwargs):
    raise urllib.error.URLError("offline")
  monkeypatch.setattr(urllib.request, "urlopen", offline)
  with pytest.raises(UsageError) as e:
    beam_jobs.run(_count_pipeline(beam_jobs.check_options("FlinkRunner",
                                                          None)),
                  "test", UsageError)
  assert str(e.value).startswith(
      "--runner=FlinkRunner: the job could not be submitted: Unable to "
      "fetch remote job server jar at ")
  assert "\n" not in str(e.value)
  with socket.socket() as s:  # a port nothing listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  args = beam_jobs.check_options(
      "PortableRunner", f"--job_endpoint=127.0.0.1:{port} "
      "--job_server_timeout=2")
  with pytest.raises(UsageError) as e:
    beam_jobs.run(_count_pipeline(args), "test", UsageError)
  assert str(e.value) == ("--runner=PortableRunner: the job could not be "
                          "submitted: FutureTimeoutError (no answer)")


def test_scripts_refuse_stray_arguments_and_bad_flags_in_one_line(tmp_path):
  """The unquoted glob the shell expands: the builder used to take the
  first file and drop the rest; batch prediction printed its whole help."""
  for name in "abc":
    (tmp_path / f"{name}.txt").write_text("text\n")
  builder = [sys.executable, "-m",
             "data_utils.pretraining.create_pretrain_data"]
  runs = [
      start(builder + ["--input_glob", str(tmp_path / "a.txt"),
                       str(tmp_path / "b.txt"), str(tmp_path / "c.txt"),
                       "--sp_path=x", f"--save_dir={tmp_path}/out"], 300),
      start(builder + ["--input_glob=x", "--sp_path=x",
                       f"--save_dir={tmp_path}/out", "--bsz_per_host=abc"],
            300),
      start([sys.executable, "run_batch_predict.py", "--export_dir=x",
             "stray"], 300)]
  a, b, c = (r.result() for r in runs)
  assert refused(a) == (
      f"create_pretrain_data: unexpected arguments {tmp_path}/b.txt "
      f"{tmp_path}/c.txt: every option is --name=value (a glob the shell "
      "expanded? put it in quotes)")
  assert refused(b) == ("create_pretrain_data: flag --bsz_per_host=abc: "
                        "invalid literal for int() with base 10: 'abc'")
  assert refused(c) == ("run_batch_predict: unexpected argument stray: every "
                        "option is --name=value (a glob the shell expanded? "
                        "put it in quotes)")
  assert "USAGE" not in c.stdout + c.stderr  # no 58-line help
  assert not (tmp_path / "out").exists()


def test_no_rows_lost_between_stages_with_two_workers(monkeypatch):
  """Beam's FnApiRunner flushed the driver's data streams on a 1 s timer
  without the writer's lock and lost whole chunks of a big stage input
  (several in four runs of four of this pipeline, stock): the local runner
  runs without that timer (its data servicer is built with 0) and every
  element arrives."""
  timers = []
  servicer = data_plane.BeamFnDataServicer.__init__

  def spied(self, data_buffer_time_limit_ms=0):
    timers.append(data_buffer_time_limit_ms)
    servicer(self, data_buffer_time_limit_ms)
  monkeypatch.setattr(data_plane.BeamFnDataServicer, "__init__", spied)
  # 200 KB elements: a worker's share of the stage input passes Beam's
  # 100 MB send queue, which is where the timed flush blocked.
  n, size = 1600, 50_000
  args = beam_jobs.check_options(
      "DirectRunner", "--direct_num_workers=2 "
      "--direct_running_mode=multi_threading")
  with beam.Pipeline(options=PipelineOptions(args)) as p:
    big = (p | beam.Create(range(n)) | beam.Map(lambda i: (i % 24, i))
           | "Group" >> beam.GroupByKey()
           | beam.FlatMap(lambda kv: [(i, np.full(size, i, np.float32))
                                      for i in kv[1]]))
    other = big | beam.Filter(lambda kv: kv[0] < 0) | "Meet" >> \
        beam.GroupByKey()
    checked = ((big, other) | beam.Flatten()
               | beam.Map(lambda kv: int(kv[1][0]) == kv[0])
               | beam.combiners.Count.PerElement())
    assert_that(checked, equal_to([(True, n)]))
  assert timers and set(timers) == {0}


# A driver whose workers mark `argv[1].<pid>` as they enter an element that
# holds the GIL in one C call for minutes: Beam's harness cannot run its own
# exit then.
_LONG_ELEMENT_DRIVER = """
import os, sys
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from data_utils import beam_jobs
from data_utils.errors import UsageError

def long_element(x, mark):
  open(f"{mark}.{os.getpid()}", "w").close()
  return sum(range(10**11))

args = beam_jobs.check_options("DirectRunner", sys.argv[2])
pipeline = beam.Pipeline(options=PipelineOptions(args))
_ = (pipeline | beam.Create([0, 1]) | beam.Reshuffle()
     | beam.Map(long_element, sys.argv[1]))
beam_jobs.run(pipeline, "test", UsageError)
"""


def _processes():
  """{pid: (parent pid, state, start time, command line)} from /proc."""
  out = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat", encoding="utf-8") as f:
        stat = f.read().rsplit(")", 1)[1].split()
      with open(f"/proc/{name}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
      continue
    out[int(name)] = (int(stat[1]), stat[0], stat[19], cmdline)
  return out


def _descendants(pid):
  """{pid: start time} of every live process below `pid`."""
  found, table, todo = {}, _processes(), [pid]
  while todo:
    parent = todo.pop()
    for child, (ppid, state, started, _) in table.items():
      if ppid == parent and state != "Z":
        found[child] = started
        todo.append(child)
  return found


def _live(processes):
  """Those of `processes` ({pid: start time}) still running (a zombie, or a
  new process with a reused pid, is gone)."""
  table = _processes()
  return {p: t for p, t in processes.items()
          if p in table and table[p][1] != "Z" and table[p][2] == t}


def _worker_children(pid):
  return [c for c, (ppid, _, _, cmdline) in _processes().items()
          if ppid == pid and "worker" in cmdline]


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc")
@pytest.mark.parametrize("when", ["starting", "inside a long element"])
def test_a_killed_drivers_workers_stop(shared, tmp_path, when):
  """Beam's workers noticed a SIGKILLed driver only when their gRPC streams
  broke and their main thread ran: workers still connecting lived on for
  about 2 minutes (the records job), and one inside an element that holds
  the GIL ran it to its end; a re-run raced them. Now every process the
  driver started is gone within 10 s."""
  if when == "starting":
    cmd = [sys.executable, "-m",
           "data_utils.pretraining.create_pretrain_data",
           f"--input_glob={corpus_slice(shared, tmp_path, 2000)}",
           f"--sp_path={spiece_path(shared)}",
           f"--save_dir={tmp_path}/out", "--seq_len=64", "--reuse_len=32",
           "--bsz_per_host=8", "--num_predict=10", "--perm_size=16",
           "--runner=DirectRunner", f"--pipeline_options={TWO_WORKERS}"]
  else:
    cmd = [sys.executable, "-c", _LONG_ELEMENT_DRIVER,
           str(tmp_path / "busy"), TWO_WORKERS]
  driver = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
  workers = {}
  try:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
      if when == "starting":  # killed while they import Beam and connect
        ready = len(_worker_children(driver.pid)) == 2
      else:
        ready = any(n.startswith("busy.") for n in os.listdir(tmp_path))
      if ready:
        break
      time.sleep(0.05)
    workers = _descendants(driver.pid)
    assert driver.poll() is None and workers, "the workers never started"
    driver.kill()
    driver.wait()
    killed = time.monotonic()
    while _live(workers) and time.monotonic() - killed < 10:
      time.sleep(0.1)
    assert not _live(workers), (
        f"worker processes alive 10 s after their driver was killed "
        f"({when}): {sorted(_live(workers))}")
  finally:
    driver.kill()
    driver.wait()
    for pid in _live(workers):
      os.kill(pid, signal.SIGKILL)
