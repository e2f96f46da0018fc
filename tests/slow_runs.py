"""Processes the tests start, and the slow ones they start early: a
command run from the project root with the session's environment,
killed if the session ends first (`run`, `start`); an entry script that
kills itself right after a checkpoint (`killed_after_save`); early runs
(`early_result`, queued by conftest's fixtures)."""

import concurrent.futures
import contextlib
import io
import json
import locale
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

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
  if _forkable(cmd, env):
    return _run_forked(cmd, timeout, env, cwd)
  with subprocess.Popen(cmd, cwd=cwd, env={**_ENV, **(env or {})}, text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE) as proc, _tracked(proc):
    out, err = proc.communicate(timeout=timeout)
  return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@contextlib.contextmanager
def _tracked(proc):
  """`proc` (anything with kill()) is killed by `end_runs`, and by an error
  (a timeout included) inside the block."""
  with _LOCK:
    _PROCS.add(proc)
  try:
    yield
  except BaseException:
    proc.kill()
    raise
  finally:
    with _LOCK:
      _PROCS.discard(proc)


# Python runs forked from a server that has imported TensorFlow ----------------
# (forkserver.py): the same fresh `__main__`, less the import each run pays.
# A run whose environment changes what TensorFlow reads at import starts
# from scratch instead.
_IMPORT_TIME_ENV = ("TF_", "PYTHON", "LD_", "MALLOC", "OMP_", "KMP_")
_SERVER = {}


def _forkable(cmd, env):
  return (len(cmd) >= 2 and cmd[0] == sys.executable
          and (cmd[1] in ("-c", "-m") or cmd[1].endswith(".py"))
          and not any(k.startswith(_IMPORT_TIME_ENV) for k in env or ())
          and os.environ.get("XLNET_TESTS_NO_FORKSERVER") != "1")


def _server_path():
  """The socket of this process's fork server, started on first use."""
  with _LOCK:
    if "path" not in _SERVER:
      folder = tempfile.mkdtemp(prefix="xlnet-forkserver-")
      path = os.path.join(folder, "socket")
      _SERVER["proc"] = subprocess.Popen(
          [sys.executable, os.path.join(ROOT, "tests", "forkserver.py"), path],
          cwd=ROOT, env=_ENV, stdin=subprocess.DEVNULL)
      _SERVER["path"] = path
    path, proc = _SERVER["path"], _SERVER["proc"]
  while not os.path.exists(path):
    if proc.poll() is not None:
      raise RuntimeError(f"the fork server exited with {proc.returncode}")
    time.sleep(0.05)
  return path


class _Forked:
  """What `end_runs` needs of a forked run: kill()."""

  def __init__(self, pid):
    self.pid = pid

  def kill(self):
    try:
      os.kill(self.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


def _run_forked(cmd, timeout, env, cwd):
  encoding = locale.getpreferredencoding(False)
  with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
      socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
    conn.connect(_server_path())
    request = json.dumps({"argv": [os.fspath(a) for a in cmd[1:]],
                          "cwd": os.fspath(cwd),
                          "env": {**_ENV, **(env or {})}}).encode()
    socket.send_fds(conn, [struct.pack("!Q", len(request))],
                    [out.fileno(), err.fileno()])
    conn.sendall(request)
    reader = conn.makefile("r", encoding="ascii")
    proc = _Forked(int(reader.readline().split()[1]))
    with _tracked(proc):
      conn.settimeout(timeout)
      try:
        line = reader.readline()
      except socket.timeout:
        raise subprocess.TimeoutExpired(cmd, timeout) from None
    if not line.startswith("exit "):
      raise RuntimeError(f"the fork server lost run {proc.pid}: {line!r}")
    texts = []
    for f in (out, err):
      f.seek(0)
      texts.append(io.TextIOWrapper(f, encoding=encoding).read())
    return subprocess.CompletedProcess(cmd, int(line.split()[1]), *texts)


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
    if "proc" in _SERVER:
      _SERVER["proc"].kill()
      _SERVER["proc"].wait()
      shutil.rmtree(os.path.dirname(_SERVER["path"]), ignore_errors=True)
