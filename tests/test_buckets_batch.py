"""run_batch_predict.py with its paths in buckets (issue 36), against real
servers (fake-gcs-server, and TensorFlow's own gs:// through the TLS proxy;
moto's S3 server): the tiny classifier export of the CLI tests in `gs://`,
its inputs (a glob over two files) in `s3://`, the outputs in `s3://`.

- The job, with 2 worker processes, writes the same rows as the same job on
  local paths: each shard's bytes equal the local shard's once the input
  URLs stand for the local paths (rows carry their file), the manifest is
  the local one but for its paths and the shards' sha256 (the objects'
  own), and the ledger has an entry per output with its sha256.
- A unit killed mid-upload leaves no object of its name; a run killed
  while placing the outputs leaves whole objects the ledger lists; the same
  command then succeeds without --overwrite, keeps the finished object
  (not copied again) and gives the local job's bytes (in process: the
  manifest equals the local one in full); the dead runs' temps go, nothing
  else in the folder (a user's objects, another host's temp) does.
- A user's object at an output name, an s3:// export, a missing output
  bucket: one line each, exit 2, nothing written; no folder named `gs:` or
  `s3:` appears.
Buckets are read and written here with boto3 and fake-gcs-server's JSON
API (no global settings); the script runs in subprocesses with both
fixtures' environment (gcsfs and TF read theirs at import and first use).
"""

import hashlib
import json
import os
import sys
import types
import urllib.parse
import urllib.request

import pytest

from batch_cases import tiny_classifier_export
from conftest import ROOT, run, spiece_path, start
from object_stores import make_gcs_bucket, make_s3_bucket
from xlnet_tf.batch_predict.run import run_job

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_batch_predict  # noqa: E402  pylint: disable=wrong-import-position

SCRIPT = os.path.join(ROOT, "run_batch_predict.py")
EXPORT_BUCKET, IN_BUCKET, OUT_BUCKET = "xbp-export", "xbp-in", "xbp-out"
TWO_WORKERS = ("--pipeline_options=--direct_num_workers=2 "
               "--direct_running_mode=multi_processing")
ROWS = {"rows-a.tsv": b"index\tsentence1\tsentence2\n0\tA man sleeps.\tHe "
                      b"rests.\n1\tonly one column\n2\t\xffbad\tbytes\n3\t "
                      b"\tempty a\n4\tIt rains.\tThe street is wet.\n",
        "rows-b.tsv": b"index\tsentence1\tsentence2\n0\tTwo dogs run.\t"
                      b"Animals move.\n1\tThe sun is up.\tIt is night.\n"}
OUTPUTS = ["dead-letter-00000-of-00001.jsonl", "manifest.json",
           "predictions-00000-of-00001.jsonl"]
LEDGER = ".xlnet_tf_outputs.d"
# A user's objects in the folder of the killed runs (never touched).
USERS = {"notes.txt": b"notes", "sub/keep.jsonl": b"{}\n",
         # Another host's temp: its writer may be alive.
         ".tmp-xlnet-otherhost-1-abc/x": b"theirs"}
DEFAULTS = dict(export_dir=None, input=None, input_format="auto",
                text_column=None, text_b_column=None, output_dir=None,
                job=None, layers=["-1"], pooling=["masked_mean"],
                tfrecord=False, batch_size=32, bucketing="global",
                precision="float32", xla=False,
                rows_per_shard=50_000, overwrite=False, runner=None,
                pipeline_options=None)
