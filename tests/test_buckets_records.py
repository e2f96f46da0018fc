"""The pretraining-records job with every path in a bucket (issue 36): the
Beam job on 2 worker processes from gs:// into gs://, and the plain CLI's
tasks from s3:// into s3://, give the bytes of the same job on a local disk;
a user's object at one of the job's names is refused and nothing else is
touched; a missing bucket is one line, and no folder named `gs:` appears.

gcsfs reads its settings when imported, so every bucket run is a fresh
interpreter with the fixture's environment. Each such process (the driver
and every Beam worker) gets its own TMPDIR and working directory
(`sitecustomize` below), so nothing can lean on a local disk it shares with
another.
"""

import json
import os
import sys
import uuid

import pytest

from data_utils.atomic import host_name
from data_utils.pretraining import examples as pd
from data_utils.pretraining.create_pretrain_data import create_pretrain_data
from conftest import corpus_slice, refused, run, spiece_path, start
from object_stores import make_gcs_bucket, make_s3_bucket

CFG = pd.PretrainDataConfig(seq_len=32, reuse_len=16, bsz_per_host=4,
                            num_core_per_host=1, bi_data=True, num_predict=6,
                            perm_size=8)
NAME = "bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.perm-8"
SEED, MAX_BATCHES, PASSES = 3, 3, [0, 1]
LEDGERS = (".xlnet_tf_outputs.json", ".xlnet_tf_outputs.lock")
ENTRIES = ".xlnet_tf_outputs.d/"  # the ledger in a bucket
PROGRAM = "create_pretrain_data"

# Puts local files into a store, or lists a folder: {path: sha256} of every
# file below it, and the output ledgers of the build's two folders.
TOOL = r"""
import json, sys
from data_utils import outputs, paths
from data_utils.fingerprint import file_sha256
cmd, *args = sys.argv[1:]
if cmd == "put":
  for src, dst in zip(args[::2], args[1::2]):
    paths.upload(src, dst)
else:
  root = args[0]
  print(json.dumps({
      "files": {rel: file_sha256(paths.join(root, rel))
                for rel in paths.walk_files(root)},
      "ledgers": {d: outputs.read_ledger(paths.join(root, d))
                  for d in ("", "tfrecords") if paths.isdir(
                      paths.join(root, d))}}))
"""

# Gives the process its own TMPDIR and working directory (below
# $XLNET_TEST_OWN_DIRS) and says who it is (a Beam worker has WORKER_ID).
SITECUSTOMIZE = """
import os, tempfile
_base = os.environ.get("XLNET_TEST_OWN_DIRS")
if _base:
  _own = tempfile.mkdtemp(prefix="%d-" % os.getpid(), dir=_base)
  for _d in ("tmp", "cwd"):
    os.mkdir(os.path.join(_own, _d))
  with open(os.path.join(_own, "role"), "w") as _f:
    _f.write(os.environ.get("WORKER_ID", "driver"))
  os.environ["TMPDIR"] = os.path.join(_own, "tmp")
  tempfile.tempdir = None
  os.chdir(os.path.join(_own, "cwd"))
"""


def _tool(args, env=None):
  res = run([sys.executable, "-c", TOOL, *args], 120, env)
  assert res.returncode == 0, res.stderr[-3000:]
  return json.loads(res.stdout) if args[0] == "tree" else None


def _flags(root, *extra, save_dir=None, inputs=None):
  """The job's command line with its inputs, model and save_dir under
  `root` (a local folder or a bucket's URL), unless given."""
  return [sys.executable, "-m", "data_utils.pretraining.create_pretrain_data",
          f"--input_glob={inputs or root}/corpus/part-*.txt",
          f"--sp_path={root}/spiece.model",
          f"--save_dir={save_dir or root + '/out'}",
          f"--seq_len={CFG.seq_len}", f"--reuse_len={CFG.reuse_len}",
          f"--bsz_per_host={CFG.bsz_per_host}",
          f"--num_predict={CFG.num_predict}", f"--perm_size={CFG.perm_size}",
          "--bi_data", "--num_task=2", f"--num_passes={len(PASSES)}",
          f"--seed={SEED}", f"--max_batches={MAX_BATCHES}", *extra]


