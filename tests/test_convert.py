"""`python -m xlnet_tf.convert`: usage and source errors are one line on
stderr with exit code 2 (absl flags parsed in process); run options reach
an HF target (run_options.json, flags) and transformers then agrees."""

import json

import numpy as np
import pytest
import torch
import transformers

from conftest import assert_close
from xlnet_tf import convert
from xlnet_tf.io import load_checkpoint, save_native_checkpoint
from xlnet_tf.pretrained import build_model


def _run(capsys, *argv):
  code = convert.main(list(argv))
  out, err = capsys.readouterr()
  return code, out, err


@pytest.mark.parametrize("argv,match", [
    (["--from=/nonexistent/x", "--to=/tmp/y", "--to_format=hf"],
     "no checkpoint there"),
    (["--from=/tmp", "--to=/tmp/y", "--to_format=json"],
     "flag --to_format=json: value should be one of <original|native|hf>"),
    (["--to=/tmp/y", "--to_format=hf"], "--from is required"),
    (["--from=/tmp", "--to=/tmp/y", "--to_format=hf", "--bogus"],
     "Unknown command line flag 'bogus'"),
])
def test_cli_errors_are_one_line_exit_2(argv, match, capsys):
  code = convert.main(argv)
  err = capsys.readouterr().err
  assert code == 2
  assert match in err and err.count("\n") == 1 and err.startswith("convert:")


def test_cli_native_source_needs_model(golden, tmp_path, capsys):
  case = golden("case_race")
  native = str(tmp_path / "n" / "model.ckpt")
  code, _, err = _run(capsys, f"--from={case.ckpt}", f"--to={native}",
                      "--to_format=native")
  assert code == 0, err
  code, _, err = _run(capsys, f"--from={native}", f"--to={tmp_path}/h",
                      "--to_format=hf")
  assert code == 2 and "pass --model" in err and err.count("\n") == 1


def _hf_logits(directory, ids, perm, mapping):
  """transformers' LM logits for two-stream inputs (batch-major)."""
  model = transformers.XLNetLMHeadModel.from_pretrained(directory).eval()
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                perm_mask=torch.tensor(perm),
                target_mapping=torch.tensor(mapping))
  return out.logits.numpy()


def test_run_options_reach_hf_and_transformers_agree(golden, tmp_path,
                                                     capsys):
  """A two-stream model with bi_data and clamp_len (the golden pretraining
  case): converted with its run_options.json, transformers computes what
  this project computes; without them it does not. The file is found beside
  a checkpoint as run_pretrain.py leaves it, and flags override it."""
  case = golden("case_pretrain")
  options = case.options(dropout=0.0, dropatt=0.0)
  assert options.bi_data and options.clamp_len == 5
  model_dir = tmp_path / "model_dir"
  model_dir.mkdir()
  (model_dir / "run_options.json").write_text(json.dumps(options.to_dict()))
  ours = build_model("lm", case.config, options)
  load_checkpoint(ours, case.ckpt)
  save_native_checkpoint(ours, str(model_dir / "ckpt-1"))
  case.config.to_json(str(model_dir / "xlnet_config.json"))

  rng = np.random.RandomState(7)
  batch, length = 4, 10  # bi_data: forward and backward halves
  ids = rng.randint(10, case.config.n_token, size=(batch, length))
  perm = (rng.rand(batch, length, length) > 0.5).astype(np.float32)
  mapping = np.zeros((batch, 3, length), np.float32)
  for b in range(batch):
    mapping[b, np.arange(3), rng.choice(length, 3, replace=False)] = 1.0
  want = ours.lm_head(ours.encoder(
      ids, perm_mask=perm, target_mapping=mapping,
      input_q=mapping.sum(1))["sequence_output"],
      embedding_table=ours.encoder.embedding_table).numpy()

  code, out, err = _run(capsys, f"--from={model_dir}", "--model=lm",
                        f"--to={tmp_path / 'hf'}", "--to_format=hf")
  assert code == 0, err
  assert f"run options ({model_dir / 'run_options.json'})" in out
  saved = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert (saved["bi_data"], saved["clamp_len"], saved["mem_len"]) == (
      True, 5, 6)
  assert_close(_hf_logits(str(tmp_path / "hf"), ids, perm, mapping), want)

  # The original layout alone (no run options): the defaults, and
  # transformers then computes something else.
  code, _, err = _run(capsys, f"--from={case.ckpt}", "--model=lm",
                      f"--to={tmp_path / 'bare'}", "--to_format=hf")
  assert code == 0, err
  bare = _hf_logits(str(tmp_path / "bare"), ids, perm, mapping)
  assert np.abs(bare - want).max() > 1e-3

  # Flags override the file.
  code, out, err = _run(capsys, f"--from={model_dir}", "--model=lm",
                        f"--to={tmp_path / 'hf2'}", "--to_format=hf",
                        "--clamp_len=2", "--nobi_data")
  assert code == 0, err
  saved = json.loads((tmp_path / "hf2" / "config.json").read_text())
  assert (saved["bi_data"], saved["clamp_len"]) == (False, 2)
  assert "and flags" in out


def test_bad_run_options_file_is_one_line(golden, tmp_path, capsys):
  bad = tmp_path / "run_options.json"
  bad.write_text('{"clamp_len": "far"}')
  code, _, err = _run(capsys, f"--from={golden('case_pretrain').ckpt}",
                      "--model=lm", f"--run_options={bad}",
                      f"--to={tmp_path / 'hf'}", "--to_format=hf")
  assert code == 2
  assert err == (f"convert: error: {bad}: RunOptions: 'clamp_len' must be "
                 "an integer, got 'far'\n")
  assert not (tmp_path / "hf").exists()