# The script with a fault (argv: mode, n, then the script's flags):
# `upload` kills the process while a worker uploads the first predictions
# shard (part of it written to the store's stream); `copy` kills it before
# the n-th copy in the bucket; each copy made is logged on stderr.
FAULTY = """
import os, sys
sys.path.insert(0, {root!r})
from data_utils import paths
from data_utils.errors import run_app
import run_batch_predict
mode, at = sys.argv[1], int(sys.argv[2])
real_copy, real_upload, copies = paths.copy, paths.upload, []
def copy(source, target):
  copies.append(target)
  if mode == "copy" and len(copies) == at:
    os._exit(9)
  print("copied", paths.basename(target), file=sys.stderr, flush=True)
  real_copy(source, target)
def upload(local, target):
  if mode == "upload" and paths.basename(target).startswith("predictions-"):
    with open(local, "rb") as f, paths.open_file(target, "wb") as g:
      g.write(f.read()[:20])
      os._exit(9)
  real_upload(local, target)
paths.copy, paths.upload = copy, upload
sys.argv = ["run_batch_predict.py"] + sys.argv[3:]
run_batch_predict.define_flags()
run_app("run_batch_predict", run_batch_predict.main)
""".format(root=ROOT)
# The script's main body (`run_main` over `_run`) for each of several flag
# lists (argv[1], JSON) in one process: prints [[exit code, its last stderr
# line (None for a success)], ...].
RUN_MAIN = """
import contextlib, io, json, sys
sys.path.insert(0, {root!r})
from absl import flags
from data_utils.errors import run_main
import run_batch_predict
run_batch_predict.define_flags()
out = []
for argv in json.loads(sys.argv[1]):
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["run_batch_predict.py"] + argv)
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main("run_batch_predict", run_batch_predict._run)
  lines = err.getvalue().strip().splitlines()
  out.append([code, lines[-1] if code else None])
print(json.dumps(out))
""".format(root=ROOT)


def _s3_client(store):
  import boto3  # the cloud-test extra (as object_stores.make_s3_bucket)
  env = store.env
  return boto3.client("s3", endpoint_url=store.url,
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                      region_name=env["AWS_DEFAULT_REGION"])


class S3:
  """One S3 bucket's objects, read and written with boto3."""

  def __init__(self, store, bucket):
    self.client, self.bucket = _s3_client(store), bucket

  def put(self, key, data):
    self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

  def objects(self, prefix):
    """{key below `prefix`/: bytes} of every object there."""
    out = {}
    pages = self.client.get_paginator("list_objects_v2").paginate(
        Bucket=self.bucket, Prefix=prefix + "/")
    for page in pages:
      for item in page.get("Contents", []):
        body = self.client.get_object(Bucket=self.bucket, Key=item["Key"])
        out[item["Key"][len(prefix) + 1:]] = body["Body"].read()
    return out


def _gcs_put(store, bucket, name, data):
  query = urllib.parse.urlencode({"uploadType": "media", "name": name})
  request = urllib.request.Request(
      f"{store.url}/upload/storage/v1/b/{bucket}/o?{query}", data=data,
      headers={"Content-Type": "application/octet-stream"}, method="POST")
  opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
  with opener.open(request, timeout=30) as response:
    assert response.status == 200, response.status


def _sha(data):
  return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def world(shared, tmp_path_factory, gcs_server, gcs_tf_proxy, s3_server):
  """The export (local, and in gs://), the inputs (local, and in s3://),
  both stores' environment; started at once in the background: the bucket
  job with 2 workers and the refusals (they overlap the rest); then the
  same job on local paths, in this process."""
  tmp = tmp_path_factory.mktemp("buckets_batch")
  export = tiny_classifier_export(tmp / "export", spiece_path(shared))
  make_gcs_bucket(gcs_server, EXPORT_BUCKET)
  for bucket in (IN_BUCKET, OUT_BUCKET):
    make_s3_bucket(s3_server, bucket)
  for base, _, files in os.walk(export):
    for name in files:
      key = "export/" + os.path.relpath(os.path.join(base, name), export)
      with open(os.path.join(base, name), "rb") as f:
        _gcs_put(gcs_server, EXPORT_BUCKET, key, f.read())
  (tmp / "in").mkdir()
  inputs = S3(s3_server, IN_BUCKET)
  for name, data in ROWS.items():
    (tmp / "in" / name).write_bytes(data)
    inputs.put(f"data/{name}", data)
  (tmp / "cwd").mkdir()  # every run's working directory: no gs: or s3: here
  out = S3(s3_server, OUT_BUCKET)
  out.put("c/predictions-00000-of-00001.jsonl", b"the user's\n")
  out.put("c/notes.txt", b"notes")
  for key, data in USERS.items():
    out.put(f"b/{key}", data)
  out.put("e/notes.txt", b"notes")
  w = {"tmp": tmp, "export": export, "env": {**gcs_tf_proxy.env,
                                              **s3_server.env},
       "gs_export": f"gs://{EXPORT_BUCKET}/export",
       "local_in": str(tmp / "in"), "s3_in": f"s3://{IN_BUCKET}/data",
       "out": out, "users_c": out.objects("c")}
  w["bucket"] = _start(w, _bucket_flags(w, "a") + [TWO_WORKERS])
  # A unit killed while it uploads its shard (the first step of
  # test_killed_runs_...).
  w["killed"] = _start(w, ["upload", "0"] + _bucket_flags(w, "b"), FAULTY)
  # Three refusals, then a job into e, one shard per row, and the same
  # job with one shard per stream: the first's shards are stale.
  w["refusals"] = _start(w, [json.dumps([
      _flags(f"s3://{IN_BUCKET}/export", w["s3_in"] + "/rows-*.tsv",
             f"s3://{OUT_BUCKET}/d"),
      _flags(w["gs_export"], w["s3_in"] + "/rows-*.tsv",
             "s3://xbp-no-such-bucket/o"),
      _bucket_flags(w, "c"),
      _bucket_flags(w, "e", "--rows_per_shard=1"),
      _bucket_flags(w, "e")])], RUN_MAIN)
  job, args = run_batch_predict.job_from_flags(_namespace(_flags(
      export, f"{tmp}/in/rows-*.tsv", f"{tmp}/local_out")))
  run_job(job, args)
  w["local"] = {n: (tmp / "local_out" / n).read_bytes() for n in OUTPUTS}
  return w


