"""A process that has imported TensorFlow and the project once, and forks a
fresh copy of itself for each entry script a test runs.

Each run is still its own process, started from a clean `__main__`: the
script's flags, graphs, files and exit code are its own. What it skips is
the 4-9 CPU-seconds of `import tensorflow`, tf_keras and Beam that every
`python run_*.py` pays, over ~150 runs in the suite.

Protocol (one Unix-socket connection per run): the client sends its stdout
and stderr file descriptors with an 8-byte length, then a JSON request
{"argv", "cwd", "env"}; the server answers "pid N\\n", then, when the run
ends, "exit CODE\\n" (CODE negative for a signal, as `subprocess` does).

Usage: python tests/forkserver.py SOCKET_PATH (started by slow_runs.py).
"""

import atexit
import importlib
import json
import os
import pkgutil
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SITE_PATH = sys.path[1:]   # the path a fresh `python x.py` has after [0]
sys.path.insert(0, ROOT)
import data_utils  # noqa: E402  (sets TF_USE_LEGACY_KERAS first)
import xlnet_tf  # noqa: E402

# Every module of the project (none defines flags at import), and through
# them TensorFlow, tf_keras, Beam and the rest: a run imports only its script.
for _package in (data_utils, xlnet_tf):
  for _module in pkgutil.walk_packages(_package.__path__,
                                       _package.__name__ + "."):
    importlib.import_module(_module.name)


def _recv_exact(conn, n):
  data = b""
  while len(data) < n:
    chunk = conn.recv(n - len(data))
    if not chunk:
      raise EOFError("client went away")
    data += chunk
  return data


def _child(request, out_fd, err_fd):
  """In the forked child: become `python ARGV...` and never return."""
  code = 1
  try:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    try:
      if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[:] = [""] + _SITE_PATH
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
      elif argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[:] = [request["cwd"]] + _SITE_PATH
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
      else:
        sys.argv = list(argv)
        sys.path[:] = [os.path.dirname(os.path.abspath(argv[0]))] + _SITE_PATH
        runpy.run_path(argv[0], run_name="__main__")
      code = 0
    except SystemExit as e:
      if e.code is None:
        code = 0
      elif isinstance(e.code, int):
        code = e.code
      else:
        print(e.code, file=sys.stderr)
        code = 1
    except BaseException:  # as the interpreter would: a traceback, exit 1
      traceback.print_exc()
      code = 1
    # What the interpreter does at exit: wait for threads, run atexit.
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
  finally:
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except BaseException:  # pylint: disable=broad-except
        pass
    os._exit(code & 0xFF if code >= 0 else 1)


def serve(path):
  parent = os.getppid()
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(16)
  selector = selectors.DefaultSelector()
  selector.register(listener, selectors.EVENT_READ)
  running = {}   # pid -> the connection waiting for its exit
  while os.getppid() == parent:
    for _ in selector.select(timeout=0.05):
      conn, _ = listener.accept()
      try:
        msg, fds, _, _ = socket.recv_fds(conn, 8, 2)
        request = json.loads(_recv_exact(conn, struct.unpack("!Q", msg)[0]))
      except (EOFError, OSError, ValueError):
        conn.close()
        continue
      pid = os.fork()
      if pid == 0:
        listener.close()
        conn.close()
        for other in running.values():
          other.close()
        _child(request, *fds)
      for fd in fds:
        os.close(fd)
      conn.sendall(f"pid {pid}\n".encode())
      running[pid] = conn
    while running:
      pid, status = os.waitpid(-1, os.WNOHANG)
      if pid == 0:
        break
      conn = running.pop(pid, None)
      if conn is not None:
        try:
          conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
          pass
        conn.close()
  for pid in running:   # the tests' process is gone: so are its runs
    os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
  serve(sys.argv[1])
