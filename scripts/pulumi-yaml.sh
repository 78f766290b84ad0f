#!/usr/bin/env bash
# Provides the pinned Pulumi YAML language host and prints the folder holding `pulumi-language-yaml` (put it on
# PATH beside the CLI: the CLI starts the host of `runtime: yaml` from PATH). Progress goes to stderr, the folder
# alone to stdout:
#
#     PATH="$(scripts/pulumi-yaml.sh --beside "$(scripts/pulumi-cli.sh)"):$PATH" pulumi up
#
# In order, the first that works:
#   1. a `pulumi-language-yaml` on PATH (any version);
#   2. the pinned version, cached in $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl),
#      outside the repository so that every clone on the machine shares it;
#   3. a build from the Go module proxy into that cache (a few minutes on 2 cores, once);
#   4. else one message naming the ways to get it.
#
# The pinned version lives in one place: the pulumi-yaml requirement of scripts/pulumi-yaml/go.mod, a module of
# its own because pulumi-yaml does not compile against the pkg/v3 and sdk/v3 of the pinned CLI (see its comment).
# PULUMI_YAML_FORCE=cache|build skips the earlier steps.
#
# --beside DIR (DIR: the folder of `pulumi`, what scripts/pulumi-cli.sh prints) puts the host next to that CLI
# and prints DIR instead. The CLI looks for a bundled plugin, which the YAML host is, next to its own binary;
# found on PATH anywhere else it warns `using pulumi-language-yaml from $PATH at ...` at every lookup (three
# times per command). Only a CLI this cache holds (scripts/pulumi-cli.sh's copy) gets a link; a CLI installed
# elsewhere is left alone (the official one ships the host beside itself).
#
#     PATH="$(scripts/pulumi-yaml.sh --beside "$(scripts/pulumi-cli.sh)"):$PATH" pulumi up
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULE_DIR="$HERE/pulumi-yaml"
PACKAGE="github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
VERSION="$(sed -n 's|^[[:space:]]*github.com/pulumi/pulumi-yaml v\([0-9][0-9.]*\)\([[:space:]].*\)\{0,1\}$|\1|p' "$MODULE_DIR/go.mod" | head -n 1)"
[ -n "$VERSION" ] || { echo "pulumi-yaml.sh: no pulumi-yaml version in $MODULE_DIR/go.mod" >&2; exit 1; }
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"
PREFIX="$CACHE_DIR/pulumi-yaml/v$VERSION"
FORCE="${PULUMI_YAML_FORCE:-}"

say() { printf 'pulumi-yaml: %s\n' "$*" >&2; }

BESIDE=""
case "${1:-}" in
    --beside) BESIDE="${2:?--beside needs the folder of pulumi}" ;;
    "") ;;
    *) say "unknown argument '$1' (expected --beside DIR, or nothing)"; exit 1 ;;
esac