def _flags(export, inputs, output_dir, *more):
  return [f"--export_dir={export}", f"--input={inputs}",
          "--text_column=sentence1", "--text_b_column=sentence2",
          f"--output_dir={output_dir}", "--batch_size=2", *more]


def _namespace(argv):
  """The script's flags of `argv` (--name=value each) for job_from_flags,
  the rest at their defaults."""
  values = dict(DEFAULTS)
  for arg in argv:
    name, value = arg[2:].split("=", 1)
    values[name] = int(value) if name == "batch_size" else value
  return types.SimpleNamespace(**values)


def _bucket_flags(w, prefix, *more):
  return _flags(w["gs_export"], w["s3_in"] + "/rows-*.tsv",
                f"s3://{OUT_BUCKET}/{prefix}", *more)


def _command(args, code=None):
  return [sys.executable, *(["-c", code] if code else [SCRIPT]), *args]


def _start(w, args, code=None):
  return start(_command(args, code), 900, env=w["env"], cwd=w["tmp"] / "cwd")


def _run(w, args, code=None):
  return run(_command(args, code), 900, env=w["env"], cwd=w["tmp"] / "cwd")


def _ok(res):
  assert res.returncode == 0, res.stderr[-3000:]
  return res


def _check_outputs(w, got, same_batches=True):
  """The bucket job's objects `got` ({name: bytes}) against the local
  job's outputs: the same shards and manifest, byte for byte (inputs are
  named relative to their folder, the export by its saved_model.pb's
  sha256), and a ledger entry per output with its object's sha256. With 2
  workers (`same_batches=False`) the padding figures follow how the runner
  bundled the rows, so the manifest is compared without them."""
  local = w["local"]
  for name in OUTPUTS[0], OUTPUTS[2]:
    assert got[name] == local[name], name
  manifest = json.loads(got["manifest.json"])
  want = json.loads(local["manifest.json"])
  if same_batches:
    assert got["manifest.json"] == local["manifest.json"]
  else:
    for key in ("positions_fed", "fraction", "batches"):
      want["padding"][key] = manifest["padding"][key]
  assert manifest == want
  assert manifest["counts"] == {"rows_read": 7, "predicted": 4,
                                "dead_letters": 3}
  source = f"{w['gs_export']}?input={w['s3_in']}/rows-*.tsv"
  for name in OUTPUTS:
    assert json.loads(got[f"{LEDGER}/{name}.json"]) == {
        "format": 1, "name": name, "sha256": _sha(got[name]),
        "source": source}


def _no_scheme_folders(w):
  for base in (w["tmp"] / "cwd", ROOT):
    assert not {"gs:", "s3:"} & set(os.listdir(base)), base


