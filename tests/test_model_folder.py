"""A model folder given once (xlnet_tf/model_folder.py, pretrained.load):
a released folder and a HuggingFace folder of the same tiny weights give
the same model, config and tokenizer; a flag given as well must agree with
the folder (a script's run refuses before any write); a folder lacking a
file is one line; configs by name. The fine-tuning runs from each layout
given once are the classification walkthrough's (test_walkthroughs.py)."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

import xlnet_tf as xt
from conftest import (early_result, refused, run, shared_dir, spiece_path,
                      tree_digest)
from data_utils.errors import UsageError
from model_folders import CONFIG, write_csv_task, write_folders
from xlnet_tf import model_folder, pretrained
from xlnet_tf.config import ConfigError
from xlnet_tf.io.hf_config import config_from_hf

pytestmark = pytest.mark.early("folders")


def folders(work):
  """The same random weights as a released folder and a HuggingFace one."""
  released, hf = work / "xlnet_tiny_cased", work / "hf_tiny"
  write_folders(released, hf, spiece_path(shared_dir()))
  return str(released), str(hf)


@pytest.fixture(scope="module")
def both(shared):  # pylint: disable=unused-argument  (without ../shared)
  return early_result(folders)


def test_named_configs_are_the_released_ones():
  base, large = (model_folder.read_config(n) for n in ("base", "large"))
  assert base.to_dict() == {
      "d_head": 64, "d_inner": 3072, "d_model": 768, "ff_activation": "gelu",
      "n_head": 12, "n_layer": 12, "n_token": 32000, "untie_r": True}
  assert large.to_dict() == {
      "d_head": 64, "d_inner": 4096, "d_model": 1024, "ff_activation": "gelu",
      "n_head": 16, "n_layer": 24, "n_token": 32000, "untie_r": True}


def test_either_config_file_reads_as_the_same_config(both, tmp_path):
  released, hf = both
  assert model_folder.read_config(f"{released}/xlnet_config.json") == CONFIG
  with open(f"{hf}/config.json") as f:
    assert config_from_hf(json.load(f)).config == CONFIG
  assert model_folder.read_config(f"{hf}/config.json") == CONFIG
  bad = tmp_path / "bad.json"
  bad.write_text("{\"d_model\": 16")
  with pytest.raises(ConfigError) as e:
    model_folder.read_config(str(bad))
  assert str(e.value).startswith(f"{bad}: not valid JSON (")
  with pytest.raises(ConfigError) as e:
    model_folder.read_config("bass")
  assert str(e.value) == ("bass: no such config file, and not one of the "
                          "named configs (base, large)")


@pytest.mark.parametrize("layout", ["released", "hf"])
def test_a_folder_gives_its_config_and_spiece(both, layout):
  folder = both[layout == "hf"]
  config = "config.json" if layout == "hf" else "xlnet_config.json"
  files = model_folder.resolve(folder, None, None)
  assert files == model_folder.ModelFiles(
      CONFIG, f"{folder}/{config}", f"{folder}/spiece.model")
  # The same files given as flags as well: they agree.
  again = model_folder.resolve(folder, f"{folder}/{config}",
                               spiece_path(shared_dir()))
  assert again.config == CONFIG
  assert again.spiece_model_file == spiece_path(shared_dir())


def _usage_error(*args, **kw):
  with pytest.raises(UsageError) as e:
    model_folder.resolve(*args, **kw)
  return str(e.value)


def test_a_flag_that_disagrees_with_the_folder_is_one_line(both, tmp_path):
  released, hf = both
  assert _usage_error(hf, "base", None) == (
      f"--model_config_path=base disagrees with {hf}/config.json: d_head 64 "
      "vs 8, d_inner 3072 vs 32, d_model 768 vs 16, n_head 12 vs 2, n_layer "
      "12 vs 1")
  other = tmp_path / "other.model"
  other.write_bytes(open(spiece_path(shared_dir()), "rb").read()[:-1] + b"x")
  assert _usage_error(released, None, str(other)) == (
      f"--spiece_model_file={other} is not the SentencePiece model of "
      f"--init_checkpoint={released} ({released}/spiece.model); leave the "
      "flag out to use the folder's")


def test_a_folder_without_a_file_is_one_line(both, tmp_path):
  released, _ = both
  bare = tmp_path / "bare"
  shutil.copytree(released, bare, ignore=shutil.ignore_patterns("*.json"))
  assert _usage_error(str(bare), None, None) == (
      f"--init_checkpoint={bare}: the folder holds no xlnet_config.json or "
      "config.json; pass --model_config_path (a file, or base or large)")
  os.remove(bare / "spiece.model")
  assert _usage_error(str(bare), "base", None) == (
      f"--init_checkpoint={bare}: the folder holds no spiece.model; pass "
      "--spiece_model_file")
  assert _usage_error(None, None, None) == (
      "--model_config_path is required (the model config), or an "
      "--init_checkpoint folder holding xlnet_config.json or config.json")


def test_load_gives_the_same_model_from_either_folder(both):
  """`pretrained.load`: one call, folder to model, tokenizer and config;
  both layouts hold the same weights, so the same hidden states."""
  ids = np.array([[17, 45, 3012, 9, 4, 3]], np.int32)
  outputs = []
  for folder in both:
    loaded = pretrained.load(folder, "base")
    assert loaded.config == CONFIG
    assert loaded.tokenizer.vocab_size == 32000
    assert isinstance(loaded.model, xt.XLNetModel)
    outputs.append(loaded.model(ids)["sequence_output"].numpy())
  np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-6)
  # Without a model kind: an HF folder's own architecture (the LM here).
  assert isinstance(pretrained.load(both[1]).model, xt.XLNetPretrainer)
  classifier = pretrained.load(both[0], "classification", n_class=3)
  assert classifier.model.n_class == 3
  assert classifier.report.missing  # a fresh head: its weights are missing


# A script given a flag the folder contradicts -----------------------------

def _classifier(folder, work, extra=()):
  return [sys.executable, "run_classifier.py", f"--init_checkpoint={folder}",
          "--task_name=generic", "--label_list=neg,pos", "--delimiter=comma",
          "--has_header", f"--data_dir={work}/task",
          f"--output_dir={work}/data", f"--model_dir={work}/model", *extra]


def refusals(work):
  """Runs that give a flag the folder contradicts: their results, and the
  folder's digest before and after. (A fine-tuning run from each layout,
  given once, is the classification walkthrough's: test_walkthroughs.)"""
  _, hf = early_result(folders)
  write_csv_task(work / "task")
  out = {"before": tree_digest(work)}
  out["runs"] = [run(_classifier(hf, work, ["--do_train", *flags]))
                 for flags in (["--model_config_path=large"],
                               [f"--spiece_model_file={hf}/config.json"])]
  out["after"] = tree_digest(work)
  return out


@pytest.mark.early("refusals")
@pytest.mark.usefixtures("both")
def test_conflicting_flags_stop_before_any_write():
  runs = early_result(refusals)
  hf = early_result(folders)[1]
  assert [refused(r) for r in runs["runs"]] == [
      f"run_classifier: --model_config_path=large disagrees with "
      f"{hf}/config.json: d_head 64 vs 8, d_inner 4096 vs 32, d_model 1024 "
      "vs 16, n_head 16 vs 2, n_layer 24 vs 1",
      f"run_classifier: --spiece_model_file={hf}/config.json is not the "
      f"SentencePiece model of --init_checkpoint={hf} ({hf}/spiece.model); "
      "leave the flag out to use the folder's"]
  assert runs["after"] == runs["before"]
