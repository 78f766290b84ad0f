#!/usr/bin/env bash
# Generates the checked-in SDKs of the provider plugin (package together-rl) from its schema: sdk/python
# (pulumi_together_rl_sdk), sdk/nodejs (@pulumi-together-rl/sdk), sdk/go (module github.com/<repository>/sdk/go),
# sdk/java (io.github.pulumitogetherrl:together-rl, build.gradle) and sdk/dotnet (PulumiTogetherRl.TogetherRl).
# Progress goes to stderr.
#
#     scripts/gen-sdk.sh                 # replaces sdk/<language> for every language (what `make sdk` runs)
#     scripts/gen-sdk.sh --out DIR       # writes DIR/<language> instead (the up-to-date test)
#
# `pulumi package gen-sdk` cannot do it here: it hands generation to a language host, and this project's
# machines have none that generates (see scripts/pulumi-cli/gen-sdk/main.go). So this script builds three small
# Go commands that call the same generators, once each into $TOGETHER_RL_CACHE_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl)/<command>/<hash of its source, go.mod and go.sum>/:
#   - gen-sdk (scripts/pulumi-cli/gen-sdk): Python, Node.js and Go, pkg/v3 at the pinned CLI's version
#     (scripts/pulumi-cli/go.mod);
#   - gen-sdk-java (scripts/gen-sdk-java): pulumi-java's generator (its version: that go.mod), beside that pkg/v3;
#   - gen-sdk-dotnet (scripts/gen-sdk-dotnet): pulumi-dotnet's generator (its version: that go.mod), beside it too.
# From a cold Go build cache that is minutes on 2 cores (2-3 for gen-sdk under one once scripts/pulumi-cli.sh has
# built the CLI, 15 s to 1 minute for each of the other two with it warm); each is rebuilt when its source, go.mod
# or go.sum changes. It writes the schema with the repository's venv (pulumi_together_rl.plugin.package_schema),
# runs the commands, and completes the Go SDK's go.mod and go.sum with `go mod tidy` (the Go module proxy).
#
# Exit status 3: the generator cannot be provided here (no Go, or its build failed); 1: any other failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
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

# ------------------------------------------------------------------------------------- the Go commands
# build_tool NAME MODULE_DIR PACKAGE: the command NAME built from the folder PACKAGE of the Go module MODULE_DIR,
# once into $CACHE_DIR/NAME/<hash of its source, go.mod and go.sum>/NAME (rebuilt when any of them changes);
# prints its path.
build_tool() {
    local name="$1" module="$2" package="$3" hash prefix tool stage start
    hash="$(cat "$module/$package"/*.go "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)"
    prefix="$CACHE_DIR/$name/$hash"
    tool="$prefix/$name"
    if [ ! -x "$tool" ]; then
        command -v go >/dev/null 2>&1 || {
            say "cannot build the SDK generator $name: Go is not installed (https://go.dev/dl/; it needs the Go module proxy)"
            exit 3
        }
        # One build at a time per cache: the others wait, then reuse it.
        mkdir -p "$CACHE_DIR/$name"
        exec 9>"$CACHE_DIR/$name/.lock"
        if ! flock -n 9; then
            say "another process is building the SDK generator $name; waiting for it"
            flock 9
        fi
        if [ ! -x "$tool" ]; then
            say "building the SDK generator $name with $(go version | cut -d' ' -f3) into $prefix"
            start=$(date +%s)
            stage="$(mktemp -d "$CACHE_DIR/$name/.stage.XXXXXX")"
            # -mod=readonly: the repository's go.mod and go.sum are used as they are, never rewritten.
            (cd "$module" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$stage/$name" "./$package" >&2) \
                || { rm -rf "$stage"; say "the build of the SDK generator $name failed"; exit 3; }
            rm -rf "$prefix"
            mv "$stage" "$prefix"
            say "built in $(($(date +%s) - start)) s"
        fi
        exec 9>&-
    fi
    echo "$tool"
}

# Python, Node.js and Go: pkg/v3's generators at the pinned CLI's version. Java and .NET: pulumi-java's and
# pulumi-dotnet's, each in a module of its own beside that pkg/v3 (each module's go.mod says why).
TOOL="$(build_tool gen-sdk "$HERE/pulumi-cli" gen-sdk)"
JAVA_TOOL="$(build_tool gen-sdk-java "$HERE/gen-sdk-java" .)"
DOTNET_TOOL="$(build_tool gen-sdk-dotnet "$HERE/gen-sdk-dotnet" .)"

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
LANGUAGES="python nodejs go java dotnet"
for language in python nodejs go; do
    "$TOOL" --schema "$WORK/schema.json" --language "$language" --out "$WORK/$language"
done
"$JAVA_TOOL" --schema "$WORK/schema.json" --out "$WORK/java"
"$DOTNET_TOOL" --schema "$WORK/schema.json" --logo "$ROOT/docs/logo.png" --out "$WORK/dotnet"
# The Go generator writes go.mod with its one requirement; `go mod tidy` adds the rest and go.sum, from the Go
# module proxy (or the module cache), as a Go module's release does. Deterministic for the same requirements.
(cd "$WORK/go" && GOFLAGS="${GOFLAGS:-} -mod=mod" go mod tidy >&2) || { say "go mod tidy of the Go SDK failed"; exit 1; }
mkdir -p "$OUT"
for language in $LANGUAGES; do
    rm -rf "${OUT:?}/$language"
    mv "$WORK/$language" "$OUT/$language"
    say "wrote $OUT/$language"
done
