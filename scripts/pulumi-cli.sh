#!/usr/bin/env bash
# Provides the pinned Pulumi CLI and prints the folder holding `pulumi` (put it first on PATH). Progress goes to
# stderr, the folder alone to stdout:
#
#     PATH="$(scripts/pulumi-cli.sh):$PATH" pulumi version
#
# In order, the first that works:
#   1. a `pulumi` on PATH at least the minimum version below;
#   2. the pinned version, cached in $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl),
#      outside the repository so that every clone on the machine shares it;
#   3. the release archive of the pinned version (get.pulumi.com/releases/sdk), only when PULUMI_CLI_SHA256 gives
#      its SHA-256 (from the release's pulumi-<version>-checksums.txt): what does not match is refused, and
#      nothing unchecked is run. The repository pins no checksum of its own: none could be had where the version
#      was pinned, and a guessed one is worse than none;
#   4. a build from the Go module proxy into that cache (several minutes on 2 cores, once): go.sum checks every
#      module it builds from;
#   5. else one message naming the ways to get it.
#
# The pinned version lives in one place: the pkg/v3 requirement of scripts/pulumi-cli/go.mod.
# PULUMI_CLI_FORCE=cache|install|build skips the earlier steps (a test of this script uses it), and
# PULUMI_CLI_RELEASES_URL replaces the folder the release archive is downloaded from (a mirror; a test's file://).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULE_DIR="$HERE/pulumi-cli"
# The oldest CLI this project is tested against: an older one on PATH is passed over for the pinned build.
MIN_VERSION="3.250.0"
VERSION="$(sed -n 's|^[[:space:]]*github.com/pulumi/pulumi/pkg/v3 v\([0-9][0-9.]*\)\([[:space:]].*\)\{0,1\}$|\1|p' "$MODULE_DIR/go.mod" | head -n 1)"
[ -n "$VERSION" ] || { echo "pulumi-cli.sh: no pkg/v3 version in $MODULE_DIR/go.mod" >&2; exit 1; }
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"
PREFIX="$CACHE_DIR/pulumi-cli/v$VERSION"
FORCE="${PULUMI_CLI_FORCE:-}"

say() { printf 'pulumi-cli: %s\n' "$*" >&2; }

# version_ge A B: A >= B, both X.Y.Z.
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

