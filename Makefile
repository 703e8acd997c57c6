# Top-level targets. `make test` is the test command (CI runs it).
CARGO ?= cargo
PYTHON ?= python3
VENV ?= .venv

.PHONY: build test test-big demo big bench install fixtures golden clean

build:
	$(CARGO) build --release --locked --workspace

# Everything CI checks: the Rust suite (in release, against the one build
# above) and the recipe demo.
test: build
	$(CARGO) test --release --locked --workspace
	$(MAKE) -C recipes demo

# The same checks on the large models (needs golden/big: make big).
test-big: build
	$(CARGO) test --release --locked --workspace -- --ignored

# Python environments for the recipes (torch from PyPI, a few minutes).
$(VENV)/.torch:
	recipes/setup_venv.sh --torch $(VENV)
	touch $@

# Regenerates the committed fixtures and expected outputs with torch.
fixtures: $(VENV)/.torch
	$(VENV)/bin/python recipes/zoo.py --out golden/models
	$(VENV)/bin/python recipes/make_bad.py --models golden/models --out golden/bad
	$(VENV)/bin/python recipes/make_legacy.py --models golden/models --out golden/legacy

# The large models, not committed (golden/big).
big: $(VENV)/.torch
	$(VENV)/bin/python recipes/zoo.py --out golden/models --only resnet18 resnet50 mobilenet_v3_small efficientnet_b0 convnext_tiny

# Rewrites golden listings, error messages and man pages from this build.
golden: build
	UPDATE_GOLDEN=1 $(CARGO) test --release --locked --workspace

bench: build
	$(PYTHON) recipes/bench_pt2ir.py

install:
	./install.sh

demo: build
	$(MAKE) -C recipes demo

clean:
	$(CARGO) clean
	$(MAKE) -C recipes clean
