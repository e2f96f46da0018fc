"""The path layer (data_utils/paths.py) does the same on a local folder, on
moto's S3 server and on fake-gcs-server; each bad store is one line.

gcsfs reads its settings when imported, so the store runs go in a fresh
interpreter with the fixture's environment (`run_paths_script`).
"""

import json
import os
import socket
import subprocess
import sys
import uuid

import pytest

from data_utils import path_checks, paths
from data_utils.errors import UsageError
from conftest import refused, run
from object_stores import make_gcs_bucket, make_s3_bucket

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, os, sys
from data_utils import fingerprint, path_checks, paths
root = sys.argv[1]
out = {}
paths.makedirs(paths.join(root, "d", "sub"))
with paths.open_file(paths.join(root, "d", "a.txt"), "w") as f:
  f.write("héllo\n")
with paths.open_file(paths.join(root, "d", "sub", "b.bin"), "wb") as f:
  f.write(bytes(range(256)) * 5000)
out["read"] = paths.open_file(paths.join(root, "d", "a.txt")).read()
out["exists"] = [paths.exists(paths.join(root, n)) for n in
                 ("d", "d/a.txt", "d/none")]
out["isfile"] = [paths.isfile(paths.join(root, n)) for n in ("d", "d/a.txt")]
out["isdir"] = [paths.isdir(paths.join(root, n)) for n in ("d", "d/a.txt",
                                                           "d/none")]
out["listdir"] = paths.listdir(paths.join(root, "d"))
out["walk"] = paths.walk_files(paths.join(root, "d"))
out["glob"] = [paths.relpath(p, root) for p in
               paths.glob(paths.join(root, "d", "*.txt"))]
out["size"] = paths.getsize(paths.join(root, "d", "sub", "b.bin"))
out["sha256"] = fingerprint.file_sha256(paths.join(root, "d", "sub", "b.bin"))
with paths.scratch_dir() as tmp:
  local = os.path.join(tmp, "up.txt")
  open(local, "w").write("uploaded")
  paths.upload(local, paths.join(root, "up.txt"))
paths.copy(paths.join(root, "up.txt"), paths.join(root, "d", "copied.txt"))
with paths.local_copy(paths.join(root, "d", "copied.txt")) as local:
  out["copied"] = open(local).read()
  out["scratch_is_local"] = os.path.isfile(local)
paths.remove(paths.join(root, "up.txt"))
paths.rmtree(paths.join(root, "d", "sub"))
out["after"] = paths.walk_files(root)
try:
  paths.listdir(paths.join(root, "none"))
  out["missing"] = None
except FileNotFoundError:
  out["missing"] = "FileNotFoundError"
path_checks.check_store(root, "output_dir")
print(json.dumps(out))
"""


def run_paths_script(root, env=None):
  proc = subprocess.run([sys.executable, "-c", SCRIPT, root], cwd=ROOT,
                        env={**os.environ, **(env or {})},
                        capture_output=True, text=True, timeout=240)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local_result(tmp_path_factory):
  return run_paths_script(str(tmp_path_factory.mktemp("local")))


def test_local_answers(local_result):
  assert local_result["read"] == "héllo\n"
  assert local_result["exists"] == [True, True, False]
  assert local_result["isdir"] == [True, False, False]
  assert local_result["listdir"] == ["a.txt", "sub"]
  assert local_result["walk"] == ["a.txt", "sub/b.bin"]
  assert local_result["glob"] == ["d/a.txt"]
  assert local_result["copied"] == "uploaded"
  assert local_result["after"] == ["d/a.txt", "d/copied.txt"]
  assert local_result["missing"] == "FileNotFoundError"


def _s3_bucket(s3_server):
  name = f"paths-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, name)
  return name


def test_s3_same_as_local(s3_server, local_result):
  root = f"s3://{_s3_bucket(s3_server)}/run"
  assert run_paths_script(root, s3_server.env) == local_result


def test_gcs_same_as_local(gcs_server, local_result):
  name = f"paths-{uuid.uuid4().hex[:10]}"
  make_gcs_bucket(gcs_server, name)
  root = f"gs://{name}/run"
  # With STORAGE_EMULATOR_HOST alone, as a user sets it: the layer turns
  # gcsfs's gRPC probe off for an emulator itself.
  env = {k: v for k, v in gcs_server.env.items()
         if k != "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"}
  assert "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT" not in os.environ
  assert run_paths_script(root, env) == local_result


# One line for every bad store ----------------------------------------------

CHECK = r"""
import sys
from data_utils import path_checks
from data_utils.errors import UsageError
try:
  path_checks.check_store(sys.argv[1], "output_dir")
  print("ok")
