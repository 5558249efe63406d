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

.PHONY: run test test-fast bench fuzz deps system-deps lint clean

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

run: deps
	$(VENV)/bin/weir up

test: deps
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: deps
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

bench: deps
	$(PY) bench/produce_consume.py
	$(PY) bench/replication.py
	$(PY) bench/replication_floor.py
	$(PY) bench/latency.py
	$(PY) bench/compaction.py
	$(PY) bench/control_plane.py
	$(PY) bench/controller_sim.py

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
