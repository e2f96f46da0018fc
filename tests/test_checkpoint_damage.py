"""Damaged checkpoints (issue 16): a truncated, missing or bit-flipped data
file, a truncated, missing, garbage or bit-flipped index, a truncated
safetensors file. Each is one line naming the checkpoint, the file and what
is wrong (and the tensor where one is read), from the loaders, the convert
CLI and a fine-tuning script; the damaged files stay as they were. The
convert CLI also never replaces a target's files without --overwrite."""

import os
import shutil

import pytest
import tensorflow as tf

import xlnet_tf as xt
from xlnet_tf import convert, pretrained
from xlnet_tf.io import check_checkpoint, check_init_checkpoint
from xlnet_tf.io.hf_files import HF_INDEX, HF_WEIGHTS
from xlnet_tf.training import TrainOptions
from conftest import refused_line, rte_flags, tree_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = xt.XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                        n_token=50)
DATA = "model.ckpt.data-00000-of-00001"
KERNEL = "model/transformer/layer_1/ff/layer_1/kernel"
NATIVE_KERNEL = "model/blocks/1/ff/layer_1/kernel/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
  """Intact checkpoints of one tiny XLNetModel: original layout, native and
  HF, each in its own directory with its config beside."""
  root = tmp_path_factory.mktemp("sources")
  model = xt.XLNetModel(CONFIG)
  xt.save_original_checkpoint(model, str(root / "original" / "model.ckpt"))
  xt.save_native_checkpoint(model, str(root / "native" / "model.ckpt"))
  for kind in ("original", "native"):
    CONFIG.to_json(str(root / kind / convert.CONFIG_NAME))
  pretrained.save_hf_weights(model, str(root / "hf"))
  return root


def _copy(sources, kind, tmp_path):
  """A fresh copy of one source directory (the test damages it)."""
  target = tmp_path / kind
  shutil.copytree(sources / kind, target)
  return target


def _offset_of(prefix, name):
  """Where tensor `name`'s bytes start in the (single) data file."""
  value = tf.train.load_checkpoint(prefix).get_tensor(name).tobytes()
  data = open(prefix + ".data-00000-of-00001", "rb").read()
  assert data.count(value) == 1
  return data.index(value), len(value)


def _flip(path, offset):
  raw = bytearray(open(path, "rb").read())
  raw[offset] ^= 0x10
  open(path, "wb").write(bytes(raw))


def _truncate(path, keep):
  os.truncate(path, keep if keep >= 0 else os.path.getsize(path) + keep)


def _load_error(directory, load=xt.load_original_checkpoint):
  """The message of loading the checkpoint in `directory`; asserts that the
  load left every file as it was."""
  before = tree_digest(directory)
  with pytest.raises(xt.CheckpointError) as err:
    load(xt.XLNetModel(CONFIG), str(directory / "model.ckpt"))
  assert tree_digest(directory) == before
  return str(err.value)


# --------------------------------------------------------------------------
# Original layout: load_original_checkpoint (and load_checkpoint detecting it).


