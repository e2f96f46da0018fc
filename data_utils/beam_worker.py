"""The local runner's worker processes (`beam_direct.py`): Beam's SDK
harness, stopped as soon as its driver is gone.

Beam's own worker notices a dead driver only when its gRPC streams break
and its main thread runs: a worker still connecting waits out two 60 s
timeouts, and one inside a C call that holds the GIL (a long element)
runs it to its end, so a re-run of the job would race it. Here each worker
is the driver's own child (its command `exec`s, no shell in between) and
stops when its parent is no longer the driver: on Linux the kernel kills
it (`PR_SET_PDEATHSIG`, which needs no GIL), and everywhere a thread
checks its parent every `POLL_SECONDS`.

The runner starts it as `python -c` calling `main(driver_pid)`
(`worker_command`): a `python -m` module would be an entry point.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import sys
import threading
import time

POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def worker_command(driver_pid: int) -> str:
  """The shell command line that starts a worker of driver `driver_pid`
  (Beam runs it with `sh -c`)."""
  code = f"from data_utils import beam_worker; beam_worker.main({driver_pid})"
  return f"exec {shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def _stop(driver_pid: int) -> None:
  sys.stderr.write(f"beam_worker: driver {driver_pid} is gone: stopping\n")
  sys.stderr.flush()
  os._exit(1)  # pylint: disable=protected-access


def watch_driver(driver_pid: int) -> None:
  """Stops this process when its parent is no longer `driver_pid`."""
  if sys.platform.startswith("linux"):
    # The kernel sends it when the driver thread that started this process
    # ends: Beam's thread that waits for this process, so only with the driver.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
  # After the prctl: a driver that died before it left us to init already.
  if os.getppid() != driver_pid:
    _stop(driver_pid)

  def poll() -> None:
    while os.getppid() == driver_pid:
      time.sleep(POLL_SECONDS)
    _stop(driver_pid)
  threading.Thread(target=poll, name="watch_driver", daemon=True).start()


def main(driver_pid: int) -> None:
  watch_driver(driver_pid)
  # Imported after the watch starts, so a driver killed during this slow
  # import stops the worker too.
  from apache_beam.runners.worker import sdk_worker_main
  sdk_worker_main.main(sys.argv)
