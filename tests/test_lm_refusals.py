"""Issue 28 on the LM scripts (run_generate, run_score, run_infill,
run_embed): what a user can get wrong is refused before any model is
loaded, in one line (exit code 2) naming the flag or file and what is
wrong, and the user's files stay byte for byte as they were. The checks run
in process (each script's body through `run_main`, stopping before a
weight is read), plus one subprocess a script kind for the real command
line."""

import contextlib
import io
import json
import os
import shutil
import sys
import types

import pytest

from conftest import (ROOT, early_result, refused, run, shared_dir,
                      spiece_path, tree_digest)
from data_utils.errors import UsageError, UserError, run_main
from lm_checkpoints import CONFIG, Checkpoints
from xlnet_tf.tasks.language_model.workflow import (check_lm_model, check_mem_len,
                                   check_new_tokens)

if ROOT not in sys.path:  # the entry scripts live in the project root
  sys.path.insert(0, ROOT)
import run_generate  # noqa: E402  pylint: disable=wrong-import-position
import run_infill  # noqa: E402  pylint: disable=wrong-import-position


# The checkpoints, then the command lines (the two tests at the end), are
# early runs (see conftest).
pytestmark = pytest.mark.early("lm_checkpoints")
WRITE = """
import dataclasses, json, sys
sys.path.insert(0, {tests!r})
from lm_checkpoints import write_checkpoints
print(json.dumps(dataclasses.asdict(write_checkpoints(sys.argv[1]))))
"""