except UsageError as e:
  print(e)
"""


def check_line(path, env):
  proc = subprocess.run([sys.executable, "-c", CHECK, path], cwd=ROOT,
                        env={**os.environ, **env}, capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout.strip()


def _closed_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_missing_bucket_lines(s3_server, gcs_server):
  assert check_line("s3://no-such-bucket-x/out", s3_server.env) == (
      "--output_dir=s3://no-such-bucket-x/out: bucket no-such-bucket-x does "
      "not exist (or these credentials cannot see it)")
  assert check_line("gs://no-such-bucket-x/out", gcs_server.env) == (
      "--output_dir=gs://no-such-bucket-x/out: bucket no-such-bucket-x does "
      "not exist (or these credentials cannot see it)")


def test_missing_credentials_line(s3_server, tmp_path):
  env = {**s3_server.env, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
         "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
         "AWS_CONFIG_FILE": str(tmp_path / "none"),
         "AWS_EC2_METADATA_DISABLED": "true"}
  bucket = _s3_bucket(s3_server)
  assert check_line(f"s3://{bucket}/out", env) == (
      f"--output_dir=s3://{bucket}/out: no credentials for s3:// (set "
      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an AWS profile)")


def test_unreachable_endpoint_line(s3_server):
  url = f"http://127.0.0.1:{_closed_port()}"
  line = check_line("s3://b/out", {**s3_server.env, "AWS_ENDPOINT_URL": url,
                                   "XLNET_TF_STORE_TIMEOUT": "20"})
  assert line.startswith(f"--output_dir=s3://b/out: the s3:// endpoint at "
                         f"{url} does not answer ("), line


def test_unknown_scheme_line():
  with pytest.raises(UsageError) as e:
    path_checks.check_store("abc://b/out", "output_dir")
  assert str(e.value) == ("--output_dir=abc://b/out: no filesystem for "
                          "abc:// is installed (no fsspec filesystem knows "
                          "it)")


def test_tf_path_refuses_s3_and_keeps_gs(tmp_path):
  assert path_checks.tf_path("gs://b/m", "model_dir") == "gs://b/m"
  assert path_checks.tf_path("rel", "model_dir") == os.path.abspath("rel")
  with pytest.raises(UsageError, match=r"^--init_checkpoint=s3://b/c: "):
    path_checks.tf_path("s3://b/c", "init_checkpoint")


# The same lines from an entry script, before any work ------------------------

@pytest.fixture
def records_flags(tmp_path):
  corpus = tmp_path / "c.txt"
  corpus.write_text("a line\n")
  return [f"--input_glob={corpus}", f"--sp_path={tmp_path / 'sp.model'}",
          "--seq_len=32", "--reuse_len=16", "--bsz_per_host=4"]


def test_every_bad_store_is_one_line_from_a_script(records_flags, s3_server,
                                                    tmp_path):
  no_keys = {**s3_server.env, "AWS_ACCESS_KEY_ID": "",
             "AWS_SECRET_ACCESS_KEY": "",
             "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
             "AWS_CONFIG_FILE": str(tmp_path / "none"),
             "AWS_EC2_METADATA_DISABLED": "true"}
  dead = f"http://127.0.0.1:{_closed_port()}"
  cases = [
      ("s3://b/out", no_keys, "no credentials for s3:// (set "
       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an AWS profile)"),
      ("s3://b/out", {**s3_server.env, "AWS_ENDPOINT_URL": dead,
                      "XLNET_TF_STORE_TIMEOUT": "20"},
       f"the s3:// endpoint at {dead} does not answer ("),
      ("abc://b/out", {}, "no filesystem for abc:// is installed (no fsspec "
       "filesystem knows it)"),
  ]
  for save_dir, env, why in cases:
    res = run([sys.executable, "-m",
               "data_utils.pretraining.create_pretrain_data",
               *records_flags, f"--save_dir={save_dir}"], 120, env)
    line = refused(res)
    assert line.startswith(f"create_pretrain_data: --save_dir={save_dir}: "
                           f"{why}"), line
  # The scripts run in the project root: no folder named after a scheme.
  assert not {"s3:", "abc:"} & set(os.listdir(ROOT))
