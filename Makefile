# rokka: two commands set everything up: `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-install
# C helpers for the hot paths (setup.py); editing one re-runs the install, which rebuilds them.
NATIVE_SRC := setup.py $(wildcard core/storage/*.c core/storage/*.h gateway/kafka/codec/*.c gateway/kafka/codec/*.h net/remoting/codec/*.c compat/*.c)
TEST_STAMP := $(VENV)/.stamp-install-test

.PHONY: serve test bench interop install install-test lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py $(NATIVE_SRC)
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

# tests/ (servers in-process, no third-party clients) runs on both cores; interop/ (real client processes
# beside a real server) runs one test at a time, as clients and server already share the two cores.
test: install-test
	status=0; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 tests || status=$$?; \
	$(BIN)/python -m pytest -q -p no:cacheprovider interop || status=$$?; \
	exit $$status

# The cross-client interop matrix (11 producers x 11 consumers x 7 scenarios, about 5 min), then the
# table it generated (interop/MATRIX.md, written whenever the whole matrix ran, pass or fail).
# `make test` runs it too, with every other interop scenario.
interop: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider -rs interop/test_matrix.py; status=$$?; \
	cat interop/MATRIX.md; exit $$status

bench: install-test anchors
	$(BIN)/python -m benchmarks.run

# The real brokers beside rokka (issue 21): Apache Kafka 4.4.0 and Apache RocketMQ 4.9.7 jars from Maven Central
# into benchmarks/anchors/target (git-ignored; benchmarks/lib/apache.py starts them), then checks the Kafka one starts and serves a real
# client (benchmarks/anchors/test_anchor_smoke.py). Not part of `make test`.
.PHONY: anchors conformance
anchors: install-test
	bash benchmarks/anchors/install.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider benchmarks/anchors/test_anchor_smoke.py

# make conformance: the Java client scenarios (interop/java) against Apache Kafka / Apache RocketMQ and against
# rokka, outcomes compared; prints the conformance table (scenario, rokka, Apache, same?). Not in CI (JVM brokers).
# CONFORMANCE_ARGS adds options (--only kafka|rocketmq, --scenarios a,b).
CONFORMANCE_ARGS ?=
conformance: install-test anchors
	$(BIN)/python interop/conformance/run.py $(CONFORMANCE_ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check gateway net core compat pipeline

clean:
	rm -rf $(VENV) build *.egg-info
	find core gateway compat -name "*.so" -delete

# Issue 19's harnesses (not in CI: `make test` runs the short interop/test_fuzz_short.py instead).
# make fuzz: FUZZ_FRAMES hostile frames per port (default 1,000,000) on the Kafka, broker and name-server
# ports while kafka-python and rokka's RocketMQ client keep working; the server's RSS is watched; fails if a
# check fails (--strict: see benchmarks/fuzz/driver.py).  FUZZ_ARGS adds options (--seed, --bomb-mib, ...).
FUZZ_FRAMES ?= 1000000
FUZZ_ARGS ?=
.PHONY: fuzz soak
fuzz: install-test
	$(BIN)/python -m benchmarks.fuzz --frames $(FUZZ_FRAMES) --strict $(FUZZ_ARGS)

# make soak: SOAK_ROUNDS SIGTERM stops and as many kill -9 rounds (default 100 + 100) of `rokka serve`
# (SYNC_FLUSH) under load from both protocols, SOAK_ROUND_S seconds of load per round; prints the table
# (machine, date, rounds, acknowledged, lost, duplicates, exit codes) for README's reliability section.
SOAK_ROUNDS ?= 100
SOAK_ROUND_S ?= 3
SOAK_ARGS ?=
soak: install-test
	$(BIN)/python -m benchmarks.soak --rounds $(SOAK_ROUNDS) --round-s $(SOAK_ROUND_S) $(SOAK_ARGS)

# make failover: FAILOVER_ROUNDS kill -9 rounds (default 10) of the master of a controller-mode broker set
# (interop/test_failover.py: name server with the controller + two brokers, C++ and confluent-kafka writers);
# prints one FAILOVER line per round (seconds until writes resume) and the totals.  `make test` runs 2 rounds.
FAILOVER_ROUNDS ?= 10
.PHONY: failover
failover: install-test
	ROKKA_FAILOVER_ROUNDS=$(FAILOVER_ROUNDS) $(BIN)/python -m pytest -q -p no:cacheprovider -s interop/test_failover.py
