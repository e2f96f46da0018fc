"""The task and LM scripts with their paths in buckets (issue 36), against
the real servers of tests/object_stores.py: each run's files have the same
bytes as the same run on local paths, and a bad location is one line (exit
2) before any work. Runs go to subprocesses with the stores' settings
(gcsfs reads them when imported, TF's gs:// when it starts).

- convert.py writes an HF directory to s3://, and back from gs:// into the
  original layout on gs:// (TF's own gs://);
- run_score.py reads that HF model and its texts from s3:// and writes
  its JSONL to gs://;
- run_ner.py predicts from a gs:// checkpoint, a CoNLL file on s3:// into
  an s3:// predict_dir, its records on gs://;
- train_spiece reads its corpus from s3:// and writes the model to gs://.
"""

import base64
import hashlib
import json
import os
import sys
import uuid

import pytest
import sentencepiece as spm

import xlnet_tf as xt
from conftest import ROOT, refused, run, shared_dir, spiece_path, start
from object_stores import make_gcs_bucket, make_s3_bucket
from xlnet_tf.io import save_native_checkpoint, save_original_checkpoint
from xlnet_tf.pretrained import build_model
from xlnet_tf.tasks import TokenClassificationTask

# One layer of width 16 over the released vocabulary: seconds to run.
TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000, ff_activation="gelu", untie_r=True)
LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
TIMEOUT = 300
# Bucket files through data_utils.paths, in a process with the stores' env.
_UPLOAD = """import sys
from data_utils import paths
for pair in sys.argv[1:]:
  local, url = pair.split("=", 1)
  paths.upload(local, url)
"""
_DIGESTS = """import hashlib, json, sys
from data_utils import paths
found = {}
for folder in sys.argv[1:]:
  for name in paths.walk_files(folder):
    found[name] = hashlib.sha256(
        paths.read_bytes(paths.join(folder, name))).hexdigest()
print(json.dumps(found))
"""
_READ = """import base64, sys
from data_utils import paths
print(base64.b64encode(paths.read_bytes(sys.argv[1])).decode("ascii"))
"""


def _name(prefix):
  return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def stores(s3_server, gcs_tf_proxy, gcs_server):
  """`(env, s3 bucket URL, gs bucket URL)`: both stores, TF's gs:// too."""
  s3, gs = _name("scripts"), _name("scripts")
  make_s3_bucket(s3_server, s3)
  make_gcs_bucket(gcs_server, gs)
  return {**s3_server.env, **gcs_tf_proxy.env}, f"s3://{s3}", f"gs://{gs}"


def _ok(res):
  assert res.returncode == 0, res.stderr[-4000:]
  return res


def _python(env, code, *args):
  return _ok(run([sys.executable, "-c", code, *args], TIMEOUT, env)).stdout


def _upload(env, **pairs):
  _python(env, _UPLOAD, *[f"{local}={url}" for url, local in pairs.items()])


def _read(env, url):
  return base64.b64decode(_python(env, _READ, url).strip().splitlines()[-1])


def _digests(env, *folders):
  """{name below the folder: sha256} of every file below `folders`."""
  return json.loads(_python(env, _DIGESTS, *folders).strip().splitlines()[-1])


def _local_digests(folder, skip=()):
  out = {}
  for top, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(top, name)
      if os.path.relpath(path, folder) in skip:
        continue
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(
            f.read()).hexdigest()
  return out


def _no_scheme_folders():
  for name in ("gs:", "s3:"):
    assert not os.path.exists(os.path.join(ROOT, name)), name


def _convert(env, *args):
  return start([sys.executable, "-m", "xlnet_tf.convert", *args], TIMEOUT,
               env)


