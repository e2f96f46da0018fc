"""Per-layer recomputation (`RunOptions.recompute`) gives the gradients of the
plain backward pass, dropout included; float16 training is loss-scaled."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import xlnet_tf as xt
from data_utils.errors import run_main
from xlnet_tf import precision
from xlnet_tf.kernels import dropout_fused
from xlnet_tf.layers import SeededDropout
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer
from xlnet_tf.training import loop as training
from linear_adam import LINEAR_ADAM

CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
RNG = np.random.RandomState(0)
IDS = tf.constant(RNG.randint(0, 50, [2, 6]), tf.int32)
SEGS = tf.constant([[0, 0, 0, 1, 1, 1]] * 2, tf.int32)
MEMS = [tf.constant(RNG.randn(2, 3, 16), tf.float32)] * 2
TARGETS = tf.one_hot([[1, 4], [2, 3]], 6)
TWO_STREAM = {"perm_mask": tf.constant(RNG.randint(0, 2, [2, 6, 6]),
                                       tf.float32),
              "target_mapping": TARGETS,
              "input_q": tf.reduce_sum(TARGETS, axis=1)}


def _encoder(reference=None, **options):
  model = xt.XLNetModel(CONFIG, xt.RunOptions(dropout=0.3, dropatt=0.2,
                                              mem_len=4, **options))
  model(IDS, segment_ids=SEGS)
  if reference is not None:
    model.set_weights(reference.get_weights())
  return model


def _loss_and_grads(model, two_stream, training=True, compiled=False):
  def step():
    with tf.GradientTape() as tape:
      out = model(IDS, segment_ids=SEGS, mems=MEMS, training=training,
                  **(TWO_STREAM if two_stream else {}))
      loss = tf.reduce_sum(out["sequence_output"] ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    return loss, [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                  for g, v in zip(grads, model.trainable_variables)]
  tf.random.set_seed(5)  # the same draws of the per-layer dropout seeds
  loss, grads = (tf.function(step) if compiled else step)()
  return float(loss), [g.numpy() for g in grads]


@pytest.mark.parametrize("two_stream", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_recompute_equals_plain_backward_with_dropout(two_stream, compiled,
                                                      fast):
  plain = _encoder(fast_kernels=fast)
  recomputed = _encoder(plain, recompute=True, fast_kernels=fast)
  loss, grads = _loss_and_grads(plain, two_stream, compiled=compiled)
  loss_rc, grads_rc = _loss_and_grads(recomputed, two_stream,
                                      compiled=compiled)
  # Dropout is really on (else equality would prove nothing) ...
  assert abs(loss - _loss_and_grads(plain, two_stream, training=False)[0]) > 1
  # ... and the recomputed layers replay its masks exactly.
  assert loss_rc == pytest.approx(loss, rel=1e-6)
  for var, g, g_rc in zip(plain.trainable_variables, grads, grads_rc):
    # Float32 sums of terms up to a few hundred (the embedding's gradient)
    # differ in the last bits with the summation order, which threads vary:
    # the tolerance follows the gradient's scale.
    np.testing.assert_allclose(g_rc, g, rtol=1e-5,
                               atol=1e-5 + 1e-6 * np.abs(g).max(),
                               err_msg=var.name)
  # The biases are sliced inside the recomputed function: their gradients
  # must survive it.
  assert np.abs(grads_rc[[v.name for v in plain.trainable_variables].index(
      "transformer/r_w_bias:0")]).max() > 0


def test_seeded_dropout_masks_differ_between_layers_and_calls():
  model = _encoder()
  tf.random.set_seed(1)
  first = model(IDS, training=True)["sequence_output"].numpy()
  second = model(IDS, training=True)["sequence_output"].numpy()
  assert not np.allclose(first, second)  # fresh seeds every step


def test_dropout_draws_its_mask_when_its_input_is_ready():
  """A mask that depends on the seed alone would be drawn for every layer at
  the start of the step and held until used (benchmarks/README.md): the
  random bits must wait for the dropped tensor."""
  drop = SeededDropout(0.1)

  @tf.function
  def f(x, seed):
    return drop(tf.identity(x, name="dropped"), training=True, seed=seed)
  graph = f.get_concrete_function(tf.TensorSpec([4, 8]),
                                  tf.TensorSpec([2], tf.int32)).graph

  def ancestors(op):
    seen, todo = set(), [op]
    while todo:
      current = todo.pop()
      for up in [t.op for t in current.inputs] + list(current.control_inputs):
        if up.name not in seen:
          seen.add(up.name)
          todo.append(up)
    return seen
  draws = [op for op in graph.get_operations() if "Random" in op.type]
  assert draws
  for op in draws:
    assert "dropped" in ancestors(op), op.name


def test_dropout_gradient_keeps_only_the_mask():
  """The backward reads the upstream gradient and the bool mask only: neither
  the input nor the output of the forward (4 bytes per element) stays alive
  for it."""
  keep = tf.constant([[True, False], [False, True]])

  @tf.function
  def grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = dropout_fused(x, keep, 0.2)
    return tape.gradient(y, x, output_gradients=tf.fill([2, 2], 2.0))
  x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
  np.testing.assert_allclose(grad(x), [[2.5, 0.0], [0.0, 2.5]])
  graph = grad.get_concrete_function(x).graph
  ops = graph.get_operations()
  forward = [op for op in ops
             if op.type in ("StatefulPartitionedCall", "PartitionedCall")]
  assert len(forward) == 1  # one compiled kernel
  held = {graph.inputs[0].ref()} | {t.ref() for op in forward + [
      op for op in ops if op.type == "IdentityN"] for t in op.outputs}
  backward = [op for op in ops if op.type in ("Mul", "Cast")]
  assert backward, [op.type for op in ops]
  for op in backward:
    assert not any(t.ref() in held for t in op.inputs), op.name
  # The mask's cast waits for the incoming gradient: free to run at once,
  # every layer's cast would be alive together (benchmarks/README.md).
  cast, = [op for op in ops if op.type == "Cast"]
  assert cast.control_inputs and all(
      t.dtype == tf.float32 and t.shape == [2, 2]
      for op in cast.control_inputs for t in op.outputs)


FEATURES = {"input_ids": RNG.randint(5, 50, (8, 10)).astype(np.int32),
            "segment_ids": np.zeros((8, 10), np.int32),
            "input_mask": np.zeros((8, 10), np.float32),
            "label": RNG.randint(0, 2, 8).astype(np.int32)}


def _train(model_dir, init, steps=3, **options):
  task = ClassifierTask(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0,
                                              **options), 2, "t")
  trainer = Trainer(task, TrainOptions(model_dir=str(model_dir),
                                       train_steps=steps, iterations=1,
                                       **LINEAR_ADAM))
  if init is not None:
    trainer.model.set_weights(init)
  data = tf.data.Dataset.from_tensor_slices(FEATURES).batch(4)
  logs = trainer.train(lambda ctx, skip: data.skip(skip).repeat(), 4)
  return trainer, logs


def test_recompute_training_equals_plain_training(tmp_path):
  init = _train(tmp_path / "init", None, steps=1)[0].model.get_weights()
  plain, _ = _train(tmp_path / "b", init)
  recomputed, _ = _train(tmp_path / "c", init, recompute=True)
  for a, b in zip(plain.model.weights, recomputed.model.weights):
    np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5, err_msg=a.name)


def test_float16_training_is_loss_scaled(tmp_path):
  init = _train(tmp_path / "init", None, steps=1)[0].model.get_weights()
  fp32, logs32 = _train(tmp_path / "a", init)
  fp16, logs16 = _train(tmp_path / "b", init, use_float16=True)
  assert isinstance(fp16.optimizer, keras.mixed_precision.LossScaleOptimizer)
  assert not isinstance(fp32.optimizer,
                        keras.mixed_precision.LossScaleOptimizer)
  # The logged norm is of the unscaled gradients (the scale starts at 2^15).
  assert logs16["grad_norm"] == pytest.approx(logs32["grad_norm"], rel=0.05)
  assert logs16["loss"] == pytest.approx(logs32["loss"], rel=0.02)
  assert all(w.dtype == tf.float32 for w in fp16.model.weights)
  # Three steps moved the weights alike (float16 gradients lose digits, so
  # compare the whole move, not single elements).
  w32, w16 = fp32.model.get_weights(), fp16.model.get_weights()
  moved = np.sqrt(sum(np.sum((a - w) ** 2) for a, w in zip(w32, init)))
  apart = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(w32, w16)))
  assert apart < 0.1 * moved, (apart, moved)
  # The loss scale is saved with the optimizer, so a resumed run keeps it.
  names = [n for n, _ in tf.train.list_variables(
      fp16.manager.latest_checkpoint)]
  assert any("loss_scale" in n for n in names), names


def test_float16_overflow_skips_the_step(tmp_path):
  init = _train(tmp_path / "init", None, steps=1)[0].model.get_weights()
  task = ClassifierTask(CONFIG, xt.RunOptions(dropout=0.0, dropatt=0.0,
                                              use_float16=True), 2, "t")
  trainer = Trainer(task, TrainOptions(model_dir=str(tmp_path / "o"),
                                       train_steps=1, learning_rate=1e-2,
                                       iterations=1))
  trainer.model.set_weights(init)
  # A scale that makes float16 gradients overflow: the step must leave the
  # weights alone and halve the scale.
  trainer.optimizer._loss_scale._current_loss_scale.assign(2.0 ** 40)
  before = [w.copy() for w in init]
  data = tf.data.Dataset.from_tensor_slices(FEATURES).batch(4)
  trainer.train(lambda ctx, skip: data.skip(skip).repeat(), 4)
  after = trainer.model.get_weights()
  for a, b in zip(before, after):
    np.testing.assert_array_equal(a, b)
  assert float(trainer.optimizer.loss_scale) == 2.0 ** 39


@pytest.mark.parametrize("native,use_bfloat16,warned", [
    pytest.param(False, True, True, marks=pytest.mark.bfloat16_compute),
    pytest.param(True, True, False, marks=pytest.mark.bfloat16_compute),
    pytest.param(None, True, False, marks=pytest.mark.bfloat16_compute),
    (False, False, False)])
def test_bfloat16_warning_on_cpus_without_it(tmp_path, monkeypatch, native,
                                             use_bfloat16, warned):
  messages = []
  monkeypatch.setattr(training, "cpu_has_native_bfloat16", lambda: native)
  monkeypatch.setattr(training.logging, "warning",
                      lambda msg, *a: messages.append(msg % a if a else msg))
  task = ClassifierTask(CONFIG, xt.RunOptions(use_bfloat16=use_bfloat16), 2,
                        "t")
  Trainer(task, TrainOptions(model_dir=str(tmp_path), train_steps=1))
  hits = [m for m in messages if "AVX512_BF16" in m]
  assert hits == ([
      "use_bfloat16 on a CPU without AVX512_BF16/AMX: bfloat16 matmuls are "
      "emulated here and slower than float32"] if warned else [])


@pytest.mark.parametrize("flags,cap,refused", [
    ({"avx2", "avx512f", "avx512_bf16"}, "AVX2", True),
    ({"avx2", "avx512f", "avx512_bf16"}, "AVX512_CORE", False),
    ({"avx2", "avx512f", "avx512_bf16"}, "", False),
    ({"avx2", "fma"}, "AVX2", False),
])
def test_bfloat16_refused_where_its_matmuls_would_crash(
    monkeypatch, capsys, flags, cap, refused):
  # On an AVX-512 CPU with oneDNN capped below it, TensorFlow's bfloat16
  # matmuls segfault: an entry script says so in one line, exit code 2.
  monkeypatch.setattr(precision, "cpu_flags", lambda *_: frozenset(flags))
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
  code = run_main("run_x", lambda: xt.XLNetModel(
      CONFIG, xt.RunOptions(use_bfloat16=True)) and None)
  assert code == (2 if refused else 0)
  assert capsys.readouterr().err == (
      "run_x: use_bfloat16: TensorFlow's bfloat16 matmuls crash on this CPU "
      "with AVX-512 when ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN below it; unset "
      "ONEDNN_MAX_CPU_ISA or compute in float32\n" if refused else "")
