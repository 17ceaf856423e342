# Two commands do all the set-up on a fresh machine:  `make demo`  and  `make test`.
# TORCH_SPEC picks the torch build. The default pins the release whose CPU wheel lies on
# these development machines' disk (an unpinned torch would pull a multi-GB CUDA build);
# with a GPU, run e.g.  make demo TORCH_SPEC=torch  or install torch yourself first.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench lint docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev,reference,singlecell,dask,large]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/bayesalign demo

test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --durations=15

# The Bayesian core side by side with GPy (psi-statistics, then MRD fits), one thread each; every other
# benchmark and the command behind each figure of benchmarks/RESULTS.md are listed in the README.
bench: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -u benchmarks/bench_psi.py
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -u benchmarks/bench_mrd.py

lint: $(STAMP)
	$(BIN)/ruff check bayesalign tests experiments benchmarks

# The documentation site (API reference and executed examples) into docs/_build/html, warnings as errors.
$(VENV)/.docs-installed: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.docs-installed
	rm -rf docs/_build docs/generated docs/auto_examples
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info
