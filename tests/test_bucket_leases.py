"""Leases in buckets (issue 53): two builds into one save_dir in a bucket
are told apart even when started at the same moment, a dead run's claim
does not block the save_dir for good, and a dead writer's temp objects are
removed by a later run on any host, while a live writer's stay.

Every run is a real process on the real test servers (tests/object_stores.py),
with a lease period of LEASE seconds (XLNET_TF_LEASE_SECONDS) so that expiry
takes seconds. A process presents itself as a host by replacing
`socket.gethostname` in itself (test-only: the project reads the real name).
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, corpus_slice, refused, run, spiece_path
from object_stores import make_gcs_bucket, make_s3_bucket

LEASE = 4
# Past a lease period, its stamp slack (S3 stamps whole seconds) and a margin.
AFTER_EXPIRY = LEASE + 2.5
PROGRAM = "create_pretrain_data"

# Holds save_dir.claimed(url, {"seq_len": n}) for `hold` seconds, entered
# when the start file appears (so runs started apart enter together).
CLAIM = r"""
import os, sys, time
from data_utils.errors import run_main
from data_utils.pretraining import save_dir
url, seq_len, start, hold = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    float(sys.argv[4])
def body():
  print("ready", flush=True)
  while not os.path.exists(start):
    time.sleep(0.002)
  with save_dir.claimed(url, {"seq_len": seq_len}):
    print("holds", flush=True)
    time.sleep(hold)
sys.exit(run_main("create_pretrain_data", body))
"""

# As host argv[1]: "write DIR" opens a temp folder in DIR, puts an object
# in it, prints its path and waits; "clean DIR" prints what
# remove_stale_temps(DIR) removed; "tree DIR" prints every key below DIR.
TEMPS = r"""
import json, socket, sys, time
socket.gethostname = lambda: sys.argv[1]
from data_utils import atomic, paths
cmd, folder = sys.argv[2:4]
if cmd == "write":
  with atomic.temp_dir(folder) as tmp:
    with paths.open_file(paths.join(tmp, "part-0"), "wb") as f:
      f.write(b"half")
    print(tmp, flush=True)
    time.sleep(600)
elif cmd == "clean":
  print(json.dumps(atomic.remove_stale_temps(folder)))
else:
  print(json.dumps(paths.walk_files(folder) if paths.isdir(folder) else []))
