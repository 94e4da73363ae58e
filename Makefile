# inferscale: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# python3.11 where it is installed under that name, else python3 if it is 3.11 (checked below)
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
# the linters' caches live with the other caches, not in the checkout
TOOL_CACHE := $(HOME)/.cache/inferscale
export MYPY_CACHE_DIR := $(TOOL_CACHE)/mypy
export RUFF_CACHE_DIR := $(TOOL_CACHE)/ruff

.PHONY: setup tools cluster cluster-down cluster-status lint test test-unit test-e2e demo \
        bench-sim bench-operator crds clean

## setup: Python venv with the package and test tools, Debian's prometheus
setup: $(STAMP) prometheus-installed

$(STAMP): pyproject.toml requirements.lock
	@[ -n "$(PYTHON)" ] && "$(PYTHON)" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
	  { echo "Python 3.11 is required: install python3.11, or give its path with make PYTHON=..." >&2; exit 1; }
	"$(PYTHON)" -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -c requirements.lock -e '.[test]'
	touch $@

.PHONY: prometheus-installed
# Debian's packages for the local stack: prometheus (and promtool), openssl and curl for e2e/cluster.sh's
# certificates and health checks.
prometheus-installed:
	@missing=; for p in prometheus openssl curl; do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	[ -z "$$missing" ] || { \
	  echo "installing Debian's packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }

## tools: build kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok, helm from Go modules (cached)
tools:
	bash e2e/build-tools.sh

## cluster: start (or reuse) the local control plane, GPU nodes and Prometheus; writes .e2e/env
cluster: setup
	bash e2e/cluster.sh up

cluster-down:
	bash e2e/cluster.sh down

cluster-status:
	bash e2e/cluster.sh status

## lint: ruff, formatting, mypy, import layering
lint: $(STAMP)
	$(VENV)/bin/ruff check operator tests e2e
	$(VENV)/bin/ruff format --check operator tests e2e
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --cache-dir $(TOOL_CACHE)/import-linter

## test: lint, unit tests and e2e tests (the e2e fixtures start the local cluster when needed). The
## control plane is built first, outside pytest: a first build takes about 9 minutes on 2 cores, close to
## pytest's 600-s per-test timeout, which would count it against the first e2e test's set-up.
test: setup lint tools
	INFERSCALE_REQUIRE_TOOLS=1 $(VENV)/bin/pytest

test-unit: $(STAMP)
	$(VENV)/bin/pytest tests/unit

test-e2e: setup tools
	$(VENV)/bin/pytest tests/e2e

## demo: the local stack, the chart, the operator and a replayed trace, watched live
demo: setup
	$(PY) e2e/demo.py

## bench-sim: replay every trace against inferscale, the peers and the oracle; writes docs/benchmarks.md
bench-sim: $(STAMP)
	$(PY) -m inferscale.sim.bench

## bench-operator: operator scale benchmark on the local cluster; writes docs/operator-benchmark.md
bench-operator: setup
	$(PY) e2e/bench_operator.py

## crds: regenerate the CRD (crds/, the chart, deploy/) and docs/api.md from the pydantic models
crds: $(STAMP) tools
	$(VENV)/bin/inferscale crd > crds/inferscale.dev_inferenceservices.yaml
	cp crds/inferscale.dev_inferenceservices.yaml charts/inferscale/crds/
	$(PY) deploy/generate.py
	$(PY) -m inferscale.api.docs > docs/api.md

clean: cluster-down
	rm -rf .e2e .demo
