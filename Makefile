# Weir: `make run` starts a local cluster, `make test` runs the test suite.
# Both create or refresh .venv and install what is missing: Python packages into .venv,
# ZooKeeper and Java (and kcat and chromium, test tools) from Debian's packages, and compile
# the Spark source's record kernel into numba's cache (a fresh clone would compile it in
# every Spark worker's first large read).

VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.weir-installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: run test test-unit test-fast bench bench-quick fuzz deps system-deps lint clean

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m weir.spark.kernel
	@touch $(STAMP)

deps: $(STAMP) system-deps

system-deps:
	@if ! command -v java >/dev/null || [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v kcat >/dev/null; then \
	  echo "installing zookeeper, java and kcat from Debian packages"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    zookeeper default-jre-headless kcat >/dev/null; \
	fi
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing chromium from Debian packages (the console's browser test)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    chromium >/dev/null; \
	fi

# make run ARGS="--brokers 1 --port-base 19092 --data-dir /tmp/w" (any `weir up` option)
ARGS ?=
run: deps
	$(VENV)/bin/weir up $(ARGS)

# Everything: unit, simulation, ZooKeeper, integration (real brokers and clients) and Spark.
test: deps
	$(PY) -m pytest $(PYTEST_ARGS)

# Unit and simulation tests only: no ZooKeeper, no broker processes (markers given by
# tests/conftest.py: integration for tests/integration and tests/spark, zookeeper for the
# rest that start a ZooKeeper server).
test-unit: $(STAMP)
	$(PY) -m pytest tests/unit tests/sim -m "not integration and not zookeeper" $(PYTEST_ARGS)

test-fast: deps
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# `make bench`: the long set (clusters on loopback; results replace bench/results/<name>.*).
# `make bench-quick`: every in-process benchmark with short arguments, to check that they
# run (a few minutes); bench/results/ is left alone.
bench: deps
	$(PY) -m bench run produce_consume
	$(PY) -m bench run replication
	$(PY) -m bench run replication_floor
	$(PY) -m bench run latency
	$(PY) -m bench run compaction
	$(PY) -m bench run control_plane
	$(PY) -m bench run controller_sim

bench-quick: $(STAMP)
	$(PY) -m bench run --tier inprocess --quick --no-save

# A long fuzzing run (FUZZ_MINUTES, default 60): in-process decoders, then a live broker.
# Findings are kept in fuzz/corpus/ and the report in fuzz/last-report.md.
FUZZ_MINUTES ?= 60
fuzz: deps
	$(PY) -m fuzz.run --minutes $(FUZZ_MINUTES)

lint: $(STAMP)
	$(VENV)/bin/ruff check weir tests bench fuzz examples
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) weir-data .pytest_cache
