"""Batch prediction on Apache Beam (run_batch_predict.py, xlnet_tf/
batch_predict/) against the single-process scripts, on real shared data
with tiny models: run_classifier.py --do_predict (RTE), run_ner.py
--do_predict --document_context (CoNLL-2003: each sentence read after the
words before it in its document), run_embed.py (IMDB reviews, several
windows) and run_score.py --order=l2r (SST-2 sentences). The jobs run as
one pipeline on the DirectRunner in-process, and again with 2 worker
processes; both equal the scripts row for row, by key: labels and tags
identical, values within 1e-5 (and 1e-5 relative). Rows that cannot be
predicted are in the dead-letter shards with their reasons, and the
manifest's counts and sha256 are the files'.
"""

import dataclasses
import glob
import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from batch_cases import batch_jobs, build_work, shard_rows
from data_utils.classification.features import convert_example
from data_utils.errors import UsageError
from data_utils.ner.alignment import WordPieces
from data_utils.ner.features import NerFeatureSettings, convert_data
from data_utils.ner.reader import read_ner
from data_utils.text_inputs import InputSpec, read_rows
from data_utils.tokenization import SEG_ID_B, SentencePieceTokenizer
from xlnet_tf.batch_predict import engine, pipeline
from xlnet_tf.batch_predict.buckets import padding_of, plan
from xlnet_tf.batch_predict.engine import XLA_AFTER
from xlnet_tf.batch_predict.job import resolve_export
from xlnet_tf.batch_predict.run import run_jobs
from xlnet_tf.export.directory import EXPORT_MARKER

TINY = xt.XLNetConfig(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64,
                      n_token=32000, ff_activation="gelu", untie_r=True)
WINDOW = 64  # the LM export's window (texts longer are read in segments)
# Its first test waits for the shared work: four entry scripts (the scripts'
# outputs every job is held against) and two exports, then the five jobs
# twice (in-process and on 2 workers), one pipeline each time.
pytestmark = pytest.mark.long("builds what every test here compares")
TWO_WORKERS = ["--runner=DirectRunner", "--direct_num_workers=2",
               "--direct_running_mode=multi_processing"]


@pytest.fixture(scope="module")
def work(shared, tmp_path_factory):
  """Tiny models trained or built, exported, and the scripts' outputs."""
  return build_work(shared, tmp_path_factory.mktemp("batch"), TINY, WINDOW)


@pytest.fixture(scope="module")
def runs(work):
  """The four jobs as one pipeline, in-process and with 2 workers."""
  out = {}
  for name, args in (("in_process", ["--runner=DirectRunner"]),
                     ("two_workers", TWO_WORKERS)):
    jobs = batch_jobs(work, work["tmp"] / name, TINY.n_layer)
    manifests = run_jobs(list(jobs.values()), args)
    out[name] = {k: (j, m) for (k, j), m in zip(jobs.items(), manifests)}
  return out


MODES = ("in_process", "two_workers")


@pytest.mark.parametrize("mode", MODES)
def test_classifier_equals_run_classifier(work, runs, mode):
  job, manifest = runs[mode]["classifier"]
  rows = shard_rows(job)
  with open(work["tmp"] / "rte_model" / "predictions" / "RTE.tsv") as f:
    script = [r.split("\t") for r in f.read().splitlines()[1:]]
  assert len(rows) == len(script) == 120
  assert manifest["counts"] == {"rows_read": 120, "predicted": 120,
                                "dead_letters": 0}
  # Line 2 + i of the TSV is example i (its guid is its index column).
  with open(work["test_tsv"], encoding="utf-8") as f:
    guids = [r.split("\t")[0] for r in f.read().splitlines()[1:]]
  labels = {guid: label for guid, label in script}
  for i, guid in enumerate(guids):
    assert rows[(work["test_tsv"], i + 2)]["label"] == labels[guid]
  _assert_export_values(work, job, rows, "probabilities")


def _assert_export_values(work, job, rows, key, atol=1e-5):
  """The rows' values: the features export's serving_default at full
  length on Python features (convert_example) of every TSV row, within
  `atol`."""
  export = tf.saved_model.load(job.export.path)
  tok = SentencePieceTokenizer(work["sp"])
  with open(work["test_tsv"], encoding="utf-8") as f:
    records = [r.split("\t") for r in f.read().splitlines()[1:]]
  f = [convert_example(tok.encode_ids(a), tok.encode_ids(b), 64)
       for _, a, b in records]
  want = export.signatures["serving_default"](
      **{k: tf.constant([x[k] for x in f], tf.float32 if k == "input_mask"
                        else tf.int32) for k in f[0]})[key]
  got = [rows[(work["test_tsv"], i + 2)][key] for i in range(len(records))]
  np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=atol)
  # The rows' values differ by more than 10x the tolerance.
  assert np.ptp(want.numpy(), axis=0).max() > 10 * atol


