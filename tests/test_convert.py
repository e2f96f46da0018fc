"""`python -m xlnet_tf.convert`: usage and source errors are one line on
stderr with exit code 2 (absl flags parsed in process); run options reach
an HF target (run_options.json, flags) and transformers then agrees; a
pretraining run's data options (bi_data, memory) only when asked, so that
the default export runs at any batch size."""

import json

import numpy as np
import pytest
import torch
import transformers

from conftest import assert_close, tree_digest
from xlnet_tf import convert
from xlnet_tf.io import load_checkpoint, save_native_checkpoint
from xlnet_tf.pretrained import build_model, load_language_model


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
    (["--from=/tmp", "--to=/tmp/y", "--to_format=native",
      "--carry_pretraining_options"],
     "--carry_pretraining_options: only with --to_format=hf (the original "
     "and native layouts keep no run option)"),
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


def _two_stream_inputs(n_token, batch, seed, length=10, targets=3):
  """Random ids, permutation mask and target mapping of `batch` rows."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(10, n_token, size=(batch, length))
  perm = (rng.rand(batch, length, length) > 0.5).astype(np.float32)
  mapping = np.zeros((batch, targets, length), np.float32)
  for b in range(batch):
    mapping[b, np.arange(targets), rng.choice(length, targets,
                                              replace=False)] = 1.0
  return ids, perm, mapping


def _our_logits(lm, ids, perm, mapping):
  return lm.lm_head(lm.encoder(
      ids, perm_mask=perm, target_mapping=mapping,
      input_q=mapping.sum(1))["sequence_output"],
      embedding_table=lm.encoder.embedding_table).numpy()


@pytest.fixture(scope="module")
def pretrain_dir(golden, tmp_path_factory):
  """The golden two-stream model (bi_data, clamp_len 5, mem_len 6) as
  run_pretrain.py leaves a model_dir: a native checkpoint, its
  xlnet_config.json and run_options.json."""
  case = golden("case_pretrain")
  options = case.options(dropout=0.0, dropatt=0.0)
  assert (options.bi_data, options.clamp_len, options.mem_len,
          options.reuse_len) == (True, 5, 6, 6)
  model_dir = tmp_path_factory.mktemp("pretrain") / "model_dir"
  model_dir.mkdir()
  (model_dir / "run_options.json").write_text(json.dumps(options.to_dict()))
  ours = build_model("lm", case.config, options)
  load_checkpoint(ours, case.ckpt)
  save_native_checkpoint(ours, str(model_dir / "ckpt-1"))
  case.config.to_json(str(model_dir / "xlnet_config.json"))
  return model_dir, ours


def test_default_hf_export_runs_in_transformers_at_any_batch_size(
    pretrain_dir, tmp_path, capsys):
  """docs/conversion.md's command on a pretraining model_dir: bi_data, mem_len and
  reuse_len (pretraining's data options) are not carried, the report says
  so, and transformers computes at batch sizes 1 and 3 what this project's
  LM scripts compute (their model: load_language_model)."""
  model_dir, _ = pretrain_dir
  before = tree_digest(model_dir)
  code, out, err = _run(capsys, f"--from={model_dir}", "--model=lm",
                        f"--to={tmp_path / 'hf'}", "--to_format=hf")
  assert code == 0, err
  assert (f"run options ({model_dir / 'run_options.json'}): carried "
          "attn_type=bi, clamp_len=5, same_length=False, dropout=0.0, "
          "dropatt=0.0; not carried (pretraining only; "
          "--carry_pretraining_options keeps them): bi_data=True, "
          "mem_len=6, reuse_len=6, written as bi_data=False, mem_len=0, "
          "reuse_len=0") in out.splitlines()
  saved = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert (saved["bi_data"], saved["clamp_len"], saved["mem_len"],
          saved["reuse_len"], saved["attn_type"]) == (False, 5, 0, 0, "bi")
  lm, _ = load_language_model(str(model_dir))
  for batch in (1, 3):
    inputs = _two_stream_inputs(lm.config.n_token, batch, seed=batch)
    assert_close(_hf_logits(str(tmp_path / "hf"), *inputs),
                 _our_logits(lm, *inputs))
  assert tree_digest(model_dir) == before


def test_run_options_reach_hf_and_transformers_agree(pretrain_dir, golden,
                                                     tmp_path, capsys):
  """Asked to, the converter carries pretraining's options too (the golden
  bi_data/clamp_len case): transformers then computes what the bi_data
  model computes; without run options (the original layout alone) it does
  not. Flags override the file, and a flag given is carried."""
  model_dir, ours = pretrain_dir
  ids, perm, mapping = _two_stream_inputs(ours.config.n_token, 4, seed=7)
  want = _our_logits(ours, ids, perm, mapping)  # bi_data: two halves

  code, out, err = _run(capsys, f"--from={model_dir}", "--model=lm",
                        f"--to={tmp_path / 'hf'}", "--to_format=hf",
                        "--carry_pretraining_options")
  assert code == 0, err
  assert (f"run options ({model_dir / 'run_options.json'}): carried "
          "attn_type=bi, bi_data=True, clamp_len=5, same_length=False, "
          "mem_len=6, reuse_len=6, dropout=0.0, dropatt=0.0"
          ) in out.splitlines()
  saved = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert (saved["bi_data"], saved["clamp_len"], saved["mem_len"]) == (
      True, 5, 6)
  assert_close(_hf_logits(str(tmp_path / "hf"), ids, perm, mapping), want)

  # The original layout alone (no run options): the defaults, and
  # transformers then computes something else.
  code, _, err = _run(capsys, f"--from={golden('case_pretrain').ckpt}",
                      "--model=lm", f"--to={tmp_path / 'bare'}",
                      "--to_format=hf")
  assert code == 0, err
  bare = _hf_logits(str(tmp_path / "bare"), ids, perm, mapping)
  assert np.abs(bare - want).max() > 1e-3

  # Flags override the file; one given is carried.
  code, out, err = _run(capsys, f"--from={model_dir}", "--model=lm",
                        f"--to={tmp_path / 'hf2'}", "--to_format=hf",
                        "--clamp_len=2", "--bi_data", "--mem_len=3")
  assert code == 0, err
  saved = json.loads((tmp_path / "hf2" / "config.json").read_text())
  assert (saved["bi_data"], saved["clamp_len"], saved["mem_len"],
          saved["reuse_len"]) == (True, 2, 3, 0)
  assert (f"run options ({model_dir / 'run_options.json'} and flags): "
          "carried attn_type=bi, bi_data=True, clamp_len=2, "
          "same_length=False, mem_len=3, dropout=0.0, dropatt=0.0; not "
          "carried (pretraining only; --carry_pretraining_options keeps "
          "them): reuse_len=6, written as reuse_len=0") in out.splitlines()


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
