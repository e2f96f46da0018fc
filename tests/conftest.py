"""Shared fixtures: where `../shared` is, and the golden cases in it; the
early runs (slow_runs.py) begun with the session or a module; the marks
(`e2e`, `long`, `early`, `bfloat16_compute`) and the guard on slow tests.

`XLNET_SHARED` overrides the location. Outside CI a missing folder skips the
tests that need it, saying so; in CI (CI=true) it is an error.
"""

import hashlib
import os
import re
import sys

import numpy as np
import pytest

from data_utils.squad.reader import read_squad
from data_utils.tokenization import SentencePieceTokenizer
from xlnet_tf.precision import bfloat16_crash_problem
# Session fixtures of real S3 and GCS servers (issue 36).
from object_stores import gcs_server, gcs_tf_proxy, s3_server  # noqa: F401
# Processes the tests run; tests import these from here.
from slow_runs import (ROOT, early_result, end_runs,  # noqa: F401
                       killed_after_save, queue_early_runs, run, start)


def shared_dir() -> str:
  return os.environ.get("XLNET_SHARED",
                        os.path.join(os.path.dirname(ROOT), "shared"))


@pytest.fixture(scope="session")
def shared():
  path = shared_dir()
  if not os.path.isdir(path):
    message = (f"shared data folder {path} not found (set XLNET_SHARED to "
               "its location)")
    if os.environ.get("CI"):
      pytest.fail(message + "; CI must run with ../shared beside the clone")
    pytest.skip(message)
  return path


class GoldenCase:
  """One folder of ../shared/golden: checkpoint, configs and arrays."""

  def __init__(self, path):
    import json
    import xlnet_tf
    self.path = path
    self.ckpt = os.path.join(path, "model.ckpt")
    self.config = xlnet_tf.XLNetConfig.from_json(
        os.path.join(path, "xlnet_config.json"))
    with open(os.path.join(path, "run_config.json")) as f:
      self.run = json.load(f)
    self.arrays = dict(np.load(os.path.join(path, "golden.npz")))

  def __getitem__(self, key):
    return self.arrays[key]

  def options(self, **overrides):
    import xlnet_tf
    names = ("dropout", "dropatt", "init", "init_std", "init_range", "mem_len",
             "reuse_len", "attn_type", "bi_data", "clamp_len", "same_length")
    values = {k: self.run[k] for k in names if k in self.run}
    values.update(overrides)
    return xlnet_tf.RunOptions(**values)


@pytest.fixture(scope="session")
def golden(shared):
  cache = {}

  def get(name):
    if name not in cache:
      cache[name] = GoldenCase(os.path.join(shared, "golden", name))
    return cache[name]
  return get


def assert_close(actual, expected, atol=1e-5, rtol=1e-5, name=""):
  np.testing.assert_allclose(np.asarray(actual), np.asarray(expected),
                             atol=atol, rtol=rtol, err_msg=name)


def shared_weights(model, store: dict, rng):
  """Builds `model` and gives it `store`'s weights, drawn from `rng` (x 0.3)
  by the first model: models of other options compute with the same
  numbers, so their outputs compare. Returns `model`."""
  model.build()
  if "weights" not in store:
    store["weights"] = [rng.randn(*w.shape).astype(np.float32) * 0.3
                        for w in model.get_weights()]
  model.set_weights(store["weights"])
  return model