# The repository's own language host is stamped with the hash of its source: a cached copy built from older
# source is rebuilt (a host from upstream or from a release archive has no stamp and is kept).
HOST_SRC="$MODULE_DIR/pulumi-language-python/main.go"
HOST_STAMP=".pulumi-language-python.source-sha256"
sha256_of() { if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1"; else shasum -a 256 "$1"; fi; }
host_hash() { sha256_of "$HOST_SRC" | cut -d' ' -f1; }
host_current() { [ ! -f "$1/$HOST_STAMP" ] || [ "$(cat "$1/$HOST_STAMP")" = "$(host_hash)" ]; }

# A complete install: the CLI at the pinned version, the Python language host and both Python scripts.
complete() {
    local bin="$1"
    [ -x "$bin/pulumi" ] && [ -x "$bin/pulumi-language-python" ] && [ -x "$bin/pulumi-language-python-exec" ] \
        && [ -x "$bin/pulumi-resource-pulumi-python" ] && host_current "$bin" \
        && [ "$("$bin/pulumi" version 2>/dev/null)" = "v$VERSION" ]
}

# Rebuilds the repository's language host in place in a cached copy whose stamp is stale (seconds, not minutes).
refresh_host() {
    local bin="$1"
    [ -f "$bin/$HOST_STAMP" ] && ! host_current "$bin" && command -v go >/dev/null 2>&1 || return 1
    say "the cached Python language host was built from older source: rebuilding it"
    local work
    work="$(mktemp -d)"
    cp -R "$MODULE_DIR" "$work/module"
    (cd "$work/module" && GOFLAGS="${GOFLAGS:-} -mod=mod" go build -trimpath -tags osusergo,grpcnotrace \
        -ldflags "-w -s -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$VERSION" \
        -o "$work/pulumi-language-python" ./pulumi-language-python >&2) || { rm -rf "$work"; return 1; }
    mv "$work/pulumi-language-python" "$bin/pulumi-language-python"
    host_hash >"$bin/$HOST_STAMP"
    rm -rf "$work"
}

# ------------------------------------------------------------------------------------------ 1. on PATH
if [ -z "$FORCE" ] && command -v pulumi >/dev/null 2>&1; then
    found="$(pulumi version 2>/dev/null | sed 's/^v//')" || found=""
    if [ -n "$found" ] && version_ge "${found%%-*}" "$MIN_VERSION"; then
        say "using pulumi v$found from PATH ($(command -v pulumi))"
        dirname "$(command -v pulumi)"
        exit 0
    fi
    say "pulumi on PATH is v${found:-unknown}, older than $MIN_VERSION: providing v$VERSION instead"
fi

# ------------------------------------------------------------------------------------------- 2. cached
if [ -z "$FORCE" ] || [ "$FORCE" = cache ]; then
    if complete "$PREFIX/bin"; then
        say "using the cached pulumi v$VERSION ($PREFIX/bin)"
        echo "$PREFIX/bin"
        exit 0
    fi
    [ "$FORCE" != cache ] || { say "no complete cached copy in $PREFIX"; exit 1; }
fi

# One provider at a time per cache (CI and a developer's `make test` may race): the others wait, then reuse.
mkdir -p "$CACHE_DIR/pulumi-cli"
exec 9>"$CACHE_DIR/pulumi-cli/.lock"
if ! flock -n 9; then
    say "another process is providing pulumi v$VERSION; waiting for it"
    flock 9
fi
if [ "$FORCE" != build ] && [ "$FORCE" != install ] && { complete "$PREFIX/bin" || { refresh_host "$PREFIX/bin" && complete "$PREFIX/bin"; }; }; then
    say "using the cached pulumi v$VERSION ($PREFIX/bin)"
    echo "$PREFIX/bin"
    exit 0
fi
STAGE="$(mktemp -d "$CACHE_DIR/pulumi-cli/.stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

publish() {
    rm -rf "$PREFIX"
    mkdir -p "$(dirname "$PREFIX")"
    mv "$STAGE/root" "$PREFIX"
    complete "$PREFIX/bin" || { say "the new copy in $PREFIX is incomplete"; exit 1; }
    say "pulumi v$VERSION is ready in $PREFIX/bin"
    echo "$PREFIX/bin"
    exit 0
}

# ----------------------------------------------------------------------------------- 3. release archive
if [ -z "$FORCE" ] || [ "$FORCE" = install ]; then
    case "$(uname -s)-$(uname -m)" in
    Linux-x86_64 | Linux-amd64) platform=linux-x64 ;;
    Linux-aarch64 | Linux-arm64) platform=linux-arm64 ;;
    Darwin-x86_64) platform=darwin-x64 ;;
    Darwin-arm64) platform=darwin-arm64 ;;
    *) platform="" ;;
    esac
    archive="pulumi-v$VERSION-$platform.tar.gz"
    url="${PULUMI_CLI_RELEASES_URL:-https://get.pulumi.com/releases/sdk}/$archive"
    expected="$(printf '%s' "${PULUMI_CLI_SHA256:-}" | tr 'A-F' 'a-f')"
    if [ -z "$platform" ]; then
        say "no Pulumi release archive for $(uname -s) $(uname -m); trying the next way"
    elif [ -z "$expected" ]; then
        say "not downloading $archive: set PULUMI_CLI_SHA256 to its SHA-256 (pulumi-$VERSION-checksums.txt of the release) to use it; trying the next way"
    elif ! printf '%s' "$expected" | grep -Eqx '[0-9a-f]{64}'; then
        say "PULUMI_CLI_SHA256 is not a SHA-256 (64 hex digits): set it to the line for $archive in pulumi-$VERSION-checksums.txt"
        exit 1
    elif command -v curl >/dev/null 2>&1 \
        && curl -fsSL --connect-timeout 5 --max-time 300 -o "$STAGE/$archive" "$url" 2>/dev/null; then
        actual="$(sha256_of "$STAGE/$archive" | cut -d' ' -f1)"
        if [ "$actual" != "$expected" ]; then
            rm -f "$STAGE/$archive"
            say "refusing $url: its SHA-256 is $actual, not PULUMI_CLI_SHA256 ($expected). Check the value against pulumi-$VERSION-checksums.txt of the release, and where the download came from"
            exit 1
        fi
        say "$archive matches PULUMI_CLI_SHA256: unpacking it into $PREFIX"
        mkdir -p "$STAGE/root/bin"
        if tar -xzf "$STAGE/$archive" -C "$STAGE/root/bin" --strip-components=1 >&2; then
            publish
        fi
        say "$archive could not be unpacked; trying the next way"
    else
        say "$url does not answer; trying the next way"
    fi
    [ "$FORCE" != install ] || exit 1