def test_convert_and_score_with_buckets(stores, tmp_path):
  """convert (HF to s3://, HF from gs:// to the original layout on gs://)
  and run_score (model and texts on s3://, JSONL to gs://): the same bytes
  as the local runs."""
  env, s3, gs = stores
  lm = build_model("lm", TINY, xt.RunOptions(dropout=0.0, dropatt=0.0))
  source = save_original_checkpoint(lm, str(tmp_path / "orig" / "model.ckpt"))
  TINY.to_json(str(tmp_path / "orig" / "xlnet_config.json"))
  texts = tmp_path / "texts.txt"
  texts.write_text("The cat sat.\n\nA dog ran home quickly.\n",
                   encoding="utf-8")
  hf_args = [f"--from={source}", "--to_format=hf", "--model=lm"]
  jobs = [_convert(env, *hf_args, f"--to={tmp_path}/hf"),
          _convert(env, *hf_args, f"--to={s3}/hf")]
  _upload(env, **{f"{s3}/texts.txt": str(texts)})
  for job in jobs:
    _ok(job.result())
  assert _digests(env, f"{s3}/hf") == _local_digests(tmp_path / "hf")

  score = [sys.executable, "run_score.py",
           f"--spiece_model_file={spiece_path(shared_dir())}",
           "--batch_size=2"]
  jobs = [start(score + [f"--init_checkpoint={tmp_path}/hf",
                         f"--input_file={texts}",
                         f"--output_file={tmp_path}/scores.jsonl"],
                TIMEOUT, env),
          start(score + [f"--init_checkpoint={s3}/hf",
                         f"--input_file={s3}/texts.txt",
                         f"--output_file={gs}/out/scores.jsonl"],
                TIMEOUT, env)]
  # HF back to the original layout, read by gcsfs, written by TF's gs://.
  _upload(env, **{f"{gs}/hf/{n}": str(tmp_path / "hf" / n)
                  for n in ("config.json", "model.safetensors")})
  back = [f"--from={gs}/hf", "--to_format=original", "--model=lm"]
  jobs += [_convert(env, *back, f"--to={tmp_path}/back/model.ckpt"),
           _convert(env, *back, f"--to={gs}/back/model.ckpt")]
  local_run, bucket_run = (_ok(j.result()) for j in jobs[:2])
  assert bucket_run.stdout == local_run.stdout  # the summary line
  assert _digests(env, f"{gs}/out") == {
      "scores.jsonl": _local_digests(tmp_path)["scores.jsonl"]}
  for job in jobs[2:]:
    _ok(job.result())
  assert _digests(env, f"{gs}/back") == _local_digests(tmp_path / "back")
  _no_scheme_folders()


def _conll(path):
  path.write_text("-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nlives VBZ "
                  "B-VP O\nin IN B-PP O\nNew NNP B-NP B-LOC\nYork NNP I-NP "
                  "I-LOC\n. . O O\n\nMary NNP B-NP B-PER\nsmiled VBD B-VP O"
                  "\n. . O O\n\n", encoding="utf-8")
  return str(path)


def _ner_args(config, ckpt, predict_file, output_dir, model_dir, predict_dir,
              data_dir):
  return [sys.executable, "run_ner.py", "--do_predict",
          f"--label_list={','.join(LABELS)}", f"--model_config_path={config}",
          f"--spiece_model_file={spiece_path(shared_dir())}",
          f"--predict_ckpt={ckpt}", f"--data_dir={data_dir}",
          f"--predict_file={predict_file}", f"--output_dir={output_dir}",
          f"--model_dir={model_dir}", f"--predict_dir={predict_dir}",
          "--max_seq_length=16", "--doc_stride=4", "--predict_batch_size=8"]


def test_run_ner_predicts_from_and_into_buckets(stores, tmp_path):
  """--predict_ckpt on gs:// (TF's own), --predict_file and --predict_dir
  on s3://, the records in gs://: the prediction files and their ledger
  entries have the local run's bytes."""
  env, s3, gs = stores
  task = TokenClassificationTask(TINY, xt.RunOptions(dropout=0.0,
                                                     dropatt=0.0),
                                 len(LABELS), "ner", 16)
  ckpt = save_native_checkpoint(task.build_model(),
                                str(tmp_path / "ckpt" / "ckpt-1"))
  config = tmp_path / "config.json"
  TINY.to_json(str(config))
  conll = _conll(tmp_path / "input.conll")
  names = [os.path.basename(p) for p in os.listdir(tmp_path / "ckpt")]
  _upload(env, **{f"{gs}/ner/ckpt/{n}": str(tmp_path / "ckpt" / n)
                  for n in names},
          **{f"{s3}/ner/input.conll": conll})
  local = start(_ner_args(config, ckpt, conll, tmp_path / "data",
                          tmp_path / "model", tmp_path / "pred", tmp_path),
                TIMEOUT, env)
  bucket = run(_ner_args(config, f"{gs}/ner/ckpt/ckpt-1",
                         f"{s3}/ner/input.conll", f"{gs}/ner/data",
                         f"{gs}/ner/model", f"{s3}/ner/pred", f"{s3}/ner"),
               TIMEOUT, env)
  _ok(local.result())
  _ok(bucket)
  want = _local_digests(tmp_path / "pred", skip={".xlnet_tf_outputs.json"})
  got = _digests(env, f"{s3}/ner/pred")
  assert sorted(got) == sorted(
      [".xlnet_tf_outputs.d/" + n + ".json" for n in want] + list(want))
  assert sorted(want) == ["input.conll.predictions.conll",
                          "input.conll.predictions.jsonl",
                          "input.conll.results.json"]
  for name in want:
    if not name.endswith(".json"):
      assert got[name] == want[name], name
  # The scores are the same; the results name their own input and checkpoint.
  result = json.loads(_read(env, f"{s3}/ner/pred/input.conll.results.json"))
  with open(tmp_path / "pred" / "input.conll.results.json") as f:
    expected = json.load(f)
  assert (result.pop("file"), result.pop("checkpoint")) == (
      f"{s3}/ner/input.conll", f"{gs}/ner/ckpt/ckpt-1")
  assert (expected.pop("file"), expected.pop("checkpoint")) == (conll, ckpt)
  assert result == expected
  _no_scheme_folders()