@pytest.mark.parametrize("mode", MODES)
def test_regressor_scores_equal_the_export(work, runs, mode):
  job, manifest = runs[mode]["regressor"]
  rows = shard_rows(job)
  assert manifest["counts"]["predicted"] == len(rows) == 120
  assert all(set(r) == {"file", "line", "score"} for r in rows.values())
  # A score is a raw linear output (up to 2.4 here): batches of other
  # shapes sum in another order, by up to 2.9e-5 on an AVX2-only CPU (the
  # job cuts its batches as the runner's bundles fall). Probabilities
  # squash the same error below 1e-5.
  _assert_export_values(work, job, rows, "score", atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_ner_equals_run_ner(work, runs, mode):
  job, manifest = runs[mode]["ner"]
  rows = shard_rows(job)
  predictions = work["tmp"] / "ner_model" / "predictions" / \
      "eng.testa.conll.predictions.jsonl"
  with open(predictions, encoding="utf-8") as f:
    script = [json.loads(line) for line in f]
  assert len(rows) == len(script) > 100
  assert manifest["counts"] == {"rows_read": len(script),
                                "predicted": len(script), "dead_letters": 0}
  tags = set()
  for want in script:
    got = rows[(work["ner_test"], want["line"])]
    assert got["words"] == want["tokens"] and got["text"] == want["text"]
    assert got["tags"] == want["tags"]
    assert got["entities"] == want["entities"]
    tags.update(got["tags"])
  assert len(tags) > 2  # the model predicts entities, not only O


def test_ner_windows_hold_the_document_context_run_ner_gives(work):
  """The model was trained with --document_context and its export says
  so; the job reads each CoNLL sentence in run_ner.py's windows
  (`convert_data`): after the nearest whole words of its document that fit
  (the issue: without them, 22 of 500 testb sentences got other tags)."""
  export = resolve_export(str(work["tmp"] / "ner_model" / "saved_model"))
  assert export.meta["document_context"] is True
  kind = export.spec.batch_kind(export.meta, {}, export.spiece_model)
  rows = list(kind.in_context(export.meta, read_rows(
      work["ner_test"], InputSpec("conll"))))
  settings = NerFeatureSettings(32, 12, document_context=True)
  data = read_ner(work["ner_test"])
  windows, stats = convert_data(data, WordPieces(SentencePieceTokenizer(
      work["sp"])), None, settings)
  assert len(rows) == stats.sentences == len(data.sentences)
  for i, row in enumerate(rows):
    want = [w for w in windows if w.sentence == i]
    got = kind.prepare(row.fields).payload["windows"]
    assert len(got) == len(want)
    for g, w in zip(got, want):
      n = len(g["input_ids"])
      assert g["input_ids"].tolist() == w.input_ids[-n:] and \
          sum(w.input_mask[:-n]) == len(w.input_mask) - n
      assert g["segment_ids"].tolist() == w.segment_ids[-n:]
      assert g["word_index"].tolist() == w.word_index[-n:]
  with_context = sum(any(SEG_ID_B in w["segment_ids"] for w in
                         kind.prepare(r.fields).payload["windows"])
                     for r in rows)
  assert with_context == stats.context_sentences > len(rows) // 2
  # Rows carry at most a window's worth of words before them (32 here), and
  # that is enough: long documents were cut, and still equal.
  assert max(sum(map(len, r.fields["context"])) for r in rows) == 32
  # The context matters to this model (4 of 112 sentences when written):
  # read alone, as the job did before, some sentences get other tags, so
  # test_ner_equals_run_ner checks the context too.
  signature = tf.saved_model.load(export.path).signatures["serve_features"]
  alone = export.spec.batch_kind(dict(export.meta, document_context=False),
                                 {}, export.spiece_model)

  def tags(k):
    out = []
    for r in rows:
      units = [u.payload for u in k.units(k.prepare(r.fields))]
      out.append(k.join(units, k.infer(signature, units)[0])[1])
    return out
  assert tags(kind) != tags(alone)


def test_an_ner_export_that_does_not_say_its_document_context_is_refused(
    work, tmp_path):
  """Made before the marker recorded it: whether the model reads document
  context is unknown, so it is not guessed."""
  export = resolve_export(str(work["tmp"] / "ner_model" / "saved_model"))
  old = tmp_path / "old"
  shutil.copytree(export.path, old)
  with open(old / EXPORT_MARKER, encoding="utf-8") as f:
    marker = json.load(f)
  del marker["batch"]["document_context"]
  with open(old / EXPORT_MARKER, "w", encoding="utf-8") as f:
    json.dump(marker, f)
  with pytest.raises(UsageError) as e:
    resolve_export(str(old))
  assert str(e.value) == (
      f"--export_dir={old}: exported before its marker recorded run_ner.py's "
      "--document_context (a model trained with it gives other tags when "
      "read without it); export it again")


@pytest.mark.parametrize("mode", MODES)
def test_embeddings_equal_run_embed(work, runs, mode):
  job, _ = runs[mode]["embed"]
  rows = shard_rows(job)
  tmp = work["tmp"]
  with open(tmp / "emb.jsonl", encoding="utf-8") as f:
    index = [json.loads(line) for line in f]
  pieces = np.load(tmp / "emb.pieces.npy")
  assert len(rows) == len(index) == 12
  assert max(len(r["ids"]) for r in index) > 3 * WINDOW  # several windows
  for i, want in enumerate(index):
    got = rows[(work["embed_input"], i + 1)]
    for key in ("pieces", "ids", "starts", "ends"):
      assert got[key] == want[key], key
    for pooling in ("last", "first", "mean", "masked_mean"):
      np.testing.assert_allclose(got["pooled"][pooling],
                                 np.load(tmp / f"emb.{pooling}.npy")[i],
                                 atol=1e-5, err_msg=pooling)
  # Per-piece vectors: the TFRecord shards hold run_embed's rows.
  seen = 0
  for path in sorted(glob.glob(f"{job.output_dir}/predictions-*.tfrecord")):
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      feature = example.features.feature
      line = feature["index"].int64_list.value[0]
      first, end = index[line - 1]["rows"]
      vectors = np.array(feature["piece_vectors"].float_list.value)
      np.testing.assert_allclose(vectors.reshape(pieces[first:end].shape),
                                 pieces[first:end], atol=1e-5)
      seen += 1
  assert seen == 12


@pytest.mark.parametrize("mode", MODES)
def test_scores_equal_run_score_and_bad_rows_are_dead_letters(work, runs,
                                                              mode):
  job, manifest = runs[mode]["score"]
  rows = shard_rows(job)
  with open(work["tmp"] / "scores.jsonl", encoding="utf-8") as f:
    script = [json.loads(line) for line in f]
  assert len(rows) == len(script) == 40
  for i, want in enumerate(script):
    got = rows[(work["score_input"], i + 1)]
    assert got["pieces"] == want["pieces"] and got["ids"] == want["ids"]
    np.testing.assert_allclose(got["log_probs"], want["log_probs"],
                               atol=1e-5)
    assert got["sum"] == pytest.approx(want["sum"], abs=1e-4)
  dead = shard_rows(job, "dead-letter")
  n = len(SentencePieceTokenizer(work["sp"]).encode_ids(work["long"])) + 2
  assert dead == {
      (work["score_input"], 41): {
          "file": work["score_input"], "line": 41,
          "reason": f"{n} pieces with the markers, more than the export's "
                    f"window of {WINDOW} (it reads one window)"},
      (work["score_input"], 42): {"file": work["score_input"], "line": 42,
                                  "reason": "empty text"}}
  assert manifest["counts"] == {"rows_read": 42, "predicted": 40,
                                "dead_letters": 2}


@pytest.mark.parametrize("mode", MODES)
def test_manifest_lists_every_file_with_its_rows_and_sha256(runs, mode):
  for job, manifest in runs[mode].values():
    listed = manifest["shards"] + manifest["dead_letter_shards"]
    names = sorted(n for n in os.listdir(job.output_dir)
                   if not n.startswith("."))
    assert names == sorted([x["name"] for x in listed] + ["manifest.json"])
    for entry in listed:
      path = os.path.join(job.output_dir, entry["name"])
      with open(path, "rb") as f:
        data = f.read()
      assert hashlib.sha256(data).hexdigest() == entry["sha256"]
      if path.endswith(".jsonl"):
        assert data.count(b"\n") == entry["rows"]
    counts = manifest["counts"]
    assert counts["predicted"] + counts["dead_letters"] == \
        counts["rows_read"]
    assert sum(x["rows"] for x in manifest["shards"]
               if x["name"].endswith(".jsonl")) == counts["predicted"]
    with open(os.path.join(job.output_dir, "manifest.json")) as f:
      assert json.load(f) == manifest


def test_global_buckets_give_the_same_bytes_with_any_worker_count(runs):
  """The batches are a function of the input alone (`buckets.plan`), so
  in-process and 2 worker processes write the same shards, byte for
  byte, and the same manifests."""
  for name, (_, manifest) in runs["in_process"].items():
    assert runs["two_workers"][name][1] == manifest, name


@pytest.mark.parametrize("name", ["ner", "classifier"])
def test_the_batches_fed_are_the_global_plans(runs, name):
  """The manifest's batch shapes and padding are those of `buckets.plan`
  over the kind's units of every row (a long NER sentence's windows are
  units of their own, each batched with windows of its length)."""
  job, manifest = runs["in_process"][name]
  kind = job.kind()
  rows = job.export.spec.batch.in_context(job.export.meta, read_rows(
      job.files[0], job.inputs))
  units = []
  for row in rows:
    pieces = kind.units(kind.prepare(row.fields))
    units += [(((job.files[0], row.line), i, len(pieces)), u.length)
              for i, u in enumerate(pieces)]
  assert len(units) > manifest["counts"]["rows_read"] or name != "ner"
  batches = plan(units, job.batch_size, job.positions_per_batch())
  shapes = {}
  for b in batches:
    shape = (len(b), max(n for _, n in b))
    shapes[shape] = shapes.get(shape, 0) + 1
  padding = manifest["padding"]
  assert padding["shapes"] == sorted([*s, n] for s, n in shapes.items())
  real, fed = padding_of([[n for _, n in b] for b in batches])
  assert (padding["positions_real"], padding["positions_fed"]) == (real, fed)
  assert padding["batches"] == len(batches)


@pytest.mark.parametrize("bucketing", ["bundle", "none"])
def test_per_bundle_and_unbucketed_batches_give_the_scripts_tags(
    work, bucketing):
  jobs = batch_jobs(work, work["tmp"] / bucketing, TINY.n_layer)
  ner = dataclasses.replace(jobs["ner"], bucketing=bucketing)
  (manifest,) = run_jobs([ner], ["--runner=DirectRunner"])
  assert manifest["padding"]["bucketing"] == bucketing
  rows = shard_rows(ner)
  with open(work["tmp"] / "ner_model" / "predictions" /
            "eng.testa.conll.predictions.jsonl", encoding="utf-8") as f:
    script = [json.loads(line) for line in f]
  assert len(rows) == len(script)
  for want in script:
    assert rows[(work["ner_test"], want["line"])]["tags"] == want["tags"]


def test_units_lost_inside_the_runner_are_named_and_nothing_is_published(
    work, runs, monkeypatch):
  """A unit that never comes out of RunInference (as a runner that loses
  data would do) stops the job before publishing, and the line names the
  step where the counts part."""
  _, reference = runs["in_process"]["classifier"]
  counts = reference["counts"]
  job = batch_jobs(work, work["tmp"] / "lossy", TINY.n_layer)["classifier"]
  victim = min(shard_rows(runs["in_process"]["classifier"][0]))[1]
  keep = pipeline._Outputs.process

  def drop_one(self, element):
    (key, _, _), _ = element
    if key[1] != victim:
      yield from keep(self, element)
  monkeypatch.setattr(pipeline._Outputs, "process", drop_one)
  with pytest.raises(RuntimeError) as raised:
    run_jobs([job], ["--runner=DirectRunner"])
  read, predicted = counts["rows_read"], counts["predicted"]
  assert str(raised.value) == (
      f"{read} rows read, but {predicted - 1} predicted and "
      f"{counts['dead_letters']} dead letters written: lost in the batching "
      f"and RunInference ({predicted} units made, {predicted - 1} "
      "predicted); nothing was published")
  assert os.listdir(job.output_dir) == []


def test_xla_runs_the_repeated_shapes_and_gives_the_same_rows(
    work, runs, monkeypatch):
  """`--xla` end to end: the shapes the job repeats run under XLA (seen
  through the engine's XLA graph) and the rows are the float32 job's:
  labels identical, probabilities within 1e-5."""
  job, manifest = runs["in_process"]["classifier"]
  assert any(n > XLA_AFTER for *_, n in manifest["padding"]["shapes"])
  calls = []
  xla_call = engine._XlaGraph.__call__

  def counted(self, **tensors):
    calls.append(tuple(tensors["input_ids"].shape))
    return xla_call(self, **tensors)
  monkeypatch.setattr(engine._XlaGraph, "__call__", counted)
  xla_job = dataclasses.replace(
      batch_jobs(work, work["tmp"] / "xla", TINY.n_layer)["classifier"],
      xla=True)
  (got,) = run_jobs([xla_job], ["--runner=DirectRunner"])
  assert calls and got["counts"] == manifest["counts"]
  want, rows = shard_rows(job), shard_rows(xla_job)
  assert [r["label"] for r in rows.values()] == \
      [want[k]["label"] for k in rows]
  np.testing.assert_allclose([r["probabilities"] for r in rows.values()],
                             [want[k]["probabilities"] for k in rows],
                             rtol=0, atol=1e-5)
