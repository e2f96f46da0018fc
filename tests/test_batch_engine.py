"""The batch-prediction worker's engine (`xlnet_tf/batch_predict/engine.py`)
on a tiny classifier export: float32 (the SavedModel's signature, or XLA
for repeated shapes on a graph frozen at the first compile, or the frozen
graph alone) answers as the SavedModel's own signature does, at every
length it is given; bfloat16 answers within bfloat16 rounding of float32 and not
bit-identically (it ran in bfloat16), with float32 in and out; and
run_batch_predict.py says once, on stderr, when the CPU only emulates
bfloat16."""

import sys
import types
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf as xt
from conftest import ROOT, spiece_path
from xlnet_tf import precision
from xlnet_tf.batch_predict.engine import (MATMUL_OPS, FrozenSignature,
                                           XlaSignature, bfloat16_graph,
                                           load_export)
from xlnet_tf.tasks.classification.serving import export_classifier
from xlnet_tf.tasks.classification.batch import ClassifierBatch
from xlnet_tf.tasks.language_model.batch import LanguageModelBatch

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_batch_predict  # noqa: E402  pylint: disable=wrong-import-position

TINY = xt.XLNetConfig(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64,
                      n_token=32000, ff_activation="gelu", untie_r=True)
LABELS = ["contradiction", "entailment", "neutral"]
# (B, L) of the calls: lengths vary per batch, as the job's do.
SHAPES = ((3, 7), (3, 20), (2, 32))


@pytest.fixture(scope="module")
def export(shared, tmp_path_factory):
  tmp = tmp_path_factory.mktemp("engine")
  model = xt.XLNetClassifier(xt.XLNetModel(TINY, xt.RunOptions()),
                             n_class=3, task_name="mnli")
  model.build(None)
  # Larger weights than the initializer's: logits far from uniform, so a
  # rounding difference shows in the probabilities.
  rng = np.random.default_rng(1)
  model.set_weights([w + rng.normal(0, 0.2, w.shape).astype(w.dtype)
                     for w in model.get_weights()])
  return export_classifier(model, str(tmp / "export"), 32, False, LABELS,
                           sp_model_path=spiece_path(shared),
                           text_signatures=False)


def _features(b, l, seed):
  """LEFT-padded features `[b, l]`: row i has i padding positions."""
  rng = np.random.default_rng(seed)
  mask = np.zeros([b, l], np.float32)
  for i in range(b):
    mask[i, :i] = 1.0
  return {"input_ids": tf.constant(rng.integers(10, 32000, (b, l)), tf.int32),
          "segment_ids": tf.constant(np.where(mask > 0, 4, 0), tf.int32),
          "input_mask": tf.constant(mask)}


def _calls(signature):
  return [{k: v.numpy() for k, v in signature(**_features(b, l, l)).items()}
          for b, l in SHAPES]


@pytest.mark.parametrize("way", ["xla", "saved_model", "frozen"])
def test_float32_answers_as_the_saved_model(export, way):
  reference = _calls(tf.saved_model.load(export).signatures["serve_features"])
  engine = load_export(export, "float32",
                       xla_after=1 if way == "xla" else None)
  signature = engine.signatures["serve_features"]
  if way == "frozen":
    signature = FrozenSignature(engine.loaded.signatures["serve_features"])
  elif way == "xla":
    # Each shape's first call runs the SavedModel's signature, unfrozen;
    # its second compiles (the first compile freezes).
    assert isinstance(signature, XlaSignature)
    first = _calls(signature)
    assert signature._xla is None  # pylint: disable=protected-access
  else:
    assert signature is engine.loaded.signatures["serve_features"]
  got = (first if way == "xla" else _calls(signature)) + _calls(signature)
  for want, out in zip(reference * 2, got):
    assert sorted(out) == ["class_id", "label", "logits", "probabilities"]
    for k, v in want.items():
      assert out[k].dtype == v.dtype and out[k].shape == v.shape, k
    np.testing.assert_allclose(out["probabilities"], want["probabilities"],
                               rtol=0, atol=1e-5)
    np.testing.assert_allclose(out["logits"], want["logits"], rtol=0,
                               atol=1e-5)
    np.testing.assert_array_equal(out["class_id"], want["class_id"])
    np.testing.assert_array_equal(out["label"], want["label"])
  assert engine.signatures["serve_features"] is \
      engine.signatures["serve_features"]  # built once
  if way == "xla":
    assert signature._xla is not None  # pylint: disable=protected-access


@pytest.mark.bfloat16_compute
def test_bfloat16_rounds_and_keeps_float32_outside(export):
  reference = _calls(load_export(export, "float32", xla_after=None)
                     .signatures["serve_features"])
  signature = load_export(export, "bfloat16").signatures["serve_features"]
  # 2 layers x (q, k, v, r, o, 2 FFN) + attention products + head.
  assert signature.bfloat16_ops >= 2 * 7
  got = _calls(signature)
  for want, out in zip(reference, got):
    assert out["probabilities"].dtype == np.float32
    assert out["logits"].dtype == np.float32
    assert out["class_id"].dtype == np.int32
    assert out["label"].dtype == object  # bytes, as the SavedModel's
    diff = np.abs(out["probabilities"] - want["probabilities"]).max()
    assert 0 < diff < 0.03, diff
  assert set(np.concatenate([o["label"] for o in got])) <= \
      {x.encode() for x in LABELS}