fi

# -------------------------------------------------------------------------------------- 4. Go build
if command -v go >/dev/null 2>&1; then
    say "building pulumi v$VERSION from the Go module proxy with $(go version | cut -d' ' -f3) (several minutes the first time)"
    start=$(date +%s)
    mkdir -p "$STAGE/root/bin"
    # A copy of the wrapper module: go may touch go.sum, and the repository stays clean.
    cp -R "$MODULE_DIR" "$STAGE/module"
    cd "$STAGE/module"
    export GOFLAGS="${GOFLAGS:-} -mod=mod"
    # The release flags (.goreleaser.yml upstream).
    LDFLAGS="-w -s -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$VERSION"
    build() { go build -trimpath -tags osusergo,grpcnotrace -ldflags "$LDFLAGS" "$@"; }

    say "building the CLI (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)"
    build -o "$STAGE/root/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2

    # The upstream Python language host has no tags: its version is the pseudo-version of the release commit,
    # which the proxy reports as Origin.Hash where it records it. This machine's proxy refuses that module, so
    # where it cannot be had, the repository's own host (see its doc comment) is built instead.
    host_built=0
    info="$(go mod download -json "github.com/pulumi/pulumi/pkg/v3@v$VERSION" 2>/dev/null || true)"
    hash="$(printf '%s' "$info" | sed -n 's/.*"Hash": *"\([0-9a-f]\{40\}\)".*/\1/p' | head -n 1)"
    if [ -n "$hash" ]; then
        stamp="$(TZ=UTC date -d "$(printf '%s' "$info" | sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' | head -n 1)" +%Y%m%d%H%M%S)"
        pseudo="v3.0.0-$stamp-${hash:0:12}"
        if go get "github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3@$pseudo" >/dev/null 2>&1; then
            say "building the upstream Python language host ($pseudo)"
            build -o "$STAGE/root/bin/pulumi-language-python" github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 >&2 \
                && host_built=1
        fi
    fi
    if [ "$host_built" = 0 ]; then
        say "the upstream Python language host is not served by this Go proxy: building the repository's own (scripts/pulumi-cli/pulumi-language-python)"
        build -o "$STAGE/root/bin/pulumi-language-python" ./pulumi-language-python >&2
        host_hash >"$STAGE/root/bin/$HOST_STAMP"
    fi

    # The release ships these two scripts next to the binaries; they are in the sdk/v3 module zip.
    sdk_dir="$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)"
    install -m 0755 "$sdk_dir/python/cmd/pulumi-language-python-exec" "$STAGE/root/bin/"
    install -m 0755 "$sdk_dir/python/dist/pulumi-resource-pulumi-python" "$STAGE/root/bin/"
    say "built in $(($(date +%s) - start)) s"
    cd "$HERE"
    publish
fi

cat >&2 <<EOF
pulumi-cli: cannot provide the Pulumi CLI v$VERSION: no pulumi (>= $MIN_VERSION) on PATH, no cached copy in
$PREFIX, no checked release archive (PULUMI_CLI_SHA256), and Go is not installed. Do one of:
  - install the Pulumi CLI:  curl -fsSL https://get.pulumi.com | sh   (https://www.pulumi.com/docs/iac/download-install/)
  - give this machine internet access (get.pulumi.com) and set PULUMI_CLI_SHA256 to the SHA-256 of
    pulumi-v$VERSION-<os>-<arch>.tar.gz from the release's pulumi-$VERSION-checksums.txt, then run this again;
  - install Go (https://go.dev/dl/) with access to the Go module proxy, then run this again: it builds the CLI.
EOF
exit 1
