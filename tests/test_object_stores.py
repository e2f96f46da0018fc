"""The object-store servers of the tests (tests/object_stores.py) do what the
bucket paths of issue 36 need, with real round trips: s3fs and fsspec on
moto's S3 server; gcsfs on fake-gcs-server; TensorFlow's own gs:// (gfile,
TFRecords, checkpoints, SavedModels) on that same server through the TLS
proxy, sharing its buckets with gcsfs.

gcsfs reads its settings when imported and TF when its GCS filesystem starts,
so those run in a subprocess with the fixture's environment.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest

from object_stores import make_gcs_bucket

if os.environ.get("CI"):  # CI runs these: a missing library is an error there
  import fsspec
  import s3fs
else:
  fsspec = pytest.importorskip("fsspec")
  s3fs = pytest.importorskip("s3fs", reason="pip install -e '.[cloud]'")


def bucket_name(prefix):
  return f"{prefix}-{uuid.uuid4().hex[:12]}"


def start_python(code, env, *args):
  """`code` begun in a fresh interpreter with `env` added."""
  return subprocess.Popen([sys.executable, "-c", code, *args],
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def result(proc, timeout=240):
  """The JSON on the last stdout line of `proc`, once it ended well."""
  try:
    out, err = proc.communicate(timeout=timeout)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 0, err[-4000:]
  return json.loads(out.strip().splitlines()[-1])


# S3: s3fs finds the server through AWS_ENDPOINT_URL, as a user's would ------

@pytest.fixture
def s3(s3_server, monkeypatch):
  for key, value in s3_server.env.items():
    monkeypatch.setenv(key, value)
  # A fresh instance: fsspec caches them by arguments, not by environment.
  return s3fs.S3FileSystem(skip_instance_cache=True)


def test_s3fs_write_read_list(s3):
  bucket = bucket_name("s3fs")
  s3.mkdir(bucket)
  data = bytes(range(256)) * 3
  s3.pipe(f"{bucket}/dir/a.bin", data)
  s3.pipe(f"{bucket}/dir/sub/b.txt", b"b\n")
  assert s3.cat(f"{bucket}/dir/a.bin") == data
  assert s3.cat(f"{bucket}/dir/a.bin", start=10, end=20) == data[10:20]
  assert sorted(s3.ls(f"{bucket}/dir", detail=False)) == [
      f"{bucket}/dir/a.bin", f"{bucket}/dir/sub"]
  assert s3.find(bucket) == [f"{bucket}/dir/a.bin", f"{bucket}/dir/sub/b.txt"]
  assert s3.info(f"{bucket}/dir/a.bin")["size"] == len(data)
  # Larger than a part: a multipart upload, whole once closed.
  big = os.urandom(11 * 2**20 + 7)
  with s3.open(f"{bucket}/big.bin", "wb", block_size=5 * 2**20) as f:
    f.write(big)
  assert s3.cat(f"{bucket}/big.bin") == big
  s3.rm(f"{bucket}/dir/a.bin")
  assert not s3.exists(f"{bucket}/dir/a.bin")


def test_s3fs_missing_bucket(s3):
  missing = bucket_name("no-such-bucket")
  assert not s3.exists(missing)
  assert not s3.exists(f"{missing}/key")
  with pytest.raises(FileNotFoundError):
    s3.cat(f"{missing}/key")
  with pytest.raises(FileNotFoundError):
    s3.ls(missing)
  with pytest.raises(FileNotFoundError):
    s3.pipe(f"{missing}/key", b"x")


def test_fsspec_open_s3_url(s3):
  bucket = bucket_name("fsspec")
  s3.mkdir(bucket)
  url = f"s3://{bucket}/out/notes.txt"
  with fsspec.open(url, "w", encoding="utf-8") as f:
    f.write("héllo\nwörld\n")
  with fsspec.open(url, "rb") as f:
    assert f.read() == "héllo\nwörld\n".encode()
  fs, path = fsspec.core.url_to_fs(f"s3://{bucket}/out")
  assert fs.ls(path, detail=False) == [f"{bucket}/out/notes.txt"]


# GCS: gcsfs through STORAGE_EMULATOR_HOST ----------------------------------

GCSFS_SCRIPT = r"""
import json, os, sys, time
start = time.monotonic()
import gcsfs
bucket, missing = sys.argv[1], sys.argv[2]
fs = gcsfs.GCSFileSystem()
out = {}
data = bytes(range(256)) * 3
fs.pipe(f"{bucket}/dir/a.bin", data)
fs.pipe(f"{bucket}/dir/sub/b.txt", b"b\n")
out["read"] = fs.cat(f"{bucket}/dir/a.bin") == data
out["range"] = fs.cat(f"{bucket}/dir/a.bin", start=10, end=20) == data[10:20]
out["ls"] = sorted(fs.ls(f"{bucket}/dir", detail=False))
# Past one block: a resumable upload (the server's Location header).
big = os.urandom(2**20 + 17)
with fs.open(f"{bucket}/big.bin", "wb", block_size=2**18) as f:
  f.write(big)