"""


def _store(request, name):
  store = request.getfixturevalue(f"{name}_server")
  bucket = f"leases-{uuid.uuid4().hex[:10]}"
  if name == "gcs":
    make_gcs_bucket(store, bucket)
    return store, f"gs://{bucket}"
  make_s3_bucket(store, bucket)
  return store, f"s3://{bucket}"


@pytest.fixture(params=["s3", "gcs"])
def store(request):
  """(Store, the URL of a new bucket) on each server."""
  return _store(request, request.param)


def _env(store):
  return {**os.environ, **store.env, "XLNET_TF_LEASE_SECONDS": str(LEASE),
          "TF_CPP_MIN_LOG_LEVEL": "2"}


@contextlib.contextmanager
def _processes():
  """Starts programs (`begin(code, *args)`) that are killed if the test
  ends first."""
  procs = []

  def begin(store, code, *args):
    procs.append(subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)], cwd=ROOT,
        env=_env(store), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True))
    return procs[-1]
  try:
    yield begin
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
      proc.communicate()


def _line(proc):
  """The next line `proc` prints (the test fails if it ends first)."""
  line = proc.stdout.readline()
  assert line, proc.communicate(timeout=60)[1][-3000:]
  return line.strip()


def _ended(proc):
  out, err = proc.communicate(timeout=120)
  return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _temps(store, *args):
  res = run([sys.executable, "-c", TEMPS, *args], 120, _env(store))
  assert res.returncode == 0, res.stderr[-3000:]
  return json.loads(res.stdout.strip().splitlines()[-1])


def _busy(url, mine, theirs):
  return (f"{PROGRAM}: --save_dir={url}: another build is being written "
          f"into it now (seq_len={theirs}, this run seq_len={mine}); wait "
          "for it to end, or use another --save_dir")


def test_runs_of_two_builds_started_together_one_build_proceeds(
    store, tmp_path):
  """Three runs released at one moment, two of one build: one build
  proceeds (both its runs), the other's run is refused in one line, exit
  2; nothing of the claim is left after."""
  server, bucket = store
  url = f"{bucket}/out"
  start = tmp_path / "start"
  with _processes() as begin:
    runs = [(n, begin(server, CLAIM, url, n, start, 2)) for n in (32, 32, 64)]
    for _, proc in runs:
      assert _line(proc) == "ready"
    start.touch()
    results = [(n, _ended(proc)) for n, proc in runs]
  proceeded = {n for n, res in results if res.returncode == 0}
  assert len(proceeded) == 1, [(n, r.returncode, r.stderr[-500:])
                               for n, r in results]
  for n, res in results:
    if n in proceeded:
      assert res.stdout.split() == ["holds"], res.stderr[-3000:]
    else:
      assert refused(res) == _busy(url, n, {32: 64, 64: 32}[n])
      assert "holds" not in res.stdout
  assert _temps(server, "host-a", "tree", bucket) == []


def test_a_dead_runs_claim_is_taken_once_its_lease_expires(store, tmp_path):
  """A run killed while it holds the claim: another build is refused while
  the dead run's lease is live, and proceeds once it has expired; the
  claim and the dead run's lease are gone after."""
  server, bucket = store
  url = f"{bucket}/out"
  start = tmp_path / "start"
  start.touch()
  with _processes() as begin:
    dead = begin(server, CLAIM, url, 32, start, 600)
    assert [_line(dead), _line(dead)] == ["ready", "holds"]
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    killed_at = time.monotonic()
    other = _ended(begin(server, CLAIM, url, 64, start, 0))
    assert refused(other) == _busy(url, 64, 32)
    time.sleep(max(0.0, killed_at + AFTER_EXPIRY - time.monotonic()))
    other = _ended(begin(server, CLAIM, url, 64, start, 0))
  assert other.returncode == 0 and other.stdout.split() == [
      "ready", "holds"], other.stderr[-3000:]
  assert _temps(server, "host-a", "tree", bucket) == []


@pytest.mark.e2e
def test_the_records_cli_is_refused_while_another_build_holds_a_bucket(
    shared, s3_server, tmp_path):
  """create_pretrain_data into an s3:// save_dir that a run of another
  build holds: one line naming the flag and the running build, exit 2,
  and nothing written."""
  bucket = f"s3://leases-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, bucket[5:])
  url = f"{bucket}/out"
  corpus = corpus_slice(shared, tmp_path, 40)
  start = tmp_path / "start"
  start.touch()
  with _processes() as begin:
    holder = begin(s3_server, CLAIM, url, 64, start, 600)
    assert [_line(holder), _line(holder)] == ["ready", "holds"]
    res = run([sys.executable, "-m",
               "data_utils.pretraining.create_pretrain_data",
               f"--input_glob={corpus}", f"--sp_path={spiece_path(shared)}",
               f"--save_dir={url}", "--seq_len=32", "--reuse_len=16",
               "--bsz_per_host=4", "--num_predict=6", "--perm_size=8",
               "--max_batches=1"], 300, _env(s3_server))
    line = refused(res)
    assert re.fullmatch(
        re.escape(f"{PROGRAM}: --save_dir={url}: another build is being "
                  "written into it now (") + r"[a-z_]+=[^,]*, this run "
        r"[a-z_]+=[^)]*" + re.escape(
            "); wait for it to end, or use another --save_dir"), line), line
    # The holder's claim and lease only.
    claim, lease = _temps(s3_server, "host-a", "tree", url)
    assert claim == ".xlnet_tf_build.lock"
    assert re.fullmatch(r"\.xlnet_tf_build\.lock\.d/[^/]+\.lease", lease)


