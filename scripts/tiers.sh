#!/usr/bin/env bash
# The test tiers (docs/development.md), each on several pytest-xdist workers:
#   check    lint (ruff check, ruff format --check), the package's type check (mypy), and every test that needs
#            neither the Pulumi CLI nor a release build: the inner loop;
#   cli      the real-CLI scenarios (the CLI from scripts/pulumi-cli.sh);
#   release  upgrades from past releases, generated SDKs, built artifacts, the fault campaign;
#   all      the lint and type check, then every tier's tests in one pool of TEST_WORKERS workers (tests/conftest.py
#            orders them: the long ones first, the check tier's short ones filling in at the end); each step's time
#            printed at the end; fails if either failed (both still run); meanwhile what the release tier uses
#            (the store servers, the SDK builds) is built or installed in the background (see below).
# PYTEST_ARGS is passed to every pytest run; CHECK_WORKERS, CLI_WORKERS, RELEASE_WORKERS and TEST_WORKERS set the
# workers.
set -uo pipefail
cd "$(dirname "$0")/.."
# Bytecode is written during the tiers even where the environment says not to (PYTHONDONTWRITEBYTECODE): every
# pulumi command starts several Python processes, and pytest rewrites every test module in every worker; compiling
# all of it again in each costs more than the tests (measured: a CLI test's CPU time halves). The caches go to the
# gitignored __pycache__ folders and the venv; a changed source is recompiled as always.
unset PYTHONDONTWRITEBYTECODE
read -r -a UV <<<"${UV:-uv}" # `uv`, or `python3 -m uv` where uv is not on PATH (the Makefile's choice)
PYTEST=("${UV[@]}" run --frozen pytest -p no:cacheprovider)
read -r -a EXTRA <<<"${PYTEST_ARGS:-}"

cli() {
    # The CLI is provided once, before any worker starts (make test-cli hands its folder to every test).
    if [ -z "${TOGETHER_RL_PULUMI_BIN+x}" ]; then
        TOGETHER_RL_PULUMI_BIN="$(bash scripts/pulumi-cli.sh)" || {
            TOGETHER_RL_PULUMI_BIN=""
            echo "tiers: no Pulumi CLI; the tests that need it will say why" >&2
        }
        export TOGETHER_RL_PULUMI_BIN
    fi
}

tier() {
    case "$1" in
    lint)
        "${UV[@]}" run --frozen ruff check provider harness tests scripts examples acceptance &&
            "${UV[@]}" run --frozen ruff format --check provider harness tests scripts examples acceptance &&
            "${UV[@]}" run --frozen mypy
        ;;
    check)
        tier lint && "${PYTEST[@]}" -m "not cli and not release" -n "${CHECK_WORKERS:-6}" "${EXTRA[@]}"
        ;;
    cli)
        cli
        "${PYTEST[@]}" -m "cli and not release" -n "${CLI_WORKERS:-3}" "${EXTRA[@]}"
        ;;
    release)
        cli
        "${PYTEST[@]}" -m "release" -n "${RELEASE_WORKERS:-3}" "${EXTRA[@]}"
        ;;
    tests)
        cli
        # One test at a time to a worker that is free (pytest-xdist would otherwise hand each worker a contiguous
        # quarter of its share at the start, and one worker would get every long test of the order).
        "${PYTEST[@]}" -n "${TEST_WORKERS:-5}" --maxschedchunk 1 "${EXTRA[@]}"
        ;;
    *)
        echo "tiers: unknown tier $1 (lint, check, cli, release, tests, all)" >&2
        return 2
        ;;
    esac
}

if [ "${1:-all}" != all ]; then
    tier "$1"
    exit $?
fi

# The release tier's store tests run fake-gcs-server (a Go build, about 2 minutes on a fresh machine) and Azurite
# (an npm install, about half a minute); its SDK tests build the SDK generators (scripts/gen-sdk.sh: minutes from a
# cold Go build cache) and build the Go and Java SDKs (harness/sdk_builds.py: many minutes with cold Go and Maven
# caches, seconds warm; docs/plugin.md). These are started here, in the background at the lowest CPU priority, so
# that the builds take the time the tests leave idle instead of adding to the run (tests/conftest.py orders the
# tests that use them after the CLI scenarios); a test that needs one still runs its script, which waits for this
# one (a lock) or finds it cached. A failure here is the tests' to
# report: the same script then says why.
ahead_log="$(mktemp)"
ahead_sdks="$(mktemp -d)"
(
    # Each runs whatever the others did; the status is the first failure's.
    failed=0
    step() { "$@" || { rc=$?; [ "$failed" -ne 0 ] || failed=$rc; }; }
    step nice -n 19 bash scripts/fake-gcs-server.sh >/dev/null
    step nice -n 19 bash scripts/azurite.sh >/dev/null
    step nice -n 19 bash scripts/gen-sdk.sh --out "$ahead_sdks"
    step nice -n 19 "${UV[@]}" run --frozen python -m harness.sdk_builds warm
    exit "$failed"
) 2>"$ahead_log" &
ahead=$!

summary=()
status=0
started=$SECONDS
for name in lint tests; do
    begin=$SECONDS
    echo "== tier $name" >&2
    tier "$name"
    code=$?
    [ "$code" -eq 0 ] || status=1
    summary+=("$(printf '%-8s %4d s  %s' "$name" $((SECONDS - begin)) "$([ "$code" -eq 0 ] && echo passed || echo "FAILED ($code)")")")
done
wait "$ahead" || { echo "tiers: providing the store tests' servers or the SDK builds ahead failed:" >&2; cat "$ahead_log" >&2; }
rm -rf "$ahead_log" "$ahead_sdks"
echo
echo "tiers:"
printf '  %s\n' "${summary[@]}"
printf '  %-8s %4d s\n' total $((SECONDS - started))
exit "$status"