def test_train_spiece_stages_a_bucket(stores, tmp_path):
  """SentencePiece reads and writes local files: the corpus is staged from
  s3://, the model and vocab are uploaded to gs://, byte for byte the local
  run's."""
  env, s3, gs = stores
  corpus = tmp_path / "corpus.txt"
  with open(os.path.join(shared_dir(), "data", "corpus",
                         "gutenberg_state_union.txt"), encoding="utf-8") as f:
    corpus.write_text("".join(line for _, line in zip(range(300), f)),
                      encoding="utf-8")
  _upload(env, **{f"{s3}/sp/corpus.txt": str(corpus)})
  train = [sys.executable, "-m", "data_utils.train_spiece", "--vocab_size=200"]
  local = start(train + [f"--input={corpus}",
                         f"--model_prefix={tmp_path}/out/sp"], TIMEOUT, env)
  bucket = _ok(run(train + [f"--input={s3}/sp/corpus.txt",
                            f"--model_prefix={gs}/sp/out/sp"], TIMEOUT, env))
  _ok(local.result())
  assert bucket.stdout.strip() == f"wrote {gs}/sp/out/sp.model (200 pieces)"
  got, want = _digests(env, f"{gs}/sp/out"), _local_digests(tmp_path / "out")
  assert sorted(got) == ["sp.model", "sp.vocab"]
  assert got["sp.vocab"] == want["sp.vocab"]
  # The model records where it was trained from (its trainer_spec), so its
  # bytes differ; its pieces, scores and segmentation do not.
  models = [spm.SentencePieceProcessor(
      model_proto=_read(env, f"{gs}/sp/out/sp.model")),
            spm.SentencePieceProcessor(
                model_file=str(tmp_path / "out" / "sp.model"))]
  text = corpus.read_text(encoding="utf-8")
  bucket_sp, local_sp = ([(m.id_to_piece(i), m.get_score(i))
                          for i in range(m.get_piece_size())] +
                         [m.encode(text)] for m in models)
  assert bucket_sp == local_sp
  _no_scheme_folders()


def test_bad_locations_are_one_line(stores, tmp_path):
  """A bucket that does not exist, and a checkpoint on s3:// (TF 2.20 has
  no s3 filesystem): one line naming the flag, exit 2, nothing written."""
  env, s3, gs = stores
  missing = _name("missing")
  spiece = spiece_path(shared_dir())
  score = [sys.executable, "run_score.py", f"--spiece_model_file={spiece}"]
  jobs = {
      "score_bucket": start(score + [f"--init_checkpoint={tmp_path}",
                                     f"--input_file=s3://{missing}/in.txt"],
                            TIMEOUT, env),
      "score_s3": start(score + [f"--init_checkpoint={s3}/ckpt/model.ckpt",
                                 "--text=a b"], TIMEOUT, env),
      "convert_s3": _convert(env, f"--from={s3}/ckpt/model.ckpt",
                             f"--to={tmp_path}/hf", "--to_format=hf"),
      "convert_to_s3": _convert(env, f"--from={tmp_path}", "--to_format=native",
                                f"--to={s3}/native/ckpt"),
      "spiece_bucket": start([sys.executable, "-m", "data_utils.train_spiece",
                              f"--input=gs://{missing}/corpus.txt",
                              f"--model_prefix={tmp_path}/sp"], TIMEOUT, env),
  }
  no_s3 = ("TensorFlow 2.20 has no s3:// filesystem (it reads and writes this "
           "path itself); use gs:// or a local path")
  gone = f"bucket {missing} does not exist (or these credentials cannot see it)"
  lines = {name: refused(job.result()) for name, job in jobs.items()}
  assert lines == {
      "score_bucket": f"run_score: --input_file=s3://{missing}/in.txt: "
                      f"{gone}",
      "score_s3": f"run_score: --init_checkpoint={s3}/ckpt/model.ckpt: "
                  f"{no_s3}",
      "convert_s3": f"convert: error: --from={s3}/ckpt/model.ckpt: {no_s3}",
      "convert_to_s3": f"convert: error: --to={s3}/native/ckpt: {no_s3}",
      "spiece_bucket": f"train_spiece: --input=gs://{missing}/corpus.txt: "
                       f"{gone}",
  }
  assert os.listdir(tmp_path) == []
  _no_scheme_folders()