out["big"] = fs.cat(f"{bucket}/big.bin") == big
out["find"] = fs.find(bucket)
try:
  fs.cat(f"{missing}/key")
  out["missing"] = "no error"
except FileNotFoundError:
  out["missing"] = "FileNotFoundError"
out["seconds"] = time.monotonic() - start
print(json.dumps(out))
"""


def test_gcsfs_write_read_list(gcs_server):
  bucket = bucket_name("gcsfs")
  make_gcs_bucket(gcs_server, bucket)
  out = result(start_python(GCSFS_SCRIPT, gcs_server.env, bucket,
                            bucket_name("no-such-bucket")))
  assert out["read"] and out["range"] and out["big"], out
  assert out["ls"] == [f"{bucket}/dir/a.bin", f"{bucket}/dir/sub"]
  assert out["find"] == [f"{bucket}/big.bin", f"{bucket}/dir/a.bin",
                         f"{bucket}/dir/sub/b.txt"]
  assert out["missing"] == "FileNotFoundError"
  # The gRPC probe GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false turns off costs
  # 60 s a call: this bound shows it is off.
  assert out["seconds"] < 30, out


# TensorFlow's own gs:// through the proxy ----------------------------------

TF_SCRIPT = r"""
import json, sys, traceback
import numpy as np
import tensorflow as tf
import gcsfs
bucket = sys.argv[1]
root = f"gs://{bucket}"
out = {}

def part(fn):
  try:
    out[fn.__name__] = fn()
  except Exception:
    out[fn.__name__] = {"error": traceback.format_exc()[-3000:]}

@part
def gfile():
  tf.io.gfile.makedirs(f"{root}/g/sub")
  data = bytes(range(256)) * 3
  with tf.io.gfile.GFile(f"{root}/g/a.bin", "wb") as f:
    f.write(data)
  with tf.io.gfile.GFile(f"{root}/g/sub/b.txt", "w") as f:
    f.write("b\n")
  with tf.io.gfile.GFile(f"{root}/g/a.bin", "rb") as f:
    back = f.read()
  return {"read": back.hex() == data.hex(),
          "listdir": sorted(tf.io.gfile.listdir(f"{root}/g")),
          "glob": sorted(tf.io.gfile.glob(f"{root}/g/*.bin")),
          "exists": tf.io.gfile.exists(f"{root}/g/a.bin"),
          "isdir": tf.io.gfile.isdir(f"{root}/g/sub"),
          "missing": tf.io.gfile.exists(f"{root}/g/none"),
          "size": tf.io.gfile.stat(f"{root}/g/a.bin").length}

@part
def tfrecord():
  records = [b"", b"one", bytes(range(256)) * 40]
  path = f"{root}/r/data.tfrecord"
  with tf.io.TFRecordWriter(path) as w:
    for r in records:
      w.write(r)
  back = [t.numpy() for t in tf.data.TFRecordDataset(path)]
  return {"same": back == records, "count": len(back)}

