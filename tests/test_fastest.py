"""The speed defaults chosen per machine: the CPU's flags as read, XLA or
the graph by what the CPU has, the user's flag over both, and the
trainer taking and saying the choice."""

import pytest

import xlnet_tf as xt
from xlnet_tf import cpu
from xlnet_tf.tasks import ClassifierTask
from xlnet_tf.training import TrainOptions, Trainer, fastest, loop

CONFIG = xt.XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
                        n_token=20)
pytestmark = pytest.mark.speed_defaults

AVX2 = frozenset({"fpu", "avx", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}


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
def test_xla_where_it_measured_faster(monkeypatch, flags, cap, accelerator,
                                      expected):
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
  assert fastest.fastest_jit_compile(flags, accelerator)[0] is expected


@pytest.mark.parametrize("flags,asked,expected,said", [
    (AVX2, None, True, "XLA, the faster on a CPU without AVX-512"),
    (AVX512, None, False,
     "TensorFlow's graph, the faster on a CPU with AVX-512"),
    (AVX2, False, False, "asked (--jit_compile=false)"),
    (AVX512, True, True, "asked (--jit_compile=true)"),
])
def test_trainer_takes_and_says_the_choice(tmp_path, monkeypatch, flags,
                                           asked, expected, said):
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "")
  monkeypatch.setattr(fastest, "cpu_flags", lambda _: flags)
  messages = []
  monkeypatch.setattr(loop.logging, "info",
                      lambda msg, *a: messages.append(msg % a))
  trainer = Trainer(ClassifierTask(CONFIG, xt.RunOptions(), 2, "t"),
                    TrainOptions(model_dir=str(tmp_path), train_steps=1,
                                 jit_compile=asked))
  assert trainer.jit_compile is expected
  assert f"forward/backward pass: {said}" in messages