@pytest.fixture(scope="module")
def local(shared, tmp_path_factory):
  """The job on a local disk: `root/corpus/part-{0,1}.txt`,
  `root/spiece.model`, the build in `root/out` (its two tasks); and its
  tree (`TOOL`)."""
  root = tmp_path_factory.mktemp("local")
  (root / "corpus").mkdir()
  with open(corpus_slice(shared, root, 400), encoding="utf-8") as f:
    lines = f.readlines()
  inputs = []
  for k, part in enumerate((lines[:200], lines[200:])):
    inputs.append(str(root / "corpus" / f"part-{k}.txt"))
    with open(inputs[-1], "w", encoding="utf-8") as f:
      f.writelines(part + ["\n"])
  with open(spiece_path(shared), "rb") as f, \
      open(root / "spiece.model", "wb") as g:
    g.write(f.read())
  for task in (0, 1):
    create_pretrain_data(inputs, CFG, str(root / "out"),
                         str(root / "spiece.model"), task=task, num_task=2,
                         pass_ids=PASSES, seed=SEED, max_batches=MAX_BATCHES)
  return {"root": str(root), "inputs": inputs,
          "tree": _tool(["tree", str(root / "out")])}


def _upload_job(local, url, env, extra=None):
  """The local job's inputs and model, and `extra` ({key: bytes}), into
  bucket folder `url`."""
  pairs = [(p, f"{url}/corpus/{os.path.basename(p)}") for p in local["inputs"]]
  pairs.append((os.path.join(local["root"], "spiece.model"),
                f"{url}/spiece.model"))
  scratch = os.path.join(local["root"], f"extra-{uuid.uuid4().hex[:8]}")
  os.mkdir(scratch)
  for k, (key, data) in enumerate(sorted((extra or {}).items())):
    with open(os.path.join(scratch, str(k)), "wb") as f:
      f.write(data)
    pairs.append((os.path.join(scratch, str(k)), f"{url}/{key}"))
  _tool(["put", *[x for pair in pairs for x in pair]], env)


