# The two commands a new user runs: `make test` and `make demo`.
# Python 3.10-3.13: `python3` when it is one of them, or `PYTHON=/path/to/python3.X`
# (which gets its own `.venv-3.X`, so several versions live side by side).
PYTHON ?= python3
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
SUPPORTED := 3.10 3.11 3.12 3.13
VENV ?= $(if $(filter file,$(origin PYTHON)),.venv,.venv-$(PYVER))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-quick venv clean demo check-python

check-python:
	@test -n "$(PYVER)" || { echo "make: $(PYTHON) not found or not a Python; xlnet-tf needs Python 3.10-3.13: set PYTHON=/path/to/python3.X"; exit 1; }
	@case " $(SUPPORTED) " in *" $(PYVER) "*) ;; *) echo "make: $(PYTHON) is Python $(PYVER); xlnet-tf needs 3.10-3.13: set PYTHON=/path/to/python3.X"; exit 1;; esac

$(STAMP): pyproject.toml | check-python
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,hf,cloud,cloud-test]'
	@# Where PyPI's torch is the CUDA build (every Python but the 3.11 CPU wheel
	@# this machine holds), it brings triton, whose own LLVM crashes the process
	@# beside TensorFlow's when transformers imports it; CPU work needs none.
	@$(PY) -m pip uninstall --quiet --yes triton 2>/dev/null || true
	@touch $(STAMP)

venv: $(STAMP)

# The whole suite in 2 worker processes, each handed whole modules (much of
# a test's time is one core's Python), with its 10 slowest tests and its
# wall time at the end.
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile --doctest-modules
test: $(STAMP)
	$(PYTEST) --durations=10 xlnet_tf data_utils tests

# The developers' inner loop: everything but the end-to-end runs (`e2e`).
test-quick: $(STAMP)
	$(PYTEST) -m "not e2e" xlnet_tf data_utils tests

demo: $(STAMP)
	$(PY) demo/run_demo.py --workdir out/demo

clean:
	rm -rf $(VENV) .pytest_cache
