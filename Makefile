# The two commands a new user runs: `make test` and `make demo`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test venv clean demo

$(STAMP): pyproject.toml
	@test -x $(PY) || { command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,hf]'
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q --doctest-modules xlnet_tf data_utils tests

demo: $(STAMP)
	$(PY) demo/run_demo.py --workdir out/demo

clean:
	rm -rf $(VENV) .pytest_cache