def test_bad_bucket_paths_and_a_users_object_are_one_line(world):
  w = world
  got = json.loads(_ok(w["refusals"].result()).stdout.strip().splitlines()[-1])
  assert got == [
      [2, f"run_batch_predict: --export_dir=s3://{IN_BUCKET}/export: "
          "TensorFlow 2.20 has no s3:// filesystem (it reads and writes this "
          "path itself); use gs:// or a local path"],
      [2, "run_batch_predict: --output_dir=s3://xbp-no-such-bucket/o: bucket"
          " xbp-no-such-bucket does not exist (or these credentials cannot "
          "see it)"],
      [2, f"run_batch_predict: --output_dir=s3://{OUT_BUCKET}/c: "
          "predictions-00000-of-00001.jsonl exists and was not written by "
          "xlnet-tf (or was changed since); move it, or pass --overwrite to "
          "replace it"],
      [0, None], [0, None]]
  assert w["out"].objects("d") == {}
  assert w["out"].objects("c") == w["users_c"]
  _no_scheme_folders(w)


def test_a_rerun_in_a_bucket_drops_its_stale_shards_only(world):
  w = world
  _ok(w["refusals"].result())
  got = w["out"].objects("e")
  # The second run replaced the manifest and removed the first run's seven
  # shards and their ledger entries; the user's object stays.
  assert sorted(got) == sorted(OUTPUTS + ["notes.txt"] + [
      f"{LEDGER}/{n}.json" for n in OUTPUTS])
  assert got["notes.txt"] == b"notes"
  _check_outputs(w, got)


def test_killed_runs_leave_whole_objects_and_the_rerun_keeps_them(world):
  w, users = world, USERS
  # A unit killed while uploading its shard: no object has its name.
  killed = w["killed"].result()
  assert killed.returncode == 9, killed.stderr[-3000:]
  after = w["out"].objects("b")
  assert not [k for k in after if "predictions-" in k], sorted(after)
  dead_temps = {k.split("/")[0] for k in after if k not in users}
  assert all(t.startswith(".tmp-xlnet-") for t in dead_temps), dead_temps
  # The same command, killed before its second copy into place: the first
  # object is there whole, the ledger lists all three, no manifest.
  killed = _run(w, ["copy", "2"] + _bucket_flags(w, "b"), FAULTY)
  assert killed.returncode == 9, killed.stderr[-3000:]
  after = w["out"].objects("b")
  assert dead_temps.isdisjoint(k.split("/")[0] for k in after)
  assert [n for n in OUTPUTS if n in after] == [OUTPUTS[2]]
  assert after[OUTPUTS[2]] == w["local"][OUTPUTS[2]]
  assert {f"{LEDGER}/{n}.json" for n in OUTPUTS} <= set(after)
  # Again, without --overwrite: it succeeds, keeps the finished object (no
  # copy), places the others, and leaves the local job's bytes; the dead
  # runs' temps are gone, nothing else is touched.
  rerun = _ok(_run(w, ["none", "0"] + _bucket_flags(w, "b"), FAULTY))
  copied = [line.split()[1] for line in rerun.stderr.splitlines()
            if line.startswith("copied ")]
  assert copied == [OUTPUTS[0], OUTPUTS[1]]
  got = w["out"].objects("b")
  assert sorted(got) == sorted(OUTPUTS + list(users) + [
      f"{LEDGER}/{n}.json" for n in OUTPUTS])
  assert {k: got[k] for k in users} == users
  _check_outputs(w, got)
  _no_scheme_folders(w)


def test_the_bucket_job_on_two_workers_writes_the_local_jobs_rows(world):
  w = world
  res = _ok(w["bucket"].result())
  report = json.loads(res.stdout.strip().splitlines()[-1])
  assert report == {"rows_read": 7, "predicted": 4, "dead_letters": 3,
                    "padding": report["padding"],
                    "output_dir": f"s3://{OUT_BUCKET}/a", "shards": 1,
                    "dead_letter_shards": 1}
  got = w["out"].objects("a")
  assert sorted(got) == sorted(OUTPUTS + [f"{LEDGER}/{n}.json"
                                          for n in OUTPUTS])
  _check_outputs(w, got, same_batches=False)
  _no_scheme_folders(w)