def _own_dirs(env, tmp_path):
  """`env` plus the sitecustomize that gives each process its own TMPDIR
  and working directory; returns (env, the folder holding them)."""
  site = tmp_path / "site"
  site.mkdir()
  (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
  own = tmp_path / "own"
  own.mkdir()
  return {**env, "PYTHONPATH": str(site), "XLNET_TEST_OWN_DIRS": str(own)}, own


def _check_own_dirs(own):
  """Every process ran in its own empty folder and left no scratch in its
  own TMPDIR; returns the roles (driver, Beam worker ids)."""
  roles = []
  for name in sorted(os.listdir(own)):
    with open(own / name / "role", encoding="utf-8") as f:
      roles.append(f.read())
    assert os.listdir(own / name / "cwd") == [], name  # never a `gs:` folder
    left = [n for n in os.listdir(own / name / "tmp")
            if n.startswith(("xlnet-tf-scratch-", ".tmp-xlnet-"))]
    assert left == [], (name, left)
  return roles


def _expected_in_bucket(tree):
  """The local build's files as a bucket holds them: the same files, and
  one ledger entry object per file in place of each ledger file."""
  files = {k: v for k, v in tree["files"].items()
           if os.path.basename(k) not in LEDGERS}
  for folder, ledger in tree["ledgers"].items():
    for name in ledger:
      files[os.path.join(folder, ENTRIES, name + ".json")] = "entry"
  return files


def _assert_same_build(got, local_tree):
  want = _expected_in_bucket(local_tree)
  assert sorted(got["files"]) == sorted(want)
  data = {k: v for k, v in got["files"].items() if ENTRIES not in k}
  assert data == {k: v for k, v in want.items() if ENTRIES not in k}
  names = [k for k in data if k.startswith("tfrecords/")]
  assert len([n for n in names if n.endswith(".tfrecords")]) == 4
  assert len([n for n in names if n.endswith(".json")]) == 4
  assert "corpus_info.json" in data
  assert got["ledgers"] == local_tree["ledgers"]


def test_beam_on_two_workers_from_gs_into_gs_gives_the_local_bytes(
    local, gcs_server, tmp_path):
  bucket = f"records-{uuid.uuid4().hex[:10]}"
  make_gcs_bucket(gcs_server, bucket)
  url = f"gs://{bucket}"
  _upload_job(local, url, gcs_server.env)
  env, own = _own_dirs(gcs_server.env, tmp_path)
  res = run(_flags(url, "--runner=DirectRunner",
                   "--pipeline_options=--direct_num_workers=2 "
                   "--direct_running_mode=multi_processing"), 400, env,
            cwd=str(tmp_path))
  assert res.returncode == 0, res.stderr[-3000:]
  _assert_same_build(_tool(["tree", f"{url}/out"], gcs_server.env),
                     local["tree"])
  roles = _check_own_dirs(own)
  assert roles.count("driver") == 1 and len(roles) >= 3, roles
  assert sorted(os.listdir(tmp_path)) == ["own", "site"]


def _s3_bucket(s3_server):
  name = f"records-{uuid.uuid4().hex[:10]}"
  make_s3_bucket(s3_server, name)
  return f"s3://{name}"


def test_plain_cli_tasks_from_s3_into_s3_give_the_local_bytes(
    local, s3_server, tmp_path):
  url = _s3_bucket(s3_server)
  _upload_job(local, url, s3_server.env)
  env, own = _own_dirs(s3_server.env, tmp_path)
  # The two tasks at once, as two machines would run them.
  runs = [start(_flags(url, f"--task={t}"), 300, env, cwd=str(tmp_path))
          for t in (0, 1)]
  for r in runs:
    res = r.result()
    assert res.returncode == 0, res.stderr[-3000:]
  _assert_same_build(_tool(["tree", f"{url}/out"], s3_server.env),
                     local["tree"])
  assert _check_own_dirs(own) == ["driver", "driver"]


def test_a_users_objects_are_refused_and_kept(local, s3_server, tmp_path):
  url = _s3_bucket(s3_server)
  records = f"tfrecords/train-1-0.{NAME}.tfrecords"
  stale = f"out/tfrecords/.tmp-xlnet-{host_name()}-999999999-abc"
  users = {"out/corpus_info.json": b"mine\n", "out/notes.txt": b"notes\n",
           "out/tfrecords/keep.txt": b"keep\n", f"out/{records}": b"user\n"}
  _upload_job(local, url, s3_server.env, {**users, stale: b"half"})
  before = _tool(["tree", url], s3_server.env)["files"]
  lines = [refused(r.result()) for r in (
      start(_flags(url, "--task=0"), 300, s3_server.env, cwd=str(tmp_path)),
      start(_flags(url, "--task=1"), 300, s3_server.env, cwd=str(tmp_path)))]
  not_ours = ("exists and was not written by xlnet-tf (or was changed "
              "since); move it, or pass --overwrite to replace it")
  assert lines == [
      f"{PROGRAM}: --save_dir={url}/out: corpus_info.json {not_ours}",
      f"{PROGRAM}: --save_dir={url}/out: {records} {not_ours}"]
  assert _tool(["tree", url], s3_server.env)["files"] == before

  # --overwrite replaces the job's own names only (task 1 writes no
  # corpus_info.json); a dead writer's temp object goes, the rest stays.
  res = run(_flags(url, "--task=1", "--overwrite"), 300, s3_server.env,
            cwd=str(tmp_path))
  assert res.returncode == 0, res.stderr[-3000:]
  after = _tool(["tree", url], s3_server.env)["files"]
  del before[stale]
  want = {f"out/{k}": v for k, v in local["tree"]["files"].items()
          if "-1-" in k}  # task 1's records and record-infos
  assert len(want) == 4
  ids = {k: v for k, v in after.items() if k.startswith("out/ids_cache/")}
  assert ids and ids.items() <= {
      f"out/{k}": v for k, v in local["tree"]["files"].items()}.items()
  assert {k: v for k, v in after.items() if ENTRIES not in k} == {
      **before, **want, **ids}
  ledger = _tool(["tree", f"{url}/out"], s3_server.env)["ledgers"]
  assert ledger["tfrecords"] == {
      k.split("/")[-1]: v for k, v in local["tree"]["ledgers"][
          "tfrecords"].items() if "-1-" in k}
  assert os.listdir(tmp_path) == []


def test_a_missing_bucket_is_one_line_and_makes_no_folder(
    local, gcs_server, s3_server, tmp_path):
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  root = local["root"]
  gs = start(_flags(root, save_dir="gs://no-such-bucket-x/out"), 300,
             gcs_server.env, cwd=str(cwd))
  s3 = start(_flags(root, inputs="s3://no-such-bucket-y",
                    save_dir=f"{tmp_path}/out"), 300, s3_server.env,
             cwd=str(cwd))
  assert refused(gs.result()) == (
      f"{PROGRAM}: --save_dir=gs://no-such-bucket-x/out: bucket "
      "no-such-bucket-x does not exist (or these credentials cannot see it)")
  assert refused(s3.result()) == (
      f"{PROGRAM}: --input_glob=s3://no-such-bucket-y/corpus/part-*.txt: "
      "bucket no-such-bucket-y does not exist (or these credentials cannot "
      "see it)")
  assert os.listdir(cwd) == [] and sorted(os.listdir(tmp_path)) == ["cwd"]
