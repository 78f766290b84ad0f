#!/usr/bin/env bash
# Provides the pinned actionlint (the GitHub Actions workflow linter) and prints the path of its binary.
# Progress goes to stderr, the path alone to stdout:
#
#     "$(bash scripts/actionlint.sh)" .github/workflows/release.yml
#
# The pinned version lives in one place: the github.com/rhysd/actionlint requirement of scripts/actionlint/go.mod,
# whose go.sum checks every module of the build. Another actionlint on PATH is not used: another version lints
# differently. The binary is built from the Go module proxy once (about a minute on 2 cores with a cold Go build
# cache) into $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl)/actionlint/<hash of
# go.mod and go.sum>/, shared by every clone on the machine; a change of either file builds a new one.
#
# Exit status 3: it cannot be provided here (no Go, or the build failed); the reason is on stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULE_DIR="$HERE/actionlint"
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"

say() { printf 'actionlint: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi
HASH="$(cat "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" | sha256sum | cut -c1-16)"
PREFIX="$CACHE_DIR/actionlint/$HASH"
TOOL="$PREFIX/actionlint"
if [ -x "$TOOL" ]; then
    echo "$TOOL"
    exit 0
fi
command -v go >/dev/null 2>&1 || { say "cannot build actionlint: Go is not installed (https://go.dev/dl/; it needs the Go module proxy)"; exit 3; }
# One build at a time per cache: the others wait, then reuse it.
mkdir -p "$CACHE_DIR/actionlint"
exec 9>"$CACHE_DIR/actionlint/.lock"
if ! flock -n 9; then
    say "another process is building actionlint; waiting for it"
    flock 9
fi
if [ ! -x "$TOOL" ]; then
    say "building actionlint (scripts/actionlint/go.mod) with $(go version | cut -d' ' -f3) into $PREFIX"
    stage="$(mktemp -d "$CACHE_DIR/actionlint/.stage.XXXXXX")"
    # -mod=readonly: go.mod and go.sum are used as they are, never rewritten.
    (cd "$MODULE_DIR" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$stage/actionlint" github.com/rhysd/actionlint/cmd/actionlint >&2) \
        || { rm -rf "$stage"; say "the build of actionlint failed"; exit 3; }
    rm -rf "$PREFIX"
    mv "$stage" "$PREFIX"
fi
echo "$TOOL"
