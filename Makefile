# Set-up is part of every target: a fresh machine needs nothing but python3 (>= 3.10) and make.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.qpriv-installed
# Where torch comes from. Empty: pip's configured index. On plain PyPI a Linux machine gets the
# CUDA build (GBs); TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu keeps it CPU-only.
TORCH_INDEX_URL ?=
TORCH_INDEX := $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL),)

.PHONY: quickstart test lint bench docs

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: an open range would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0 $(TORCH_INDEX)
	$(PY) -m pip install -q -e '.[dev,ray,federated]'
	touch $(STAMP)

quickstart: $(STAMP)
	$(VENV)/bin/qpriv quickstart --out runs/quickstart

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts

test: lint
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=20

bench: $(STAMP)
	$(PY) benchmarks/quantum_features.py
	$(PY) benchmarks/epoch_cost.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