# found DIR: the host is in DIR. Prints the folder to put on PATH: DIR, or the --beside folder once the host is
# next to the CLI there.
found() {
    local host="$1/pulumi-language-yaml" cli_dir
    if [ -z "$BESIDE" ]; then
        echo "$1"
        return
    fi
    cli_dir="$(cd "$BESIDE" && pwd -P)"
    if [ -x "$cli_dir/pulumi-language-yaml" ]; then
        echo "$cli_dir"
        return
    fi
    case "$cli_dir/" in
        "$(mkdir -p "$CACHE_DIR" && cd "$CACHE_DIR" && pwd -P)"/*)
            ln -sfn "$host" "$cli_dir/pulumi-language-yaml"
            say "linked it next to the CLI in $cli_dir (the CLI warns about a YAML host found elsewhere)"
            echo "$cli_dir"
            ;;
        *)
            say "left $cli_dir alone (not a CLI of $CACHE_DIR): the CLI will warn that it uses the host from PATH"
            echo "$1"
            ;;
    esac
}

case "$FORCE" in
    "" | cache | build) ;;
    *) say "PULUMI_YAML_FORCE is '$FORCE': expected cache or build (or nothing)"; exit 1 ;;
esac

# A complete install: the host, executable.
complete() { [ -f "$1/pulumi-language-yaml" ] && [ -x "$1/pulumi-language-yaml" ]; }

# ------------------------------------------------------------------------------------------ 1. on PATH
if [ -z "$FORCE" ] && command -v pulumi-language-yaml >/dev/null 2>&1; then
    say "using pulumi-language-yaml from PATH ($(command -v pulumi-language-yaml))"
    found "$(dirname "$(command -v pulumi-language-yaml)")"
    exit 0
fi

# ------------------------------------------------------------------------------------------- 2. cached
if [ -z "$FORCE" ] || [ "$FORCE" = cache ]; then
    if complete "$PREFIX/bin"; then
        say "using the cached pulumi-language-yaml v$VERSION ($PREFIX/bin)"
        found "$PREFIX/bin"
        exit 0
    fi
    [ "$FORCE" != cache ] || { say "no complete cached copy in $PREFIX"; exit 1; }
fi

# One provider at a time per cache (CI and a developer's `make test` may race): the others wait, then reuse.
mkdir -p "$CACHE_DIR/pulumi-yaml"
exec 9>"$CACHE_DIR/pulumi-yaml/.lock"
if ! flock -n 9; then
    say "another process is providing pulumi-language-yaml v$VERSION; waiting for it"
    flock 9
fi
if [ "$FORCE" != build ] && complete "$PREFIX/bin"; then
    say "using the cached pulumi-language-yaml v$VERSION ($PREFIX/bin)"
    found "$PREFIX/bin"
    exit 0
fi
# The stage is in the cache folder, on the same file system as the copy it becomes: one rename publishes it.
STAGE="$(mktemp -d "$CACHE_DIR/pulumi-yaml/.stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

# -------------------------------------------------------------------------------------- 3. Go build
if command -v go >/dev/null 2>&1; then
    say "building pulumi-language-yaml v$VERSION ($PACKAGE) from the Go module proxy with $(go version | cut -d' ' -f3) (a few minutes the first time)"
    start=$(date +%s)
    mkdir -p "$STAGE/root/bin"
    # A copy of the module: go may touch go.sum, and the repository stays clean.
    cp -R "$MODULE_DIR" "$STAGE/module"
    # The release flags (.goreleaser.yml upstream): no cgo, -s -w, the tag in pkg/version.Version.
    if (cd "$STAGE/module" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod" go build -trimpath \
        -ldflags "-w -s -X github.com/pulumi/pulumi-yaml/pkg/version.Version=v$VERSION" \
        -o "$STAGE/root/bin/pulumi-language-yaml" "$PACKAGE" >&2); then
        say "built in $(($(date +%s) - start)) s"
        rm -rf "$PREFIX"
        mv "$STAGE/root" "$PREFIX"
        complete "$PREFIX/bin" || { say "the new copy in $PREFIX is incomplete"; exit 1; }
        say "pulumi-language-yaml v$VERSION is ready in $PREFIX/bin"
        found "$PREFIX/bin"
        exit 0
    fi
    say "the Go build failed (its output is above)"
fi

cat >&2 <<EOF
pulumi-yaml: cannot provide the Pulumi YAML language host v$VERSION: no pulumi-language-yaml on PATH, no cached
copy in $PREFIX, and no Go build (Go is not installed, or it cannot reach a Go module proxy). Do one of:
  - install the official Pulumi CLI (curl -fsSL https://get.pulumi.com | sh): its folder holds pulumi-language-yaml,
    put it on PATH;
  - put a pulumi-language-yaml from https://github.com/pulumi/pulumi-yaml/releases on PATH;
  - install Go (https://go.dev/dl/) with access to the Go module proxy, then run this again: it builds the host.
EOF
exit 1
