# The commands the README names. Everything runs inside the uv-managed venv (.venv), pinned by uv.lock.
# uv itself is installed with pip when it is missing, so a fresh clone needs only Python >= 3.10 and make.

# The uv this project is developed and tested with: the one `make` installs when there is none (workflows that
# install uv name the same version).
UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

.PHONY: help uv sync cli sdk yaml-host demo test typecheck bench chaos lint format importtime clean

help:
	@echo "make demo        # pulumi up + destroy of examples/quickstart against the bundled emulator"
	@echo "make test        # the whole test suite, the real-CLI tests included where the CLI can be provided (what CI runs)"
	@echo "make typecheck   # mypy --strict on a user program against the public Args (tests/typing; part of make test)"
	@echo "make cli         # provide the pinned Pulumi CLI (scripts/pulumi-cli.sh) and print its folder"
	@echo "make sdk         # regenerate sdk/python and sdk/nodejs from the plugin's schema (scripts/gen-sdk.sh)"
	@echo "make yaml-host   # provide the pinned Pulumi YAML language host (scripts/pulumi-yaml.sh) and print its folder"
	@echo "make bench       # how the provider waits (overshoot, requests, 2 + 16 / 4 + 20 convergence) next to the together SDK"
	@echo "make chaos       # seeded fault campaign: 50 stacks up + destroy under injected faults (+2 via the CLI), audited"
	@echo "make lint        # ruff"
	@echo "make mypy        # mypy: the package at its defaults, the core (resources, client, journal ...) as --strict"
	@echo "make importtime  # import cost of pulumi_together_rl next to the official together SDK"

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"

sync: uv
	$(UV) sync --frozen

cli:
	@bash scripts/pulumi-cli.sh

# The checked-in SDKs of the plugin face; tests/e2e/test_generated_sdks.py fails when they are out of date.
sdk:
	@bash scripts/gen-sdk.sh

yaml-host:
	@bash scripts/pulumi-yaml.sh

# No dependency on sync: the script first provides the Pulumi CLI (or says how to get it), then syncs.
demo:
	@bash scripts/demo.sh

# The real-CLI tests run with the CLI that scripts/pulumi-cli.sh provides (found, cached, installed or built);
# where it cannot, they are skipped with its reason, except under TOGETHER_RL_REQUIRE_CLI=1 (CI), where they fail.
test: sync
	@bin="$$(bash scripts/pulumi-cli.sh)" || { bin=""; echo "make test: no Pulumi CLI; the real-CLI tests will not run" >&2; }; \
	TOGETHER_RL_PULUMI_BIN="$$bin" $(UV) run --frozen pytest $(PYTEST_ARGS)

# The typing tests alone (make test runs them too): the package's py.typed and annotations, as a user's mypy sees them.
typecheck: sync
	$(UV) run --frozen pytest tests/typing $(PYTEST_ARGS)

# mypy, configured in pyproject.toml ([tool.mypy]): the whole package at mypy's defaults, the core as --strict.
.PHONY: mypy
mypy: sync
	$(UV) run --frozen mypy

lint: sync
	$(UV) run --frozen ruff check provider harness tests scripts examples
	$(UV) run --frozen ruff format --check provider harness tests scripts examples

format: sync
	$(UV) run --frozen ruff format provider harness tests scripts examples
	$(UV) run --frozen ruff check --fix provider harness tests scripts examples

bench: sync
	$(UV) run --frozen python scripts/bench_waits.py

# The CLI cycles run with the CLI that scripts/pulumi-cli.sh provides; without one they are skipped.
chaos: sync
	@bin="$$(bash scripts/pulumi-cli.sh)" || { bin=""; echo "make chaos: no Pulumi CLI; the CLI cycles will not run" >&2; }; \
	TOGETHER_RL_PULUMI_BIN="$$bin" $(UV) run --frozen python scripts/chaos.py --cycles 50 --cli-cycles 2 $(CHAOS_ARGS)

importtime: sync
	$(UV) run --frozen python scripts/importtime.py

clean:
	rm -rf .venv .pytest_cache .ruff_cache
