#!/usr/bin/env bash
# Provides the pinned Azurite (the Azure Storage emulator, npm package `azurite`) and prints the path of its Blob
# service's entry point, which node runs. Progress goes to stderr, the path alone to stdout:
#
#     node "$(bash scripts/azurite.sh)" --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence --disableTelemetry
#
# The pinned version lives in one place: scripts/azurite/package.json, with every package of the install locked
# (and checked by its integrity hash) in scripts/azurite/package-lock.json. Another Azurite on PATH is not used. It is
# installed from the npm registry once (`npm ci`, about 35 s on 2 cores; a few ms once installed) into
# $TOGETHER_RL_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl)/azurite/<hash of both files>/,
# shared by every clone on the machine; a change of either file installs a new one. No install script is run
# (--ignore-scripts): the Blob service needs none.
#
# Exit status 3: it cannot be provided here (no node or npm, or the install failed); the reason is on stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PACKAGE_DIR="$HERE/azurite"
CACHE_DIR="${TOGETHER_RL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-together-rl}"
# The Blob service alone: the store tests need no queue and no table.
ENTRY="node_modules/azurite/dist/src/blob/main.js"

say() { printf 'azurite: %s\n' "$*" >&2; }

HASH="$(cat "$PACKAGE_DIR/package.json" "$PACKAGE_DIR/package-lock.json" | sha256sum | cut -c1-16)"
PREFIX="$CACHE_DIR/azurite/$HASH"
if [ -f "$PREFIX/$ENTRY" ]; then
    echo "$PREFIX/$ENTRY"
    exit 0
fi
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || { say "cannot install Azurite: $tool is not installed (https://nodejs.org/; it needs the npm registry)"; exit 3; }
done
# One install at a time per cache (xdist workers, and tiers.sh providing it ahead): the others wait, then reuse it.
mkdir -p "$CACHE_DIR/azurite"
exec 9>"$CACHE_DIR/azurite/.lock"
if ! flock -n 9; then
    say "another process is installing Azurite; waiting for it"
    flock 9
fi
if [ ! -f "$PREFIX/$ENTRY" ]; then
    say "installing Azurite (scripts/azurite/package-lock.json) with node $(node --version) into $PREFIX"
    start=$SECONDS
    stage="$(mktemp -d "$CACHE_DIR/azurite/.stage.XXXXXX")"
    cp "$PACKAGE_DIR/package.json" "$PACKAGE_DIR/package-lock.json" "$stage/"
    (cd "$stage" && npm ci --ignore-scripts --omit=dev --no-audit --no-fund --loglevel=error >&2) \
        || { rm -rf "$stage"; say "the install of Azurite failed"; exit 3; }
    [ -f "$stage/$ENTRY" ] || { rm -rf "$stage"; say "the installed Azurite has no $ENTRY"; exit 3; }
    rm -rf "$PREFIX"
    mv "$stage" "$PREFIX"
    say "installed in $((SECONDS - start)) s"
fi
echo "$PREFIX/$ENTRY"
