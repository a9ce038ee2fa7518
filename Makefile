# Fresh Debian 12 + Python 3.11 + Go + gcc: `make run` (main job) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BRIDGE := src/henn/ckks/backends/lattigo/_bridge/libhennlattigo.so
GO_SRC := $(wildcard src/henn/ckks/backends/lattigo/go/*.go) src/henn/ckks/backends/lattigo/go/go.mod

.PHONY: setup bridge run test test-full bench clean

$(BIN)/henn: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# tests also exercise training and the torch.fx frontend: torch is a test-time extra only
$(VENV)/.test-deps: $(BIN)/henn pyproject.toml
	$(BIN)/pip install -q -e '.[test,train,tenseal]'
	touch $@

$(BRIDGE): $(GO_SRC)
	$(BIN)/python -m henn.ckks.backends.lattigo.build

setup: $(BIN)/henn
	@if [ -f src/henn/ckks/backends/lattigo/go/go.mod ]; then $(MAKE) --no-print-directory bridge; fi

bridge: $(BIN)/henn $(BRIDGE)

run: setup
	$(BIN)/henn infer --model mnist-cnn --activation swish-rg7-deg4 --backend lattigo --mode single --images 100

test: setup $(VENV)/.test-deps
	$(BIN)/python -m pytest -q --timeout 1800

test-full: setup $(VENV)/.test-deps
	HENN_FULL=1 $(BIN)/python -m pytest -q --timeout 3600

clean:
	rm -rf $(VENV) src/henn/ckks/backends/lattigo/_bridge build *.egg-info