def test_bfloat16_graph_rewrites_float32_matmuls_only():
  @tf.function
  def f(x, n):
    y = tf.matmul(x, tf.ones([4, 3]))
    z = tf.einsum("bi,ij->bj", y, tf.ones([3, 2]))
    return z, tf.matmul(n, n)  # integers stay as they are
  graph_def = f.get_concrete_function(
      tf.TensorSpec([None, 4]), tf.TensorSpec([2, 2], tf.int32)
      ).graph.as_graph_def()
  out, n = bfloat16_graph(graph_def)
  assert n == 2
  kinds = {(node.op, tf.dtypes.as_dtype(node.attr["T"].type).name)
           for node in out.node if node.op in MATMUL_OPS}
  assert kinds == {("MatMul", "bfloat16"), ("Einsum", "bfloat16"),
                   ("MatMul", "int32")}


def test_unknown_precision_is_refused(export):
  with pytest.raises(ValueError) as e:
    load_export(export, "float16")
  assert str(e.value) == ("precision 'float16': one of ('float32', "
                          "'bfloat16')")


def _bfloat16_flags(export, tmp_path, xla: bool):
  """run_batch_predict's flags for `--precision=bfloat16` on two rows."""
  rows = tmp_path / "rows.txt"
  rows.write_text("It rains.\nThe street is wet.\n")
  return types.SimpleNamespace(
      export_dir=export, input=str(rows), input_format="auto",
      text_column=None, text_b_column=None, output_dir=str(tmp_path / "out"),
      job=None, layers=["-1"], pooling=["masked_mean"], tfrecord=False,
      batch_size=4, bucketing="global", precision="bfloat16", xla=xla,
      rows_per_shard=50_000, overwrite=False, runner=None,
      pipeline_options=None)


@pytest.mark.bfloat16_compute
@pytest.mark.parametrize("native", [False, True, None])
def test_emulated_bfloat16_is_said_once_before_any_work(export, tmp_path,
                                                        capsys, native):
  f = _bfloat16_flags(export, tmp_path, xla=False)
  with mock.patch.object(run_batch_predict, "cpu_has_native_bfloat16",
                         return_value=native):
    job, _ = run_batch_predict.job_from_flags(f)
  assert job.precision == "bfloat16"
  err = capsys.readouterr().err
  if native is False:
    assert err == ("run_batch_predict: --precision=bfloat16: this CPU has no "
                   "AVX512_BF16 or AMX; bfloat16 is emulated and slower than "
                   "float32\n")
  else:
    assert err == ""
  assert not (tmp_path / "out").exists() or \
      not any((tmp_path / "out").iterdir())


def test_bfloat16_is_refused_before_any_work_for_a_loop_of_windows():
  """A language model's export (and a classifier read in segments) reads
  long texts in a loop the bfloat16 rewrite does not reach."""
  meta = {"segment_length": 64, "max_seq_length": 256}
  assert ClassifierBatch.bfloat16_problem(meta) == (
      "a model read in segments with memory runs them in a loop that the "
      "bfloat16 rewrite does not reach; use float32")
  assert ClassifierBatch.bfloat16_problem({"max_seq_length": 64}) is None
  assert LanguageModelBatch.bfloat16_problem({}) == (
      "a language model's export reads long texts in a loop of windows "
      "that the bfloat16 rewrite does not reach; use float32")


def test_bfloat16_is_refused_where_its_matmuls_would_crash(export, tmp_path,
                                                           monkeypatch):
  # An AVX-512 CPU with oneDNN capped below it: TensorFlow's bfloat16
  # matmuls segfault, so the job and a direct load refuse bfloat16.
  monkeypatch.setattr(precision, "cpu_flags",
                      lambda *_: frozenset({"avx2", "avx512f"}))
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
  problem = ("TensorFlow's bfloat16 matmuls crash on this CPU with AVX-512 "
             "when ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN below it; unset "
             "ONEDNN_MAX_CPU_ISA or compute in float32")
  with pytest.raises(run_batch_predict.UsageError) as e:
    run_batch_predict.job_from_flags(_bfloat16_flags(export, tmp_path, False))
  assert str(e.value) == f"--precision=bfloat16: {problem}"
  assert not (tmp_path / "out").exists()
  with pytest.raises(ValueError) as e:
    load_export(export, "bfloat16")
  assert str(e.value) == f"precision 'bfloat16': {problem}"
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")  # not capped
  assert load_export(export, "bfloat16").signatures["serve_features"] \
      .bfloat16_ops > 0


@pytest.mark.bfloat16_compute
def test_xla_with_bfloat16_is_refused_before_any_work(export, tmp_path):
  f = _bfloat16_flags(export, tmp_path, xla=True)
  with pytest.raises(run_batch_predict.UsageError) as e:
    run_batch_predict.job_from_flags(f)
  assert str(e.value) == ("--xla: XLA runs float32 only; drop it or "
                          "--precision=bfloat16")
  assert not (tmp_path / "out").exists()