@part
def checkpoint():
  v = tf.Variable([1.5, -2.0, 3.25])
  step = tf.Variable(7, dtype=tf.int64)
  ckpt = tf.train.Checkpoint(v=v, step=step)
  path = ckpt.save(f"{root}/ckpt/model")
  v.assign([0.0, 0.0, 0.0]); step.assign(0)
  ckpt.restore(path).assert_consumed()
  return {"v": v.numpy().tolist(), "step": int(step.numpy()), "path": path,
          "latest": tf.train.latest_checkpoint(f"{root}/ckpt")}

@part
def saved_model():
  class Scale(tf.Module):
    def __init__(self):
      self.w = tf.Variable([2.0, -0.5])
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def __call__(self, x):
      return x * self.w
  tf.saved_model.save(Scale(), f"{root}/sm")
  loaded = tf.saved_model.load(f"{root}/sm")
  return {"y": loaded(tf.constant([3.0, 4.0])).numpy().tolist(),
          "files": sorted(tf.io.gfile.listdir(f"{root}/sm"))}

@part
def shared_with_gcsfs():
  # The project's own files go through gcsfs, TF's through gs://: one bucket.
  fs = gcsfs.GCSFileSystem()
  fs.pipe(f"{bucket}/x/from_gcsfs.bin", b"\x00gcsfs\xff")
  with tf.io.gfile.GFile(f"{root}/x/from_gcsfs.bin", "rb") as f:
    tf_read = f.read()
  with tf.io.gfile.GFile(f"{root}/x/from_tf.bin", "wb") as f:
    f.write(b"\x00tf\xff")
  return {"tf_read": tf_read.hex(),
          "gcsfs_read": fs.cat(f"{bucket}/x/from_tf.bin").hex()}

print(json.dumps(out))
"""


@pytest.fixture(scope="module", autouse=True)
def tf_gcs_run(gcs_server, gcs_tf_proxy):
  """TF_SCRIPT (one TF import for all the TF tests), begun with the module's
  first test: it runs while the S3 and gcsfs tests do."""
  bucket = bucket_name("tf")
  make_gcs_bucket(gcs_server, bucket)
  proc = start_python(TF_SCRIPT, gcs_tf_proxy.env, bucket)
  yield bucket, proc
  if proc.poll() is None:
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def tf_gcs(tf_gcs_run):
  """(bucket, what TF_SCRIPT found)."""
  bucket, proc = tf_gcs_run
  return bucket, result(proc)


def tf_part(tf_gcs, name):
  bucket, out = tf_gcs
  assert "error" not in out[name], out[name]["error"]
  return bucket, out[name]


def test_tf_gfile(tf_gcs):
  bucket, out = tf_part(tf_gcs, "gfile")
  assert out == {"read": True, "listdir": ["a.bin", "sub/"],
                 "glob": [f"gs://{bucket}/g/a.bin"], "exists": True,
                 "isdir": True, "missing": False, "size": 768}


def test_tf_records(tf_gcs):
  _, out = tf_part(tf_gcs, "tfrecord")
  assert out == {"same": True, "count": 3}


def test_tf_checkpoint(tf_gcs):
  bucket, out = tf_part(tf_gcs, "checkpoint")
  assert out["v"] == [1.5, -2.0, 3.25] and out["step"] == 7
  assert out["path"] == f"gs://{bucket}/ckpt/model-1"
  assert out["latest"] == out["path"]


def test_tf_saved_model(tf_gcs):
  _, out = tf_part(tf_gcs, "saved_model")
  assert out["y"] == [6.0, -2.0]
  assert {"saved_model.pb", "variables/"} <= set(out["files"])


def test_tf_and_gcsfs_share_buckets(tf_gcs):
  _, out = tf_part(tf_gcs, "shared_with_gcsfs")
  assert out == {"tf_read": b"\x00gcsfs\xff".hex(),
                 "gcsfs_read": b"\x00tf\xff".hex()}
