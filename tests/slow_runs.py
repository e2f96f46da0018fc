"""Processes the tests start, and the slow ones they start early: a
command run from the project root with the session's environment,
killed if the session ends first (`run`, `start`); an entry script that
kills itself right after a checkpoint (`killed_after_save`); early runs
(`early_result`, queued by conftest's fixtures)."""

import concurrent.futures
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The environment of every run below: the session's own (a test's
# monkeypatch.setenv must not reach another test's run in the background).
_ENV = dict(os.environ)

# Slow runs side by side ------------------------------------------------------
# CI has 2 cores and a test keeps about one busy. Runs that depend on nothing
# else a test does can overlap: `start` begins a command at once on a
# background thread; an early run (a test marked `@pytest.mark.early(name)`,
# `name` a function of its module taking a fresh folder) begins when the
# session does, one at a time in the order of the tests, and the test takes
# what it returned with `early_result`. What a test checks is unchanged:
# only when its run happens.
_PROCS = set()
_LOCK = threading.Lock()
_NOW = concurrent.futures.ThreadPoolExecutor(4, "start")
_QUEUE = concurrent.futures.ThreadPoolExecutor(1, "early")
_EARLY = {}
_OVER = threading.Event()  # the session ended: start nothing more


def run(cmd, timeout=900, env=None, cwd=ROOT):
  """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
  from `cwd` (the project root), with the session's environment plus `env`
  (e.g. an object-store fixture's); killed if the session ends first."""
  if _OVER.is_set():
    raise RuntimeError("the test session is over")
  with subprocess.Popen(cmd, cwd=cwd, env={**_ENV, **(env or {})}, text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE) as proc:
    with _LOCK:
      _PROCS.add(proc)
    try:
      out, err = proc.communicate(timeout=timeout)
    except BaseException:
      proc.kill()
      raise
    finally:
      with _LOCK:
        _PROCS.discard(proc)
  return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def start(cmd, timeout=900, env=None, cwd=ROOT):
  """`run(cmd, timeout, env, cwd)` begun now on a background thread;
  `.result()` waits for its CompletedProcess."""
  return _NOW.submit(run, cmd, timeout, env, cwd)


def killed_after_save(setup: str = "") -> str:
  """A program for `python -c` taking `script kill_at flags...`: runs the
  entry script, which SIGKILLs itself right after saving the checkpoint of
  step `kill_at` (0: never): a kill at a known point, not a race with a run
  this fast. `setup`: lines run first (e.g. a patch)."""
  return setup + """
import os, runpy, signal, sys
from xlnet_tf.training import Trainer
script, kill_at = sys.argv.pop(1), int(sys.argv.pop(1))
real_save = Trainer._save
def save(self, step):
  path = real_save(self, step)
  if step == kill_at:
    os.kill(os.getpid(), signal.SIGKILL)
  return path
Trainer._save = save
sys.argv[0] = script
runpy.run_path(script, run_name="__main__")
"""



def queue_early_runs(items, tmp_path_factory):
  """Queues the early runs the tests `items` name, in their order."""
  for item in items:
    if item.get_closest_marker("skip"):
      continue  # its run would be for nothing
    # A module's marks before its tests' own: the order an early run may
    # rely on (see early_result).
    for mark in reversed(list(item.iter_markers("early"))):
      for name in mark.args:
        fn = getattr(item.module, name)
        if fn not in _EARLY:
          _EARLY[fn] = _QUEUE.submit(fn, tmp_path_factory.mktemp(name))


def early_result(fn):
  """What early run `fn` returned (waiting for it to end). An early run
  may take the result of one queued before it (never after: the runs go
  one at a time)."""
  assert fn in _EARLY, f"mark the test @pytest.mark.early({fn.__name__!r})"
  future = _EARLY[fn]
  if threading.current_thread().name.startswith("early"):
    assert future.done(), f"early run {fn.__name__} is named too late"
  return future.result()




def end_runs():
  """The session is over: no early run starts, and every process still
  running is killed."""
  _OVER.set()
  for future in _EARLY.values():
    future.cancel()
  with _LOCK:
    for proc in _PROCS:
      proc.kill()