def corpus_slice(shared_path, directory, n_lines):
  """Writes the first `n_lines` of the shared English corpus to
  `directory/corpus.txt`; returns its path."""
  src = os.path.join(shared_path, "data", "corpus", "gutenberg_state_union.txt")
  out = os.path.join(str(directory), "corpus.txt")
  with open(src, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
    for _, line in zip(range(n_lines), f):
      g.write(line)
  return out


def spiece_path(shared_path):
  return os.path.join(shared_path, "data", "spiece", "spiece.model")


@pytest.fixture(scope="session")
def sp_tokenizer(shared):
  """The released SentencePiece model, loaded once."""
  return SentencePieceTokenizer(spiece_path(shared))


@pytest.fixture(scope="session")
def squad_dev_path(shared):
  return os.path.join(shared, "data", "squad", "dev-v1.1.json")


@pytest.fixture(scope="session")
def squad_dev(squad_dev_path):
  """SQuAD v1.1 dev (10570 questions), read once."""
  return read_squad(squad_dev_path)


def tree_digest(path, skip=()):
  """What is at `path`: relative path -> sha256 of the file's bytes, or
  "dir", for everything below it (folders named in `skip` left out); a file
  gives {".": its sha256}. Tests compare it before and after a command to
  show that nothing the user had was changed."""
  path = str(path)

  def sha(file):
    with open(file, "rb") as f:
      return hashlib.sha256(f.read()).hexdigest()
  if os.path.isfile(path):
    return {".": sha(path)}
  out = {}
  for base, dirs, files in os.walk(path):
    dirs[:] = [d for d in dirs if d not in skip]
    for name in dirs:
      out[os.path.relpath(os.path.join(base, name), path)] = "dir"
    for name in files:
      out[os.path.relpath(os.path.join(base, name), path)] = sha(
          os.path.join(base, name))
  return out


def refused(res):
  """Asserts that run `res` refused as a user error does (exit code 2, no
  traceback); returns its last stderr line."""
  assert res.returncode == 2, res.stderr[-3000:]
  assert "Traceback" not in res.stderr
  return res.stderr.strip().splitlines()[-1]


def refused_line(script, args, timeout=600, env=None):
  """Runs entry script `script` (from the project root) with `args` (and
  `env` added); asserts it refused as a user error does (exit code 2, no
  traceback) and returns its last stderr line."""
  return refused(run([sys.executable, script, *args], timeout, env))


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "early(name): the test's slow run, function `name` of its "
      "module, begins when the session does (conftest.early_result)")
  config.addinivalue_line(
      "markers", f"long(why): takes over {LONG_SECONDS} s, and why it must")
  config.addinivalue_line(
      "markers", "e2e: an end-to-end run of a job (an entry script, a "
      "pipeline, a server); `make test-quick` leaves these out")
  config.addinivalue_line(
      "markers", "bfloat16_compute: computes in bfloat16; skipped, with the "
      "reason, where TensorFlow's bfloat16 matmuls would crash "
      "(precision.bfloat16_crash_problem)")


# The modules whose tests run whole jobs: entry scripts and pipelines in
# processes of their own, object-store servers, a cluster. `make test-quick`
# (-m "not e2e") leaves them out; `make test` runs them.
E2E_MODULES = frozenset({
    "test_batch_predict", "test_batch_predict_cli", "test_beam_runners",
    "test_buckets_batch", "test_buckets_records", "test_buckets_scripts",
    "test_buckets_training", "test_demo", "test_distributed",
    "test_lm_refusals", "test_object_stores", "test_pretrain_beam",
    "test_race", "test_run_classifier", "test_run_classifier_segments",
    "test_run_ner", "test_run_preflight", "test_run_pretrain",
    "test_run_reliability", "test_saved_model_cli", "test_squad",
    "test_task_imports", "test_text_inputs_scripts", "test_train_resume",
    "test_walkthroughs", "test_model_folder", "test_wheel"})

# The modules that take longest (measured: `make test`'s slowest tests).
_FIRST = {name: rank for rank, name in enumerate((
    "test_batch_predict", "test_walkthroughs", "test_demo",
    "test_buckets_training", "test_buckets_batch", "test_buckets_scripts",
    "test_distributed",
    "test_run_ner", "test_run_classifier", "test_run_pretrain",
    "test_buckets_records", "test_memory_precision"))}

# A test over this many seconds (setup, call and teardown) carries
# `@pytest.mark.long("why it must")`; the summary names those that do not.
LONG_SECONDS = 60
_LONG_MARKED = set()
_SECONDS = {}


def pytest_runtest_logreport(report):
  _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration
  if "long" in report.keywords:  # the report carries it from an xdist worker
    _LONG_MARKED.add(report.nodeid)