def test_truncated_data_names_file_and_tensor(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  _truncate(d / DATA, -10)  # the last tensor in the file loses its end
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is truncated (read less "
      "bytes than requested for model/transformer/word_embedding/lookup_table)")


def test_truncated_data_through_load_checkpoint(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  offset, _ = _offset_of(str(d / "model.ckpt"), KERNEL)
  _truncate(d / DATA, offset + 100)
  assert _load_error(d, xt.load_checkpoint) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is truncated (read less "
      f"bytes than requested for {KERNEL})")


def test_empty_data_file(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  _truncate(d / DATA, 0)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is empty (needed for "
      "model/transformer/layer_0/ff/LayerNorm/beta)")


def test_missing_data_file(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  os.remove(d / DATA)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is missing (no data file "
      "beside the index)")


def test_bit_flip_inside_a_tensor_fails_its_checksum(sources, tmp_path):
  # TensorFlow checks each tensor's CRC32C (stored in the index) on read.
  d = _copy(sources, "original", tmp_path)
  offset, size = _offset_of(str(d / "model.ckpt"), KERNEL)
  _flip(d / DATA, offset + size // 2)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is corrupt (checksum "
      f"mismatch for {KERNEL})")


def test_truncated_index(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  size = os.path.getsize(d / "model.ckpt.index") // 2
  _truncate(d / "model.ckpt.index", size)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: model.ckpt.index is truncated or "
      f"not a checkpoint index ({size} bytes, no SSTable magic number at its "
      "end)")


def test_missing_index(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  os.remove(d / "model.ckpt.index")
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: model.ckpt.index is missing "
      f"({DATA} is there)")


def test_garbage_index(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  (d / "model.ckpt.index").write_bytes(b"not an index\n" * 10)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: model.ckpt.index is truncated or "
      "not a checkpoint index (130 bytes, no SSTable magic number at its end)")


def test_bit_flip_in_index_block(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  _flip(d / "model.ckpt.index", 10)
  assert _load_error(d) == (
      f"{d}/model.ckpt: damaged checkpoint: model.ckpt.index is corrupt "
      "(block checksum mismatch)")


# --------------------------------------------------------------------------
# Native layout: load_checkpoint / load_native_checkpoint.


def test_native_bit_flip_names_the_tensor(sources, tmp_path):
  # TF's restore error names neither file nor tensor; the loader finds them.
  d = _copy(sources, "native", tmp_path)
  offset, size = _offset_of(str(d / "model.ckpt"), NATIVE_KERNEL)
  _flip(d / DATA, offset + size // 2)
  assert _load_error(d, xt.load_checkpoint) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is corrupt (checksum "
      f"mismatch for {NATIVE_KERNEL})")


def test_native_truncated_data(sources, tmp_path):
  d = _copy(sources, "native", tmp_path)
  _truncate(d / DATA, -10)  # the object graph is written last
  assert _load_error(d, xt.load_native_checkpoint) == (
      f"{d}/model.ckpt: damaged checkpoint: {DATA} is truncated (read less "
      "bytes than requested for _CHECKPOINTABLE_OBJECT_GRAPH)")


# --------------------------------------------------------------------------
# The cheap check before a run (fine-tuning preflight, run_pretrain).


def test_check_init_checkpoint_names_the_flag(sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  os.remove(d / DATA)
  opts = TrainOptions(model_dir=str(tmp_path / "run"), train_steps=1,
                      init_checkpoint=str(d / "model.ckpt"))
  with pytest.raises(xt.CheckpointError) as err:
    check_init_checkpoint(opts)
  assert str(err.value) == (
      f"--init_checkpoint={d}/model.ckpt: damaged checkpoint: {DATA} is "
      "missing (no data file beside the index)")
  # Not read (so not checked) without training, or when model_dir holds a
  # checkpoint: the trainer resumes from that one.
  check_init_checkpoint(opts, will_train=False)
  shutil.copytree(sources / "native", tmp_path / "run")
  with open(tmp_path / "run" / "checkpoint", "w") as f:
    f.write('model_checkpoint_path: "model.ckpt"\n')
  check_init_checkpoint(opts)


def test_check_checkpoint_of_truncated_hf_directory(sources, tmp_path):
  d = _copy(sources, "hf", tmp_path)
  size = os.path.getsize(d / HF_WEIGHTS)
  _truncate(d / HF_WEIGHTS, size - 100)
  with pytest.raises(xt.CheckpointError) as err:
    check_checkpoint(str(d), "init_checkpoint")
  assert str(err.value) == (
      f"--init_checkpoint={d}: damaged checkpoint: {HF_WEIGHTS} is "
      f"truncated ({size - 100} of {size} bytes)")


# --------------------------------------------------------------------------
# python -m xlnet_tf.convert (in process: exit code 2, one line on stderr).


def _convert(capsys, directory, *args):
  before = tree_digest(directory)
  code = convert.main(list(args))
  err = capsys.readouterr().err
  assert tree_digest(directory) == before
  return code, err


def test_convert_truncated_original(sources, tmp_path, capsys):
  d = _copy(sources, "original", tmp_path)
  offset, _ = _offset_of(str(d / "model.ckpt"), KERNEL)
  _truncate(d / DATA, offset + 100)
  code, err = _convert(capsys, d, f"--from={d}/model.ckpt",
                       f"--to={tmp_path}/out", "--to_format=hf")
  assert code == 2 and err == (
      f"convert: error: {d}/model.ckpt: damaged checkpoint: {DATA} is "
      f"truncated (read less bytes than requested for {KERNEL})\n")
  assert not os.path.exists(tmp_path / "out")


def test_convert_garbage_index_while_detecting_format(sources, tmp_path,
                                                      capsys):
  d = _copy(sources, "native", tmp_path)
  (d / "model.ckpt.index").write_bytes(b"\0" * 7)
  code, err = _convert(capsys, d, f"--from={d}", f"--to={tmp_path}/out",
                       "--to_format=original", "--model=base")
  assert code == 2 and err == (
      f"convert: error: {d}/model.ckpt: damaged checkpoint: model.ckpt.index "
      "is truncated or not a checkpoint index (7 bytes, too short to be an "
      "SSTable)\n")


def test_convert_bit_flipped_native(sources, tmp_path, capsys):
  d = _copy(sources, "native", tmp_path)
  offset, size = _offset_of(str(d / "model.ckpt"), NATIVE_KERNEL)
  _flip(d / DATA, offset + size // 2)
  code, err = _convert(capsys, d, f"--from={d}/model.ckpt",
                       f"--to={tmp_path}/out", "--to_format=original",
                       "--model=base")
  assert code == 2 and err == (
      f"convert: error: {d}/model.ckpt: damaged checkpoint: {DATA} is corrupt "
      f"(checksum mismatch for {NATIVE_KERNEL})\n")
  assert not os.path.exists(tmp_path / "out")


def test_convert_truncated_safetensors(sources, tmp_path, capsys):
  d = _copy(sources, "hf", tmp_path)
  size = os.path.getsize(d / HF_WEIGHTS)
  _truncate(d / HF_WEIGHTS, size // 2)
  code, err = _convert(capsys, d, f"--from={d}", f"--to={tmp_path}/out",
                       "--to_format=original")
  assert code == 2 and err == (
      f"convert: error: {d}: damaged checkpoint: {HF_WEIGHTS} is truncated "
      f"({size // 2} of {size} bytes)\n")
  assert not os.path.exists(tmp_path / "out")


def test_convert_garbage_safetensors(sources, tmp_path, capsys):
  d = _copy(sources, "hf", tmp_path)
  (d / HF_WEIGHTS).write_bytes(b"\xff" * 64)
  code, err = _convert(capsys, d, f"--from={d}", f"--to={tmp_path}/out",
                       "--to_format=original")
  assert code == 2 and err == (
      f"convert: error: {d}: damaged checkpoint: {HF_WEIGHTS} is not a "
      "safetensors file (its first 8 bytes give a header of "
      "18446744073709551615 bytes)\n")


def test_missing_shard_of_sharded_hf_directory(sources, tmp_path):
  d = _copy(sources, "hf", tmp_path)
  os.rename(d / HF_WEIGHTS, d / "model-00001-of-00002.safetensors")
  (d / HF_INDEX).write_text(
      '{"weight_map": {"a": "model-00001-of-00002.safetensors", '
      '"b": "model-00002-of-00002.safetensors"}}')
  with pytest.raises(xt.CheckpointError) as err:
    xt.load_checkpoint(xt.XLNetModel(CONFIG), str(d))
  assert str(err.value) == (
      f"{d}: damaged checkpoint: model-00002-of-00002.safetensors is missing "
      f"(listed in {HF_INDEX})")


# --------------------------------------------------------------------------
# A fine-tuning script: the preflight refuses the damaged --init_checkpoint
# before building features or training.


@pytest.mark.parametrize("to_format,existing", [
    ("original", "model.ckpt.index"), ("original", "checkpoint"),
    ("original", "xlnet_config.json"), ("hf", "model.safetensors")])
def test_convert_never_replaces_a_target_without_overwrite(
    sources, tmp_path, capsys, to_format, existing):
  target = tmp_path / "target"
  target.mkdir()
  (target / existing).write_bytes(b"someone's file")
  code, err = _convert(capsys, target, f"--from={sources}/original/model.ckpt",
                       f"--to={target}", f"--to_format={to_format}")
  assert (code, err) == (2, f"convert: error: --to={target}: {target}/"
                            f"{existing} exists; choose another --to, or pass "
                            "--overwrite to replace it\n")
  assert convert.main([f"--from={sources}/original/model.ckpt",
                       f"--to={target}", f"--to_format={to_format}",
                       "--overwrite"]) == 0
  assert (target / existing).read_bytes() != b"someone's file"  # replaced


def test_run_classifier_damaged_init_checkpoint(shared, sources, tmp_path):
  d = _copy(sources, "original", tmp_path)
  _truncate(d / "model.ckpt.index", 100)
  before = tree_digest(d)
  config = tmp_path / "xlnet_config.json"
  CONFIG.to_json(str(config))
  flags = rte_flags(shared, tmp_path, config)
  assert refused_line("run_classifier.py", flags + [
      f"--init_checkpoint={d}/model.ckpt", "--do_train", "--do_eval",
      "--max_seq_length=32", "--train_batch_size=8", "--train_steps=2"]) == (
      f"run_classifier: --init_checkpoint={d}/model.ckpt: damaged checkpoint: "
      "model.ckpt.index is truncated or not a checkpoint index (100 bytes, no "
      "SSTable magic number at its end)")
  assert tree_digest(d) == before
  assert not os.path.exists(tmp_path / "data")  # no features were built
  assert not tf.train.latest_checkpoint(str(tmp_path / "model"))