def test_a_dead_writers_temp_goes_at_a_run_on_another_host(store):
  """Host A: one writer killed while it writes a temp folder, one alive.
  A run on host B removes the dead writer's temp once its lease has
  expired, keeps the live writer's, and goes by host and pid for a temp
  without a lease (written before leases)."""
  server, bucket = store
  folder = f"{bucket}/records"
  old_b = f"{folder}/.tmp-xlnet-host-b-999999999-abc/part-0"
  old_c = f"{folder}/.tmp-xlnet-host-c-999999999-abc/part-0"
  with _processes() as begin:
    for path in (old_c, old_b):
      put = begin(server, "import sys\nfrom data_utils import paths\n"
                  "with paths.open_file(sys.argv[1], 'wb') as f:\n"
                  "  f.write(b'old')", path)
      assert _ended(put).returncode == 0
    dead = begin(server, TEMPS, "host-a", "write", folder)
    live = begin(server, TEMPS, "host-a", "write", folder)
    dead_temp, live_temp = _line(dead), _line(live)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    killed_at = time.monotonic()
    lease = lambda temp: temp.rsplit("/", 1)[1] + ".lease"
    name = lambda temp: temp.rsplit("/", 1)[1] + "/part-0"

    # Within the dead writer's lease: only the lease-less temp of a dead
    # process on this host goes.
    assert _temps(server, "host-b", "clean", folder) == [old_b[:-7]]
    time.sleep(max(0.0, killed_at + AFTER_EXPIRY - time.monotonic()))
    assert _temps(server, "host-b", "clean", folder) == [dead_temp]
    assert _temps(server, "host-b", "tree", folder) == sorted([
        old_c[len(folder) + 1:], name(live_temp), lease(live_temp)])
    assert live.poll() is None


def test_an_object_of_yours_at_the_claims_name_is_kept(s3_server, tmp_path):
  """An object at `.xlnet_tf_build.lock` that is not a claim of ours is
  never taken over or removed: one line, exit 2, and its bytes stay."""
  bucket = f"s3://leases-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, bucket[5:])
  url = f"{bucket}/out"
  start = tmp_path / "start"
  start.touch()
  with _processes() as begin:
    put = begin(s3_server, "import sys\nfrom data_utils import paths\n"
                "with paths.open_file(sys.argv[1], 'wb') as f:\n"
                "  f.write(b'my notes')", f"{url}/.xlnet_tf_build.lock")
    assert _ended(put).returncode == 0
    res = _ended(begin(s3_server, CLAIM, url, 32, start, 0))
    assert refused(res) == (
        f"{PROGRAM}: {url}/.xlnet_tf_build.lock: not a build claim of "
        "xlnet-tf (JSON with an epoch and settings); it is left as it is: "
        "remove it if it is not yours, or use another folder")
    read = _ended(begin(s3_server, "import sys\nfrom data_utils import "
                        "paths\nprint(paths.read_bytes(sys.argv[1]))",
                        f"{url}/.xlnet_tf_build.lock"))
    assert read.stdout.strip() == "b'my notes'", read.stderr[-3000:]


def test_a_bad_lease_period_is_one_line_before_any_work(shared, s3_server,
                                                         tmp_path):
  bucket = f"s3://leases-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, bucket[5:])
  res = run([sys.executable, "-m",
             "data_utils.pretraining.create_pretrain_data",
             f"--input_glob={corpus_slice(shared, tmp_path, 40)}",
             f"--sp_path={spiece_path(shared)}",
             f"--save_dir={bucket}/out", "--seq_len=32", "--reuse_len=16",
             "--bsz_per_host=4", "--num_predict=6", "--perm_size=8"], 300,
            {**_env(s3_server), "XLNET_TF_LEASE_SECONDS": "soon"})
  assert refused(res) == (f"{PROGRAM}: XLNET_TF_LEASE_SECONDS=soon: must be "
                          "a number of seconds above 0")
  assert _temps(s3_server, "host-a", "tree", bucket) == []