def pytest_terminal_summary(terminalreporter):
  """The guard on the suite's length: tests over `LONG_SECONDS` without a
  `long` mark saying why they must take that long."""
  unmarked = sorted(((s, n) for n, s in _SECONDS.items()
                     if s > LONG_SECONDS and n not in _LONG_MARKED),
                    reverse=True)
  if unmarked:
    terminalreporter.section(f"tests over {LONG_SECONDS} s without a "
                             "long(why) mark")
    for seconds, nodeid in unmarked:
      terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")


@pytest.hookimpl(tryfirst=True)  # the marks before -m selects by them
def pytest_collection_modifyitems(items):
  """Marks the tests of `E2E_MODULES` `e2e`. Skips the `bfloat16_compute`
  tests where TensorFlow's bfloat16 matmuls would crash the process and the
  project refuses them: an AVX-512 CPU with `ONEDNN_MAX_CPU_ISA` capping
  oneDNN below it, as the tolerance check at AVX2 does on such a CPU. CI
  sets no cap: there none is skipped."""
  for item in items:
    module = getattr(item, "module", None)
    if module is not None and module.__name__ in E2E_MODULES:
      item.add_marker(pytest.mark.e2e)
  # The longest modules first (a stable sort: a module's own order kept),
  # so that pytest-xdist, handing out modules in this order, does not leave
  # one for the end.
  items.sort(key=lambda item: _FIRST.get(
      getattr(getattr(item, "module", None), "__name__", ""), len(_FIRST)))
  problem = bfloat16_crash_problem()
  if problem:
    for item in items:
      if item.get_closest_marker("bfloat16_compute"):
        item.add_marker(pytest.mark.skip(reason=f"bfloat16: {problem}"))


_EXIT_STATUS = []


def pytest_sessionfinish(session, exitstatus):
  del session
  _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
  """Ends the process once pytest is done, with its exit status: at the
  interpreter's own teardown TensorFlow may destroy a tf.data iterator
  whose pool thread waits for the lock the destroying thread holds (seen
  once after a full run: the summary printed, the process alive), and a
  hung `make test` would fail CI after every test passed. An xdist worker
  still has its last messages to hand over: it exits by itself, and its
  controller ends it if it hangs."""
  if _EXIT_STATUS and not _xdist_worker(config):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])


def _xdist_worker(config) -> bool:
  return hasattr(config, "workerinput")


@pytest.fixture(scope="session", autouse=True)
def _early_runs(request, tmp_path_factory):
  if not _xdist_worker(request.config):
    queue_early_runs(request.session.items, tmp_path_factory)
  yield
  end_runs()


@pytest.fixture(scope="module", autouse=True)
def _early_runs_of_module(request, tmp_path_factory):
  """Under pytest-xdist a worker is handed whole modules (--dist loadfile)
  one at a time: a module's early runs begin with its first test there,
  not every module's in every worker."""
  if _xdist_worker(request.config):
    queue_early_runs([i for i in request.session.items
                      if getattr(i, "module", None) is request.module],
                     tmp_path_factory)


def rte_flags(shared_path, tmp_path, config):
  """run_classifier flags for RTE with model config file `config`, features
  in tmp_path/data and the model in tmp_path/model."""
  return ["--task_name=rte", f"--data_dir={shared_path}/data/glue/RTE",
          f"--model_config_path={config}",
          f"--spiece_model_file={spiece_path(shared_path)}",
          f"--output_dir={tmp_path}/data", f"--model_dir={tmp_path}/model"]


def event_scalars(directory):
  """`{tag: {step: value}}` of the TensorBoard scalars in the event files of
  `directory` (what TensorBoard would plot)."""
  import glob
  import tensorflow as tf
  scalars = {}
  for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        number = float(tf.make_ndarray(value.tensor))
        scalars.setdefault(value.tag, {})[event.step] = number
  return scalars


def cli_output(text, key):
  """The rows of output `key` in TensorFlow's `saved_model_cli run`
  printout (a `[B, C]` array)."""
  found = re.search(r"Result for output key " + key + r":\s*\[(.*?)\]\]",
                    text, re.S)
  assert found, text[-2000:]
  return [[float(x) for x in row.replace("[", "").split()]
          for row in found.group(1).split("]") if row.strip()]
