"""`python -m xlnet_tf.convert`: usage and source errors are one line on
stderr with exit code 2 (absl flags parsed in process)."""

import pytest

from xlnet_tf import convert


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
