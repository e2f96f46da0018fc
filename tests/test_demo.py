"""The demo chain (SentencePiece -> records -> pretraining -> fine-tuning ->
export -> raw-text query) with its tiny flags, and its reuse on a re-run."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import cli_output, early_result, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_cli_command() -> str:
  """The README's `saved_model_cli run` command, continuation lines joined."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  start = text.index(".venv/bin/saved_model_cli run")
  block = text[start:text.index("```", start)]
  return block.replace("\\\n", " ").strip()


def _demo_command(workdir):
  return [sys.executable, "demo/run_demo.py", "--tiny", "--workdir",
          str(workdir)]


def demo_first_run(directory):
  """The first run (an early run: see conftest): its workdir and result."""
  return directory / "demo", run(_demo_command(directory / "demo"), 1200)


@pytest.mark.early("demo_first_run")
def test_demo_chain_and_rerun():
  work, first = early_result(demo_first_run)
  cmd = _demo_command(work)
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
  with open(work / "summary.json") as f:
    summary = json.load(f)
  assert [s for s, _ in summary["pretraining_loss_curve"]] == [10, 20]
  assert summary["sst2_dev_examples"] == 400
  assert summary["sst2_majority_baseline"] == 203 / 400
  assert 0.0 <= summary["sst2_dev_accuracy"] <= 1.0
  assert len(summary["queries"]) == 3
  assert all(label in ("0", "1") and 0.5 <= p <= 1.0
             for label, p in summary["queries"].values())
  for key in ("sentencepiece_model", "text_export", "features_export"):
    assert os.path.exists(summary[key])
  # The README's stock saved_model_cli command, on the tiny demo's export
  # (its step is 10, the README's demo 600).
  cli = readme_cli_command().replace("out/demo", str(work))
  cli = cli.replace("/features/600", "/features/10").replace(
      ".venv/bin/", os.path.dirname(sys.executable) + "/")
  res = subprocess.run(shlex.split(cli), cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  probs = [max(row) for row in cli_output(res.stdout, "probabilities")]
  assert probs == pytest.approx([p for _, p in summary["queries"].values()],
                                abs=1e-4)
  assert "demo summary" in first.stdout and "Scale up" in first.stdout

  again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
  assert again.returncode == 0, again.stdout[-3000:]
  assert again.stdout.count(": reusing ") == 4
  with open(work / "summary.json") as f:
    assert json.load(f)["pretraining_loss_curve"] == \
        summary["pretraining_loss_curve"]
