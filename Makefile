# The README's two commands: `make demo` and `make test`.  Both set up .venv,
# build the native extension, and install what the tests need (ZooKeeper from
# Debian, pyspark from PyPI) when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-stamp
ZK_JAR := /usr/share/java/zookeeper.jar

.PHONY: demo test build bench zookeeper clean

$(DEPS): requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

build: $(DEPS)
	$(BIN)/python setup.py -q build_ext --inplace -j 2

zookeeper:
	@if [ ! -f $(ZK_JAR) ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's zookeeper package"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null; \
	  else echo "ZooKeeper is missing and we are not root: ZooKeeper tests will be skipped"; fi; \
	fi

demo: build
	$(BIN)/kreplica demo

test: build zookeeper
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: build
	$(BIN)/kreplica bench log

clean:
	rm -rf build kreplica/**/*.so $(VENV)
