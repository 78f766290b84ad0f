#!/usr/bin/env bash
# Generates the checked-in SDKs of the provider plugin (package together-rl) from its schema: sdk/python
# (pulumi_together_rl_sdk) and sdk/nodejs (@pulumi-together-rl/sdk). Progress goes to stderr.
#
#     scripts/gen-sdk.sh                 # replaces sdk/python and sdk/nodejs (what `make sdk` runs)
#     scripts/gen-sdk.sh --out DIR       # writes DIR/python and DIR/nodejs instead (the up-to-date test)
#
# `pulumi package gen-sdk` cannot do it here: it hands generation to a language host, and this project's
# machines have none that generates (see scripts/pulumi-cli/gen-sdk/main.go). So this script builds that small
# Go command, which calls the same generators (pkg/v3 at the pinned CLI's version, scripts/pulumi-cli/go.mod),
# once into $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl)/gen-sdk/<hash of its
# source, go.mod and go.sum>/ (2-3 minutes on 2 cores from a cold Go build cache, under one once
# scripts/pulumi-cli.sh has built the CLI; rebuilt when any of the three changes), writes the schema with the
# repository's venv (pulumi_together_rl.plugin.package_schema) and runs the command.
#
# Exit status 3: the generator cannot be provided here (no Go, or its build failed); 1: any other failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
MODULE_DIR="$HERE/pulumi-cli"
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"
OUT="$ROOT/sdk"

say() { printf 'gen-sdk: %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || { say "--out needs a folder"; exit 2; }; OUT="$2"; shift 2 ;;
        --out=*) OUT="${1#--out=}"; shift ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 0 ;;
        *) say "unknown argument '$1' (expected --out DIR)"; exit 2 ;;
    esac
done

# ------------------------------------------------------------------------------------- the Go command
HASH="$(cat "$MODULE_DIR/gen-sdk/main.go" "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" | sha256sum | cut -c1-16)"
PREFIX="$CACHE_DIR/gen-sdk/$HASH"
TOOL="$PREFIX/gen-sdk"
if [ ! -x "$TOOL" ]; then
    command -v go >/dev/null 2>&1 || {
        say "cannot build the SDK generator: Go is not installed (https://go.dev/dl/; it needs the Go module proxy)"
        exit 3
    }
    # One build at a time per cache: the others wait, then reuse it.
    mkdir -p "$CACHE_DIR/gen-sdk"
    exec 9>"$CACHE_DIR/gen-sdk/.lock"
    if ! flock -n 9; then
        say "another process is building the SDK generator; waiting for it"
        flock 9
    fi
    if [ ! -x "$TOOL" ]; then
        say "building the SDK generator (scripts/pulumi-cli/gen-sdk) with $(go version | cut -d' ' -f3) into $PREFIX"
        start=$(date +%s)
        stage="$(mktemp -d "$CACHE_DIR/gen-sdk/.stage.XXXXXX")"
        # -mod=readonly: the repository's go.mod and go.sum are used as they are, never rewritten.
        (cd "$MODULE_DIR" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$stage/gen-sdk" ./gen-sdk >&2) \
            || { rm -rf "$stage"; say "the build of the SDK generator failed"; exit 3; }
        rm -rf "$PREFIX"
        mv "$stage" "$PREFIX"
        say "built in $(($(date +%s) - start)) s"
    fi
    exec 9>&-
fi

# ------------------------------------------------------------------------------------------ the schema
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SCHEMA_CODE='from pulumi_together_rl.plugin.package_schema import schema_text; print(schema_text())'
if [ -x "$ROOT/.venv/bin/python" ]; then
    (cd "$ROOT" && .venv/bin/python -c "$SCHEMA_CODE") >"$WORK/schema.json"
elif command -v uv >/dev/null 2>&1; then
    (cd "$ROOT" && uv run --frozen python -c "$SCHEMA_CODE") >"$WORK/schema.json"
else
    say "no .venv and no uv: run \`make sync\` first"
    exit 1
fi

# -------------------------------------------------------------------------------------------- the SDKs
for language in python nodejs; do
    "$TOOL" --schema "$WORK/schema.json" --language "$language" --out "$WORK/$language"
done
mkdir -p "$OUT"
for language in python nodejs; do
    rm -rf "${OUT:?}/$language"
    mv "$WORK/$language" "$OUT/$language"
    say "wrote $OUT/$language"
done
