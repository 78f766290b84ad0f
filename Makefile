# The commands the README names. Everything runs inside the uv-managed venv (.venv), pinned by uv.lock.
# uv itself is installed with pip when it is missing, so a fresh clone needs only Python >= 3.10 and make.

UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

.PHONY: help uv sync test lint format importtime clean

help:
	@echo "make test        # the whole test suite (what CI runs)"
	@echo "make lint        # ruff"
	@echo "make importtime  # import cost of pulumi_together_rl next to the official together SDK"

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv>=0.5"

sync: uv
	$(UV) sync --frozen

test: sync
	$(UV) run --frozen pytest

lint: sync
	$(UV) run --frozen ruff check provider tests examples
	$(UV) run --frozen ruff format --check provider tests examples

format: sync
	$(UV) run --frozen ruff format provider tests examples
	$(UV) run --frozen ruff check --fix provider tests examples

importtime: sync
	$(UV) run --frozen python scripts/importtime.py

clean:
	rm -rf .venv .pytest_cache .ruff_cache
