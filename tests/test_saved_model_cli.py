"""`xlnet-saved-model-cli`: what TensorFlow's CLI answers with a traceback
(a missing directory, an unknown tag-set or signature, a bad input key,
literal, shape or type) is one line and exit code 2, from the library entry
point and from the console script."""

import json
import os
import subprocess
import sys

import pytest

import xlnet_tf as xt
from xlnet_tf.tasks.classification.serving import export_classifier
from conftest import spiece_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = xt.XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                      n_token=32000)


@pytest.fixture(scope="module")
def text_export(shared, tmp_path_factory):
  """A classifier export with the raw-text signatures."""
  model = xt.XLNetClassifier(xt.XLNetModel(TINY), n_class=3, task_name="mnli")
  path = str(tmp_path_factory.mktemp("cli") / "sm")
  return export_classifier(model, path, 8, False,
                           labels=["contradiction", "entailment", "neutral"],
                           sp_model_path=spiece_path(shared))


def _cli_cases(sm, missing):
  """`{case: (arguments, the expected line)}`."""

  def run(signature, exprs):
    return ["run", "--dir", sm, "--tag_set", "serve", "--signature_def",
            signature, "--input_exprs", exprs]
  features = ("input_ids=[[1, 2]];segment_ids=[[0, 0]];"
              "input_mask=[[0.0, 0.0]]")
  return {
      "missing_dir": (["show", "--dir", missing],
                      f"--dir={missing}: no such directory"),
      "unknown_signature": (
          run("nope", 'text=["a"]'),
          f"--signature_def=nope: no such signature in {sm}; it has: "
          "serve_features, serve_text, serve_text_pair, serving_default"),
      "bad_expression": (
          run("serve_text", 'text=["a great movie"'),
          '--input_exprs: text=["a great movie": the value is not a Python '
          "literal"),
      "wrong_key": (
          run("serve_text", 'txt=["a"]'),
          "--input_exprs: 'txt' is not an input of signature 'serve_text'; "
          "its inputs: text"),
      "wrong_shape": (
          run("serving_default", features),
          "--input_exprs: input 'input_ids' has shape [1, 2], signature "
          "'serving_default' takes [None, 8]"),
      "missing_input": (
          run("serve_text_pair", 'text_a=["a"]'),
          "signature 'serve_text_pair' takes inputs text_a, text_b; missing: "
          "text_b"),
      "wrong_type": (
          run("serve_text", "text=[1, 2]"),
          "--input_exprs: input 'text' has int64 values, signature "
          "'serve_text' takes string"),
      # absl's app.run printed its usage and exited 1.
      "unknown_flag": (["show", "--dir", sm, "--bogus"],
                       "Unknown command line flag 'bogus'"),
      "unknown_tag_set": (
          ["show", "--dir", sm, "--tag_set", "gpu"],
          f"--tag_set=gpu: no such tag-set in {sm}; it has: serve"),
  }


# Runs every case in ONE process (TensorFlow and TF Text start once); each
# call goes through xlnet_tf.export.saved_model_cli.main as the console
# script does.
_CLI_DRIVER = """
import contextlib, io, json, sys
from xlnet_tf.export.saved_model_cli import main
results = {}
for name, args in json.loads(sys.argv[1]).items():
  sys.argv = ["xlnet-saved-model-cli"] + args
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    try:
      main()
      code = 0
    except SystemExit as e:
      code = e.code
  results[name] = {"code": code, "stderr": err.getvalue()}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def cli_results(text_export, tmp_path_factory):
  missing = str(tmp_path_factory.mktemp("nothing") / "nope")
  cases = _cli_cases(text_export, missing)
  res = subprocess.run(
      [sys.executable, "-c", _CLI_DRIVER,
       json.dumps({k: v[0] for k, v in cases.items()})],
      cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  return {k: (out[k], cases[k][1]) for k in cases}


@pytest.mark.parametrize("case", ["missing_dir", "unknown_signature",
                                  "bad_expression", "wrong_key", "wrong_shape",
                                  "missing_input", "wrong_type",
                                  "unknown_tag_set", "unknown_flag"])
def test_saved_model_cli_error_is_one_line(cli_results, case):
  got, want = cli_results[case]
  assert got["code"] == 2 and "Traceback" not in got["stderr"]
  assert got["stderr"] == f"xlnet-saved-model-cli: {want}\n"


def test_saved_model_cli_console_script_missing_dir(tmp_path):
  cli = os.path.join(os.path.dirname(sys.executable), "xlnet-saved-model-cli")
  missing = str(tmp_path / "nope")
  res = subprocess.run([cli, "run", "--dir", missing, "--tag_set", "serve",
                        "--signature_def", "serving_default",
                        "--input_exprs", "input_ids=[[1]]"],
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 2 and "Traceback" not in res.stderr
  assert res.stderr.strip().splitlines()[-1] == (
      f"xlnet-saved-model-cli: --dir={missing}: no such directory")
