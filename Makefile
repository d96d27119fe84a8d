# rokka: two commands set everything up: `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-install
TEST_STAMP := $(VENV)/.stamp-install-test

.PHONY: serve test bench interop install install-test lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,pipeline]'
	touch $(TEST_STAMP)

install: $(STAMP)

serve: install
	$(BIN)/rokka serve

# Everything the tests need, third-party clients included (see interop/install.sh).
install-test: $(TEST_STAMP)
	bash interop/install.sh

test: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider tests interop

interop: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider interop

bench: install-test
	$(BIN)/python -m benchmarks.run

lint: install
	$(BIN)/ruff check gateway core compat pipeline tests interop benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
