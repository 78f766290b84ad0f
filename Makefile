# The commands the README names. Everything runs inside the uv-managed venv (.venv), pinned by uv.lock.
# uv itself is installed with pip when it is missing, so a fresh clone needs only Python >= 3.10 and make.

# The uv this project is developed and tested with: the one `make` installs when there is none (workflows that
# install uv name the same version).
UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

.PHONY: help uv sync cli sdk dist yaml-host demo check test test-cli test-release acceptance typecheck bench chaos crashpoints lint format importtime clean

help:
	@echo "make demo        # pulumi up + destroy of examples/quickstart against the bundled emulator"
	@echo "make check       # the inner loop: lint, type check and every test that needs no CLI and no release build"
	@echo "make test        # lint, type check, then every tier's tests in one run, each step timed (what CI runs)"
	@echo "make test-cli    # the real-CLI scenarios"
	@echo "make test-release  # upgrades from past releases, generated SDKs, built artifacts, the fault campaign"
	@echo "make acceptance  # the acceptance tests against the real Together API (TOGETHER_RL_ACC=1 and a key; billed: docs/releasing.md)"
	@echo "make typecheck   # mypy --strict on a user program against the public Args (tests/typing; part of make test)"
	@echo "make cli         # provide the pinned Pulumi CLI (scripts/pulumi-cli.sh) and print its folder"
	@echo "make sdk         # regenerate sdk/{python,nodejs,go,java,dotnet} from the plugin's schema (scripts/gen-sdk.sh)"
	@echo "make dist        # a release's artifacts in dist/: wheel, sdist, plugin archives, the SDKs' packages, SHA256SUMS"
	@echo "make yaml-host   # provide the pinned Pulumi YAML language host (scripts/pulumi-yaml.sh) and print its folder"
	@echo "make bench       # how the provider waits (overshoot, requests, 2 + 16 / 4 + 20 convergence) next to the together SDK"
	@echo "make crashpoints # a one-resource up killed right before and after each create journal write, per store, then recover + up, judged"
	@echo "make chaos       # seeded fault campaign: 50 stacks up + destroy under injected faults (+2 via the CLI, +3 runner, +3 deadline cases), audited"
	@echo "make lint        # ruff"
	@echo "make mypy        # mypy: the package at its defaults, the core (resources, client, journal ...) as --strict"
	@echo "make importtime  # import cost of pulumi_together_rl next to the official together SDK"

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"

# --compile-bytecode: every provider, program and language host is a fresh Python process, and where the environment
# sets PYTHONDONTWRITEBYTECODE none of them would ever find its dependencies compiled (seconds per pulumi command).
# UV_PYTHON: the machine's optimized build of the Python version uv picks, where uv would take another build of
# it (scripts/venv-python.sh says why; it prints nothing otherwise, and keeps a UV_PYTHON of yours).
sync: uv
	@python="$$(UV="$(UV)" bash scripts/venv-python.sh)"; if [ -n "$$python" ]; then export UV_PYTHON="$$python"; fi; \
	echo "$${UV_PYTHON:+UV_PYTHON=$$UV_PYTHON }$(UV) sync --frozen --compile-bytecode"; \
	$(UV) sync --frozen --compile-bytecode

cli:
	@bash scripts/pulumi-cli.sh

# The checked-in SDKs of the plugin face; tests/e2e/test_generated_sdks.py fails when they are out of date.
sdk:
	@bash scripts/gen-sdk.sh

yaml-host:
	@bash scripts/pulumi-yaml.sh

# Every artifact of a release, into dist/ (scripts/dist.py; docs/releasing.md): what the release workflow
# publishes, and what the release tier's artifact tests install.
dist: sync
	@$(UV) run --frozen python scripts/dist.py

# No dependency on sync: the script first provides the Pulumi CLI (or says how to get it), then syncs.
demo:
	@bash scripts/demo.sh

# The tiers (scripts/tiers.sh, docs/development.md): check is the inner loop (lint, type check, the tests that
# need neither the CLI nor a release build); test-cli the real-CLI scenarios; test-release upgrades, SDKs,
# artifacts and the fault campaign. The CLI comes from scripts/pulumi-cli.sh (found, cached, installed or built);
# where it cannot, the tests that need it are skipped with its reason, except under TOGETHER_RL_REQUIRE_CLI=1
# (CI), where any skipped test fails the run. PYTEST_ARGS goes to every pytest run.
check: sync
	@UV="$(UV)" bash scripts/tiers.sh check

test-cli: sync
	@UV="$(UV)" bash scripts/tiers.sh cli

test-release: sync
	@UV="$(UV)" bash scripts/tiers.sh release

# The lint and type check, then every tier's tests in one run (scripts/tiers.sh all), each step's time printed at the
# end: the README's test command, and what CI runs.
test: sync
	@UV="$(UV)" bash scripts/tiers.sh all

# The acceptance tier (docs/releasing.md): acceptance/ against the API of TOGETHER_API_KEY (TOGETHER_BASE_URL, default
# the real one), only with TOGETHER_RL_ACC=1; priced against TOGETHER_RL_ACC_MAX_USD first, swept before and after.
# Never part of make test, whose release tier runs it against the emulator (tests/e2e/test_acceptance_tier.py).
acceptance: sync
	@$(UV) run --frozen python scripts/acceptance.py

# The typing tests alone (make test runs them too): the package's py.typed and annotations, as a user's mypy sees them.
typecheck: sync
	$(UV) run --frozen pytest tests/typing $(PYTEST_ARGS)

# mypy, configured in pyproject.toml ([tool.mypy]): the whole package at mypy's defaults, the core as --strict.
.PHONY: mypy
mypy: sync
	$(UV) run --frozen mypy

lint: sync
	$(UV) run --frozen ruff check provider harness tests scripts examples acceptance
	$(UV) run --frozen ruff format --check provider harness tests scripts examples acceptance

format: sync
	$(UV) run --frozen ruff format provider harness tests scripts examples acceptance
	$(UV) run --frozen ruff check --fix provider harness tests scripts examples acceptance

bench: sync
	$(UV) run --frozen python scripts/bench_waits.py

# The CLI cycles run with the CLI that scripts/pulumi-cli.sh provides; without one they are skipped.
chaos: sync
	@bin="$$(bash scripts/pulumi-cli.sh)" || { bin=""; echo "make chaos: no Pulumi CLI; the CLI cycles will not run" >&2; }; \
	TOGETHER_RL_PULUMI_BIN="$$bin" $(UV) run --frozen python scripts/chaos.py --cycles 50 --cli-cycles 2 --runner-cycles 3 --deadline-cycles 3 $(CHAOS_ARGS)

# The crash-point enumeration (harness/crashpoints.py, docs/development.md "Crash points"): every write of a create on
# each store, the real provider and CLI SIGKILLed there; CRASHPOINTS_ARGS narrows it (--stores s3 --ks 6,7).
crashpoints: sync
	@bin="$$(bash scripts/pulumi-cli.sh)" || { echo "make crashpoints: no Pulumi CLI" >&2; exit 2; }; \
	TOGETHER_RL_PULUMI_BIN="$$bin" $(UV) run --frozen python -m harness.crashpoints $(CRASHPOINTS_ARGS)

importtime: sync
	$(UV) run --frozen python scripts/importtime.py

clean:
	rm -rf .venv .pytest_cache .ruff_cache dist
