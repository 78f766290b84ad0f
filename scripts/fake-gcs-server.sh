#!/usr/bin/env bash
# Provides the pinned fake-gcs-server (a Google Cloud Storage server for tests, github.com/fsouza/fake-gcs-server)
# and prints the path of its binary. Progress goes to stderr, the path alone to stdout:
#
#     "$(bash scripts/fake-gcs-server.sh)" -backend memory -scheme http -host 127.0.0.1 -port 4443
#
# The pinned version lives in one place: the github.com/fsouza/fake-gcs-server requirement of
# scripts/fake-gcs-server/go.mod, whose go.sum checks every module of the build. Another fake-gcs-server on PATH is
# not used: the store tests hold one version to what they found. The binary is built from the Go module proxy once
# (about 2 minutes on 2 cores with empty Go caches, most of it fetching modules; a few ms once built) into
# $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl)/fake-gcs-server/<hash of go.mod
# and go.sum>/, shared by every clone on the machine; a change of either file builds a new one.
#
# Exit status 3: it cannot be provided here (no Go, or the build failed); the reason is on stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULE_DIR="$HERE/fake-gcs-server"
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"

say() { printf 'fake-gcs-server: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi
HASH="$(cat "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" | sha256sum | cut -c1-16)"
PREFIX="$CACHE_DIR/fake-gcs-server/$HASH"
TOOL="$PREFIX/fake-gcs-server"
if [ -x "$TOOL" ]; then
    echo "$TOOL"
    exit 0
fi
command -v go >/dev/null 2>&1 || { say "cannot build fake-gcs-server: Go is not installed (https://go.dev/dl/; it needs the Go module proxy)"; exit 3; }
# One build at a time per cache (xdist workers, and tiers.sh providing it ahead): the others wait, then reuse it.
mkdir -p "$CACHE_DIR/fake-gcs-server"
exec 9>"$CACHE_DIR/fake-gcs-server/.lock"
if ! flock -n 9; then
    say "another process is building fake-gcs-server; waiting for it"
    flock 9
fi
if [ ! -x "$TOOL" ]; then
    say "building fake-gcs-server (scripts/fake-gcs-server/go.mod) with $(go version | cut -d' ' -f3) into $PREFIX"
    start=$SECONDS
    stage="$(mktemp -d "$CACHE_DIR/fake-gcs-server/.stage.XXXXXX")"
    # -mod=readonly: go.mod and go.sum are used as they are, never rewritten. -s -w: no symbol tables (a smaller
    # binary; nobody debugs it here).
    (cd "$MODULE_DIR" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -ldflags "-s -w" \
        -o "$stage/fake-gcs-server" github.com/fsouza/fake-gcs-server >&2) \
        || { rm -rf "$stage"; say "the build of fake-gcs-server failed"; exit 3; }
    rm -rf "$PREFIX"
    mv "$stage" "$PREFIX"
    say "built in $((SECONDS - start)) s"
fi
echo "$TOOL"