def lm_checkpoints(work):
  """`lm_checkpoints.write_checkpoints(work)`, by a process of its own."""
  res = run([sys.executable, "-c",
             WRITE.format(tests=os.path.dirname(os.path.abspath(__file__))),
             str(work)], 300)
  assert res.returncode == 0, res.stderr[-3000:]
  return Checkpoints(**json.loads(res.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def ckpts():
  return early_result(lm_checkpoints)


class Flags(types.SimpleNamespace):
  """Flag values with absl's `f[name].present` (run_generate asks which
  flags were given)."""

  def __getitem__(self, name):
    return types.SimpleNamespace(present=name in self.given)


def _common(shared, init_checkpoint, **given):
  return dict(init_checkpoint=init_checkpoint, model_config_path=None,
              spiece_model_file=spiece_path(shared), uncased=False,
              clamp_len=None, input_file=None, text_column=None,
              batch_size=8, overwrite=False, output_file=None, **given)


def _generate_flags(shared, ckpts, **given):
  values = _common(shared, ckpts.original)
  values.update(prompt=["Hi"], strategy="greedy", max_new_tokens=4,
                temperature=1.0, top_k=0, top_p=1.0, seed=None, num_beams=4,
                length_penalty=1.0, stop_ids=["7"], stop=None,
                export_dir=None, export_prompt_length=128)
  values.update(given)
  return Flags(given=set(given), **values)


def _infill_flags(shared, ckpts, **given):
  values = _common(shared, ckpts.original)
  values.update(text=None, spans=None, order="left_to_right",
                strategy="greedy", temperature=1.0, top_k=0, top_p=1.0,
                seed=0, max_seq_length=512)
  values.update(given)
  return types.SimpleNamespace(**values)


def _refused(program, body):
  """`body` run as the script runs it: (exit code, its one stderr line)."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    code = run_main(program, body)
  lines = err.getvalue().splitlines()
  assert len(lines) == 1, err.getvalue()
  return code, lines[0]


def _wide_line(ckpts, layout):
  prefix = {"original": ckpts.original, "native": ckpts.native,
            "hf": ckpts.hf}[layout]
  why = {"original": "model/transformer/word_embedding/lookup_table: "
                     "checkpoint [32000, 16] vs model [32000, 32]",
         "native": "model/encoder/word_embedding.Slookup_table: checkpoint "
                   "[32000, 16] vs model [32000, 32]",
         "hf": "its config.json"}[layout]
  return (f"--model_config_path={ckpts.wide_config}: d_model 32, d_head 16 "
          f"but the checkpoint {prefix} has d_model 16, d_head 8 ({why})")


def _disagree_line(ckpts, layout):
  """The line for WIDE's config given with a folder that holds CONFIG's."""
  folder = ckpts.hf if layout == "hf" else os.path.dirname(
      getattr(ckpts, layout))
  config = "config.json" if layout == "hf" else "xlnet_config.json"
  return (f"--model_config_path={ckpts.wide_config} disagrees with "
          f"{os.path.join(folder, config)}: d_head 16 vs 8, d_model 32 vs 16")


@pytest.mark.parametrize("layout", ["original", "native", "hf"])
def test_config_of_another_width_names_both_shapes(shared, ckpts, layout,
                                                   tmp_path):
  """Each layout: the native restore and an HF directory used to give a
  traceback or ignore the flag; now one line names both shapes. In a
  folder with its own config, the flag is held against that config first."""
  checkpoint = os.path.dirname(getattr(ckpts, layout)) \
      if layout != "hf" else ckpts.hf
  bare = tmp_path / "bare"   # the checkpoint without its config
  shutil.copytree(checkpoint, bare,
                  ignore=shutil.ignore_patterns("xlnet_config.json"))
  out = tmp_path / "out.jsonl"
  cases = [(checkpoint, _disagree_line(ckpts, layout))]
  if layout != "hf":
    prefix = os.path.join(bare, os.path.basename(getattr(ckpts, layout)))
    cases.append((str(bare), _wide_line(ckpts, layout).replace(
        getattr(ckpts, layout), prefix)))
  for init_checkpoint, line in cases:
    f = _generate_flags(shared, ckpts, init_checkpoint=init_checkpoint,
                        model_config_path=ckpts.wide_config,
                        output_file=str(out))
    before = tree_digest(ckpts.hf), tree_digest(tmp_path)
    assert _refused("run_generate", lambda: run_generate.generate_main(f)) \
        == (2, "run_generate: " + line)
    assert (tree_digest(ckpts.hf), tree_digest(tmp_path)) == before


def test_config_beside_the_checkpoint_is_checked_too(shared, ckpts,
                                                     tmp_path):
  """A wrong xlnet_config.json beside it (the file named), untie_r read
  from the bias's rank, and a vocabulary larger than the model's."""
  model = tmp_path / "model"
  model.mkdir()
  for name in os.listdir(os.path.dirname(ckpts.original)):
    (model / name).write_bytes(
        open(os.path.join(os.path.dirname(ckpts.original), name),
             "rb").read())
  config = model / "xlnet_config.json"
  config.write_text('{"n_layer": 2, "d_model": 16, "n_head": 2, '
                    '"d_head": 8, "d_inner": 32, "n_token": 32000, '
                    '"ff_activation": "gelu", "untie_r": false}')
  prefix = str(model / "model.ckpt")
  f = types.SimpleNamespace(**_common(shared, str(model)))
  with pytest.raises(UserError) as e:
    check_lm_model(f)
  assert str(e.value) == (
      f"{config}: n_layer 2, untie_r false but the checkpoint {prefix} has "
      "n_layer 1, untie_r true (its layers are 0..0)")
  config.write_text(config.read_text().replace('"n_layer": 2',
                                               '"n_layer": 1'))
  with pytest.raises(UserError) as e:
    check_lm_model(f)
  assert str(e.value) == (
      f"{config}: untie_r false but the checkpoint {prefix} has untie_r "
      "true (model/transformer/r_w_bias: checkpoint [1, 2, 8] vs model "
      "[2, 8])")
  golden = os.path.join(shared, "golden", "case_pretrain")
  f = types.SimpleNamespace(**_common(shared, golden + "/model.ckpt"))
  with pytest.raises(UsageError) as e:
    check_lm_model(f)
  assert str(e.value) == (
      f"--spiece_model_file={spiece_path(shared)}: 32000 pieces, more than "
      f"the model's n_token 120 ({golden}/xlnet_config.json)")
  assert check_lm_model(types.SimpleNamespace(**_common(
      shared, ckpts.hf))).config.d_model == 16


@pytest.mark.parametrize("given,line", [
    ({"strategy": "sample", "temperature": float("nan")},
     "--temperature=nan: must be a finite number above 0"),
    ({"strategy": "sample", "temperature": float("inf")},
     "--temperature=inf: must be a finite number above 0"),
    ({"strategy": "sample", "temperature": -1.0},
     "--temperature=-1.0: must be a finite number above 0"),
    ({"strategy": "sample", "top_p": float("nan")},
     "--top_p=nan: must be in (0, 1]"),
    ({"strategy": "sample", "top_k": -1}, "--top_k=-1: must be 0 (off) or "
                                          "more"),
    ({"strategy": "sample", "seed": 2 ** 31},
     "--seed=2147483648: must be in -2147483648..2147483647 (an int32)"),
    ({"strategy": "beam", "num_beams": 0}, "--num_beams=0: must be at "
                                           "least 1"),
    ({"strategy": "beam", "length_penalty": float("nan")},
     "--length_penalty=nan: must be a finite number"),
    ({"strategy": "beam", "num_beams": 32001},
     "--num_beams=32001: more than the 32000 pieces of "
     "--spiece_model_file={spiece}"),
    ({"stop_ids": ["2", "99999999"]},
     "--stop_ids=2,99999999: 99999999 is not a token id of "
     "--spiece_model_file={spiece} (32000 pieces: ids 0..31999), so it "
     "could never be generated"),
    ({"max_new_tokens": 10 ** 9},
     "--max_new_tokens=1000000000: at most 16777213 here (relative "
     "positions are float32, whole numbers exact up to 2**24 = 16777216, "
     "and a step spans the longest prompt (1 piece), the new tokens and 2 "
     "more)"),
])
def test_generation_settings_are_refused_in_one_line(shared, ckpts,
                                                     tmp_path, given, line):
  out = tmp_path / "out.jsonl"
  out.write_text("someone's file\n")
  before = tree_digest(tmp_path)
  f = _generate_flags(shared, ckpts, output_file=str(out), overwrite=True,
                      **given)
  assert _refused("run_generate", lambda: run_generate.generate_main(f)) == (
      2, "run_generate: " + line.format(spiece=spiece_path(shared)))
  assert tree_digest(tmp_path) == before


def test_max_new_tokens_within_this_machines_memory():
  """The memory bound (a machine of 1 GiB here): the cache of 8 prompts x
  4 beams, keys and values of 1 layer of 16 floats kept twice."""
  with pytest.raises(UsageError) as e:
    check_new_tokens(10 ** 7, CONFIG, 12, 32, 2 ** 30)
  assert str(e.value) == (
      "--max_new_tokens=10000000: at most 125191 here (the decoding cache "
      "takes 8576 bytes a position (keys and values of 1 layer x 32 rows x "
      "16 floats, twice while a step writes the next, and the positions), "
      "and 1.0 GiB of memory holds 125203 positions: the longest prompt "
      "(12 pieces) and the new tokens)")
  # 4 bytes x (1 layer x (2 x 2 x 32 rows + 1) x 16 + 16 + 2 x 32 rows)
  assert 2 ** 30 // 8576 - 12 == 125191
  assert check_new_tokens(125191, CONFIG, 12, 32, 2 ** 30).tokens == 125191


def test_embedding_memory_within_positions_and_memory():
  """run_embed's --mem_len allocated the whole memory up front: 10**9
  states ran out of memory in a traceback."""
  def line(mem_len, window, memory_bytes, rows=8):
    f = types.SimpleNamespace(mem_len=mem_len, max_seq_length=window)
    with pytest.raises(UsageError) as e:
      check_mem_len(f, CONFIG, rows, memory_bytes)
    return str(e.value)
  assert line(10 ** 9, 128, None) == (
      "--mem_len=1000000000: at most 16777088 memory positions here "
      "(relative positions are float32, whole numbers exact up to 2**24 = "
      "16777216, and a window's distances span the memory and its 128 "
      "positions)")
  # 4 bytes x 8 texts x (2 x 1 layer x 16 + 3 x 2 heads x 128) = 25600
  assert line(10 ** 6, 128, 2 ** 30) == (
      "--mem_len=1000000: at most 41943 memory positions here (a memory "
      "position takes 25600 bytes for 8 texts: states of n_layer 1 x "
      "d_model 16 floats twice, and attention scores of n_head 2 x 128 "
      "queries 3 times; 1.0 GiB of memory holds 41943)")
  assert line(None, 2 ** 24, None) == (
      "--max_seq_length=16777216 (the default --mem_len): at most 0 memory "
      "positions here (relative positions are float32, whole numbers exact "
      "up to 2**24 = 16777216, and a window's distances span the memory and "
      "its 16777216 positions)")
  check_mem_len(types.SimpleNamespace(mem_len=41943, max_seq_length=128),
                CONFIG, 8, 2 ** 30)


@pytest.mark.parametrize("name,content,line", [
    ("in.txt", "The <mask> sat.\nNo hole here.\n",
     "{path}:2: nothing to fill (no <mask> marker)"),
    ("in.tsv", "sentence\nThe <mask> sat.\n\nNo hole.\n",
     "{path}:4: nothing to fill (no <mask> marker)"),
    ("in.jsonl", '{"text": "The <mask> sat."}\n{"text": "No hole."}\n',
     "{path}:2: nothing to fill (no <mask> marker, no spans)"),
    ("in.jsonl", '{"text": "No hole.", "spans": []}\n',
     "{path}:1: nothing to fill (its spans are [])"),
])
def test_infill_text_without_a_hole_is_refused(shared, ckpts, tmp_path,
                                               name, content, line):
  """It used to come back unchanged with exit code 0."""
  path = tmp_path / name
  path.write_text(content)
  before = tree_digest(tmp_path)
  f = _infill_flags(shared, ckpts, input_file=str(path),
                    output_file=str(tmp_path / "fills.jsonl"))
  assert _refused("run_infill", lambda: run_infill.infill_main(f)) == (
      2, "run_infill: " + line.format(path=path))
  f = _infill_flags(shared, ckpts, text="No hole here.")
  assert _refused("run_infill", lambda: run_infill.infill_main(f)) == (
      2, "run_infill: --text=No hole here.: nothing to fill (no <mask> "
         "marker, no --spans)")
  f = _infill_flags(shared, ckpts, text="a <mask>", seed=-1)
  assert _refused("run_infill", lambda: run_infill.infill_main(f)) == (
      2, "run_infill: --seed=-1: must be at least 0")
  assert tree_digest(tmp_path) == before


def command_lines(work):
  """What the two tests below run: their folders, the digests before and
  after, and the results."""
  ckpts, shared = early_result(lm_checkpoints), shared_dir()
  tmp_path = work / "scripts"
  tmp_path.mkdir()
  texts = tmp_path / "in.txt"
  texts.write_text("A text.\nNo hole either.\n")
  outputs = tmp_path / "out"
  outputs.mkdir()
  before = tree_digest(tmp_path), tree_digest(ckpts.hf)
  spiece = f"--spiece_model_file={spiece_path(shared)}"
  wide = f"--model_config_path={ckpts.wide_config}"
  native = os.path.dirname(ckpts.native)
  scripts = [run([sys.executable, script, *args], 600) for script, args in (
      ("run_generate.py", [
          f"--init_checkpoint={ckpts.hf}", spiece, "--prompt=Hi",
          "--strategy=sample", "--temperature=nan",
          f"--output_file={outputs}/gen.jsonl"]),
      ("run_score.py", [
          f"--init_checkpoint={native}", spiece, wide,
          f"--input_file={texts}", f"--output_file={outputs}/scores.jsonl"]),
      ("run_infill.py", [
          f"--init_checkpoint={ckpts.hf}", spiece, f"--input_file={texts}",
          f"--output_file={outputs}/fills.jsonl"]),
      ("run_embed.py", [
          f"--init_checkpoint={ckpts.hf}", spiece, wide,
          f"--input_file={texts}", f"--output_file={outputs}/emb.jsonl"]))]
  after = tree_digest(tmp_path), tree_digest(ckpts.hf)
  finetuning = work / "finetuning"
  finetuning.mkdir()
  # The native checkpoint without its config beside: only its shapes tell.
  bare = work / "bare"
  shutil.copytree(native, bare,
                  ignore=shutil.ignore_patterns("xlnet_config.json"))
  classifier = [
      sys.executable, "run_classifier.py", "--do_train",
      "--task_name=sst-2", f"--data_dir={shared}/data/glue/SST-2",
      f"--model_config_path={ckpts.wide_config}",
      f"--spiece_model_file={spiece_path(shared)}",
      f"--output_dir={finetuning}/data", f"--model_dir={finetuning}/model"]
  return {"texts": texts, "before": before, "scripts": scripts,
          "after": after, "finetuning": finetuning, "bare": bare,
          "run_classifier": run(classifier + [
              f"--init_checkpoint={ckpts.native}"], 600),
          "run_classifier_bare": run(classifier + [
              f"--init_checkpoint={bare}/ckpt-1"], 600)}


@pytest.mark.early("command_lines")
@pytest.mark.usefixtures("shared")
def test_each_script_refuses_on_its_command_line(ckpts):
  """One real command line a script kind: exit code 2, the line, no
  traceback, and the inputs and the output folder unchanged."""
  runs = early_result(command_lines)
  assert [refused(res) for res in runs["scripts"]] == [
      "run_generate: --temperature=nan: must be a finite number above 0",
      "run_score: " + _disagree_line(ckpts, "native"),
      f"run_infill: {runs['texts']}:1: nothing to fill (no <mask> marker)",
      "run_embed: " + _disagree_line(ckpts, "hf")]
  assert runs["after"] == runs["before"]


@pytest.mark.early("command_lines")
@pytest.mark.usefixtures("shared")
def test_finetuning_init_checkpoint_of_another_width(ckpts):
  """The fine-tuning scripts check the same fit in their preflight: a
  native checkpoint used to end in a raw `Shapes ... incompatible`."""
  runs = early_result(command_lines)
  assert refused(runs["run_classifier"]) == (
      "run_classifier: " + _disagree_line(ckpts, "native"))
  assert refused(runs["run_classifier_bare"]) == (
      "run_classifier: " + _wide_line(ckpts, "native").replace(
          ckpts.native, f"{runs['bare']}/ckpt-1"))
  assert os.listdir(runs["finetuning"]) == []
