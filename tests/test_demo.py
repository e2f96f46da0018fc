"""The demo chain (SentencePiece -> records -> pretraining -> fine-tuning ->
export -> raw-text query) with its tiny flags, and its reuse on a re-run."""

import json
import os
import re
import shlex
import sys

import pytest

from conftest import cli_output, early_result, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_cli_command() -> str:
  """The serving page's `saved_model_cli run` command (docs/serving.md),
  continuation lines joined."""
  with open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8") as f:
    text = f.read()
  start = text.index(".venv/bin/saved_model_cli run")
  block = text[start:text.index("```", start)]
  return block.replace("\\\n", " ").strip()


def _demo_command(workdir):
  return [sys.executable, "demo/run_demo.py", "--tiny", "--workdir",
          str(workdir)]


EXPORTS = ("sentencepiece_model", "text_export", "features_export")


def demo_runs(directory):
  """The first run, then the serving page's stock saved_model_cli command on
  the tiny demo's export (its step is 10, the page's demo 600), then a re-run
  (an early run: see conftest): what the test checks, as it was after each
  step."""
  work = directory / "demo"
  out = {"work": work, "first": run(_demo_command(work), 1200)}
  if out["first"].returncode != 0:
    return out
  with open(work / "summary.json") as f:
    out["summary"] = json.load(f)
  out["exist"] = [os.path.exists(out["summary"][key]) for key in EXPORTS]
  cli = readme_cli_command().replace("out/demo", str(work))
  cli = cli.replace("/features/600", "/features/10").replace(
      ".venv/bin/", os.path.dirname(sys.executable) + "/")
  out["cli"] = run(shlex.split(cli), 300)
  out["again"] = run(_demo_command(work), 600)
  with open(work / "summary.json") as f:
    out["summary_again"] = json.load(f)
  return out


@pytest.mark.long("the whole demo chain, as `make demo` runs it, and again")
@pytest.mark.early("demo_runs")
def test_demo_chain_and_rerun():
  runs = early_result(demo_runs)
  first = runs["first"]
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
  summary = runs["summary"]
  assert [s for s, _ in summary["pretraining_loss_curve"]] == [10, 20]
  assert summary["sst2_dev_examples"] == 400
  assert summary["sst2_majority_baseline"] == 203 / 400
  assert 0.0 <= summary["sst2_dev_accuracy"] <= 1.0
  assert len(summary["queries"]) == 3
  assert all(label in ("0", "1") and 0.5 <= p <= 1.0
             for label, p in summary["queries"].values())
  assert runs["exist"] == [True] * len(EXPORTS), EXPORTS
  # The serving page's stock saved_model_cli command.
  res = runs["cli"]
  assert res.returncode == 0, res.stderr[-3000:]
  probs = [max(row) for row in cli_output(res.stdout, "probabilities")]
  assert probs == pytest.approx([p for _, p in summary["queries"].values()],
                                abs=1e-4)
  assert "demo summary" in first.stdout and "Scale up" in first.stdout
  # The ways to scale that exist: Beam runners for both data jobs, buckets,
  # training strategies; and the pages that tell more.
  scale = first.stdout[first.stdout.index("Scale up"):]
  for named in ("--runner", "--pipeline_options", "run_batch_predict.py",
                "create_pretrain_data", "gs://", "s3://", "--strategy="):
    assert named in scale, named
  for page in re.findall(r"docs/\w+\.md", scale):
    assert os.path.exists(os.path.join(ROOT, page)), page

  again = runs["again"]
  assert again.returncode == 0, again.stdout[-3000:]
  assert again.stdout.count(": reusing ") == 4
  assert runs["summary_again"]["pretraining_loss_curve"] == \
      summary["pretraining_loss_curve"]
