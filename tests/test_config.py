"""XLNetConfig / RunOptions: the original's keys, defaults and clear errors."""

import dataclasses
import json

import pytest

import xlnet_tf as xt


def test_reads_original_config_and_writes_it_back(golden, tmp_path):
  path = golden("case_pretrain").path + "/xlnet_config.json"
  config = xt.XLNetConfig.from_json(path)
  assert config == xt.XLNetConfig(n_layer=2, d_model=32, n_head=4, d_head=8,
                                  d_inner=64, n_token=120,
                                  ff_activation="relu", untie_r=True)
  out = tmp_path / "sub" / "xlnet_config.json"
  config.to_json(str(out))
  with open(path) as f, open(out) as g:
    assert json.load(g) == json.load(f)
  assert xt.XLNetConfig.from_json(str(out)) == config


def test_run_options_defaults_are_the_originals():
  assert dataclasses.asdict(xt.RunOptions()) == {
      "dropout": 0.1, "dropatt": 0.1, "init": "normal", "init_std": 0.02,
      "init_range": 0.1, "mem_len": 0, "reuse_len": 0,
      "attn_type": "bi", "bi_data": False, "clamp_len": -1,
      "same_length": False, "use_bfloat16": False,
      # Ours, off by default: they change memory/precision, not the math.
      "use_float16": False, "recompute": False, "fast_kernels": True}


def test_run_options_one_sixteen_bit_type():
  with pytest.raises(xt.ConfigError, match="exclude each other"):
    xt.RunOptions(use_bfloat16=True, use_float16=True)


def _write(tmp_path, text):
  path = tmp_path / "xlnet_config.json"
  path.write_text(text)
  return str(path)


def test_malformed_json_names_file_and_position(tmp_path):
  path = _write(tmp_path, '{"d_head": 8,\n "n_layer": }')
  with pytest.raises(xt.ConfigError,
                     match=r"xlnet_config\.json: not valid JSON .*line 2"):
    xt.XLNetConfig.from_json(path)


def test_missing_key(tmp_path):
  path = _write(tmp_path, json.dumps({"d_head": 8, "d_inner": 64,
                                      "d_model": 32, "n_head": 4}))
  with pytest.raises(xt.ConfigError,
                     match="missing key.*ff_activation, n_layer, n_token, "
                     "untie_r"):
    xt.XLNetConfig.from_json(path)


@pytest.mark.parametrize("key,value,message", [
    ("n_head", "4", "'n_head' must be a positive integer, got '4'"),
    ("d_model", 0, "'d_model' must be a positive integer, got 0"),
    ("ff_activation", "swish", "'ff_activation' must be one of"),
    ("untie_r", "yes", "'untie_r' must be true or false"),
])
def test_bad_value_names_key_and_value(tmp_path, key, value, message):
  data = {"d_head": 8, "d_inner": 64, "d_model": 32, "ff_activation": "gelu",
          "n_head": 4, "n_layer": 2, "n_token": 120, "untie_r": True}
  data[key] = value
  path = _write(tmp_path, json.dumps(data))
  with pytest.raises(xt.ConfigError, match=message) as err:
    xt.XLNetConfig.from_json(path)
  assert str(err.value).startswith(path)


def test_missing_file(tmp_path):
  with pytest.raises(xt.ConfigError, match="no such config file"):
    xt.XLNetConfig.from_json(str(tmp_path / "absent.json"))


@pytest.mark.parametrize("kw,message", [
    ({"attn_type": "causal"}, "'attn_type' must be 'bi' or 'uni'"),
    ({"init": "xavier"}, "'init' must be 'normal' or 'uniform'"),
    ({"dropout": 1.5}, "'dropout' must be in"),
    ({"mem_len": -1}, "'mem_len' must be a non-negative integer"),
    ({"fast_kernels": 1}, "'fast_kernels' must be true or false"),
])
def test_run_options_validation(kw, message):
  with pytest.raises(xt.ConfigError, match=message):
    xt.RunOptions(**kw)


def test_run_options_from_dict_rejects_unknown_names():
  with pytest.raises(xt.ConfigError, match="unknown option.*memlen"):
    xt.RunOptions.from_dict({"memlen": 3})


def test_run_options_read_none_memory_as_zero():
  """The original's RunConfig (and run_options.json files written before
  the options became ints) say None for "no memory" / "the whole segment"."""
  assert xt.RunOptions(mem_len=None, reuse_len=None) == xt.RunOptions()
  saved = dict(xt.RunOptions(mem_len=3).to_dict(), mem_len=None,
               reuse_len=None)
  options = xt.RunOptions.from_dict(saved)
  assert (options.mem_len, options.reuse_len) == (0, 0)
  assert options.to_dict() == xt.RunOptions().to_dict()
