"""The training default, XLA or the graph: the CPU's flags as read, the
rule that weighs the compile against the time XLA saves over the run, the
user's flag over both, and the trainer taking and saying the choice."""

import pytest

import xlnet_tf as xt
from conftest import ROOT
from xlnet_tf import cpu
from xlnet_tf.flops import training_flops
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer, fastest, loop

TINY = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
                      n_token=20)
BASE = xt.XLNetConfig(n_layer=12, d_model=768, n_head=12, d_head=64,
                      d_inner=3072, n_token=32000)
LARGE = xt.XLNetConfig(n_layer=24, d_model=1024, n_head=16, d_head=64,
                       d_inner=4096, n_token=32000)
AVX2 = frozenset({"fpu", "avx", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}


def run_size(config, batch, seq, steps, kind="fine-tuning", mem=0):
  return fastest.RunSize(training_flops(config, batch * seq, seq + mem),
                         config.n_layer, steps, kind)


BASE_FINETUNE = run_size(BASE, 8, 128, 1000)
BASE_PRETRAIN = run_size(BASE, 4, 128, 100000, "pretraining", mem=64)


def test_cpu_flags_are_read_from_the_first_flags_line(tmp_path):
  info = tmp_path / "cpuinfo"
  info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 fma\n"
                  "processor\t: 1\nflags\t\t: fpu avx2 fma avx512f\n")
  assert cpu.cpu_flags(str(info)) == {"fpu", "avx2", "fma"}


@pytest.mark.parametrize("flags,cap,accelerator,expected", [
    (AVX2, "", False, True),
    (AVX512, "", False, False),
    # oneDNN capped below AVX-512 still trains faster in the graph there.
    (AVX512, "AVX2", False, False),
    (AVX2, "", True, False),
    (None, "", False, False),
])
def test_xla_only_where_it_measured_faster(monkeypatch, flags, cap,
                                           accelerator, expected):
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
  assert fastest.fastest_jit_compile(flags, accelerator, BASE_PRETRAIN,
                                     2)[0] is expected


@pytest.mark.parametrize("size,cores,expected", [
    # The two runs: 1,000 Base fine-tuning steps do not repay the
    # compile; 100,000 pretraining steps do.
    (BASE_FINETUNE, 2, False),
    (BASE_PRETRAIN, 2, True),
    # A long fine-tuning run does; more cores make a step, and so what XLA
    # saves, shorter.
    (run_size(BASE, 32, 128, 4000), 2, True),
    (run_size(BASE, 32, 128, 4000), 32, False),
    (run_size(LARGE, 32, 512, 1000), 2, True),
    # A tiny model's steps are too short to repay even its short compile.
    (run_size(TINY, 64, 128, 10 ** 5), 2, False),
    # Unknown FLOPs: the graph.
    (fastest.RunSize(0.0, 12, 10 ** 9), 2, False),
])
def test_xla_where_the_run_repays_its_compile(size, cores, expected):
  assert fastest.xla_pays(size, cores)[0] is expected


def test_the_rule_turns_where_the_saving_meets_the_compile():
  per_step = (BASE_FINETUNE.step_flops / (fastest.GRAPH_FLOPS_PER_CORE * 2)
              * fastest.XLA_SAVES["fine-tuning"])
  compile_s = fastest.COMPILE_SECONDS_PER_LAYER["fine-tuning"] * BASE.n_layer
  turn = int(compile_s / per_step)
  for steps, expected in ((turn, False), (turn + 1, True)):
    size = fastest.RunSize(BASE_FINETUNE.step_flops, 12, steps)
    assert fastest.xla_pays(size, 2)[0] is expected
  # The reason says the figures weighed.
  assert fastest.xla_pays(BASE_FINETUNE, 2)[1] == (
      "TensorFlow's graph: XLA would not pay, over 1,000 steps it saves "
      f"~{1000 * per_step:,.0f} s (1% of ~"
      f"{per_step / fastest.XLA_SAVES['fine-tuning']:.2g} s a step), its "
      f"compile takes ~{compile_s:,.0f} s")


@pytest.mark.parametrize("flags,asked,saves,expected,said", [
    (AVX2, None, 0.01, False, "TensorFlow's graph: XLA would not pay"),
    (AVX2, None, 1e9, True, "XLA: over 5 steps"),
    (AVX512, None, 1e9, False,
     "TensorFlow's graph, the faster on a CPU with AVX-512"),
    (AVX2, False, 1e9, False, "asked (--jit_compile=false)"),
    (AVX512, True, 0.01, True, "asked (--jit_compile=true)"),
])
def test_trainer_takes_and_says_the_choice(tmp_path, monkeypatch, flags,
                                           asked, saves, expected, said):
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "")
  monkeypatch.setattr(fastest, "cpu_flags", lambda _: flags)
  monkeypatch.setitem(fastest.XLA_SAVES, "fine-tuning", saves)
  messages = []
  monkeypatch.setattr(loop.logging, "info",
                      lambda msg, *a: messages.append(msg % a))
  trainer = Trainer(ClassifierTask(TINY, xt.RunOptions(), 2, "t", seq_len=8),
                    TrainOptions(model_dir=str(tmp_path), train_steps=5,
                                 jit_compile=asked))
  trainer._choose_compute(per_replica_batch=4)  # what train() does first
  assert trainer.jit_compile is expected
  assert any(m.startswith(f"forward/backward pass: {said}") for m in messages)


def test_the_speed_page_quotes_the_rule_as_the_trainer_logs_it():
  with open(f"{ROOT}/docs/speed.md", encoding="utf-8") as f:
    page = f.read()
  line = f"forward/backward pass: {fastest.xla_pays(BASE_FINETUNE, 2)[1]}"
  assert f"```\n{line}\n```" in page
  per_layer = fastest.COMPILE_SECONDS_PER_LAYER
  assert (f"{per_layer['fine-tuning']:.0f} s per layer for fine-tuning, "
          f"{per_layer['pretraining']:.0f} s for pretraining") in page
  assert (f"1% of a fine-tuning step, 5% of a pretraining"
          in page.replace("\n", " "))
  assert fastest.XLA_SAVES == {"fine-tuning": 0.01, "pretraining": 0.05}
