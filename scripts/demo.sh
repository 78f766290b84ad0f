#!/usr/bin/env bash
# `make demo`: a real `pulumi up` of examples/quickstart against the bundled Together RL emulator, then a clean
# destroy. Offline: nothing leaves this machine, nothing is billed.
#
#   0. provides the pinned Pulumi CLI (scripts/pulumi-cli.sh)
#   1. sets up the venv (uv sync, from uv.lock)
#   2. starts the emulator on a free loopback port, with short but visible transition timings
#   3. points Pulumi at a local file backend inside the repo (.pulumi-state/<stack>/, git-ignored) and creates
#      a throwaway stack (passphrase secrets provider with a demo passphrase); the provider's create journal goes
#      to the run's temporary folder (its records are about the throwaway emulator's objects only)
#   4. sets together:baseUrl and together:apiKey (as a secret), runs `pulumi up --yes`, prints the outputs
#   5. runs `pulumi destroy --yes`, removes the stack, stops the emulator and cleans up, even when a step fails:
#      nothing of the run is left (no process, no stack file, no backend, no temporary folder, no journal record)
#
# One Ctrl-C: the terminal signals the whole foreground process group (make, this script, `pulumi`, and a `tee`
# the output is piped into), but not the emulator, which runs in a session of its own. `pulumi up` cancels as
# Pulumi does (the creates already started finish, a few seconds with the emulator's timings; nothing new
# starts), then cleanup destroys the stack, prints what the emulator still holds, and only then stops it.
#
# The Pulumi CLI comes from scripts/pulumi-cli.sh (PATH, the per-user cache, the official installer or a Go
# build); where none of those works it stops at once with exit status 1 and says what to install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf '\n==> %s\n' "$*"; }

# ---------------------------------------------------------------------------------------------- output
# The Ctrl-C that cancels the demo also ends the reader of a pipe its output may go to (`make demo 2>&1 | tee
# demo.log`). Every later write would then be a broken pipe, and SIGPIPE would end the cancelled `pulumi up`
# (its create left running, unknown to the destroy) and the cleanup (the emulator and the stack left behind).
# So both streams go through a relay that ignores those signals: it copies what it reads while its reader is
# there, then drains the rest (nobody is left to read it). It ends once everything the demo started has closed
# the stream; cleanup waits for it, so that nothing prints after `make demo` has returned.
relay() {
    trap '' INT TERM HUP PIPE
    cat 2>/dev/null || true
    exec cat >/dev/null
}
if [ /dev/stdout -ef /dev/stderr ]; then
    exec > >(relay) 2>&1 # one stream (a terminal, `2>&1`): one relay keeps the order of its lines
    RELAY_OUT=$!
    RELAY_ERR=$!
else
    exec > >(relay)
    RELAY_OUT=$!
    exec 2> >(relay >&2)
    RELAY_ERR=$!
fi

# ------------------------------------------------------------------------------------------ Pulumi CLI
# scripts/pulumi-cli.sh finds or provides the pinned CLI (PATH, per-user cache, installer, Go build) and prints
# its folder; it explains on stderr what it does, and what to install when it cannot.
say "providing the Pulumi CLI (scripts/pulumi-cli.sh)"
PULUMI_BIN="$(bash "$ROOT/scripts/pulumi-cli.sh")" || exit 1
PATH="$PULUMI_BIN:$PATH"
export PATH
echo "pulumi $(pulumi version) ($PULUMI_BIN)"

# ------------------------------------------------------------------------------------------- venv (uv)
# The Pulumi Python runtime's uv toolchain runs the `uv` executable, so uv must be on PATH, not only importable.
# Found on PATH, else where `uv run` says it is ($UV), else the one pip installed (installing it if need be).
if ! command -v uv >/dev/null 2>&1; then
    if [ -n "${UV:-}" ] && [ -x "${UV:-}" ]; then
        UV_BIN="$UV"
    else
        if ! python3 -c 'import uv' >/dev/null 2>&1; then
            say "installing uv with pip"
            # The uv this project is tested with (the Makefile's UV_VERSION), not whichever is newest.
            python3 -m pip install --quiet "uv==$(sed -n 's/^UV_VERSION := //p' "$ROOT/Makefile")"
        fi
        UV_BIN="$(python3 -c 'import uv; print(uv.find_uv_bin())')"
    fi
    PATH="$(dirname "$UV_BIN"):$PATH"
    export PATH
fi
say "syncing the venv (.venv) from uv.lock: the package and its emulator"
# Only what the demo runs (the package and its `emulator` extra), not the development tools (`make check` adds
# those); --inexact leaves a developer's already-synced tools in place. Each pulumi command starts Python
# processes: compiled once here.
uv sync --frozen --no-dev --extra emulator --inexact --compile-bytecode
PYTHON="$ROOT/.venv/bin/python"

# --------------------------------------------------------------------------------------------- cleanup
WORK="$(mktemp -d "${TMPDIR:-/tmp}/together-rl-demo.XXXXXX")"
STACK="demo-$(date +%Y%m%d%H%M%S)-$$"
STATE_DIR="$ROOT/.pulumi-state"
BACKEND_DIR="$STATE_DIR/$STACK" # one backend per run: runs never share (or delete) each other's state
STACK_CREATED=0
STACK_REMOVED=0
EMULATOR_PID=""
BASE_URL=""

# Every object the emulator holds, as one JSON line, then whether any is still active (exit status 1 if one is).
# The last step runs it, and so does cleanup after a failure or an interrupt, before it stops the emulator.
report_emulator() {
    "$PYTHON" - "$BASE_URL" <<'PY'
import json
import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1] + "/_emulator/state", timeout=10) as answer:
    state = json.load(answer)
gone = {"resource": ("STOPPING", "STOPPED", "ERROR"), "session": ("STOPPED", "EXPIRED", "ERROR")}
objects = [
    {"kind": kind, "id": obj["id"], "status": obj["status"]}
    for kind, key in (("resource", "model_resources"), ("session", "training_sessions"))
    for obj in state[key]
]
print("emulator objects: " + json.dumps(objects))
active = [obj["id"] for obj in objects if not obj["status"].endswith(gone[obj["kind"]])]
if active:
    sys.exit(f"still active after destroy: {', '.join(active)}")
print(
    f"{len(state['model_resources'])} model resource(s) and {len(state['training_sessions'])} session(s) "
    "were created; none is active now."
)
PY
}

cleanup() {
    local status=$?
    trap - EXIT
    # From here on a second Ctrl-C (or a TERM, or a hangup) must not cut the cleanup short: the emulator runs in
    # a session of its own, and nothing else would stop it. (The commands below inherit the ignored signals,
    # unless they install handlers of their own.)
    # And a stream nobody reads any more must not end it either (should the relay be gone).
    trap '' INT TERM HUP PIPE
    set +e
    if [ "$STACK_CREATED" = 1 ] && [ "$STACK_REMOVED" = 0 ]; then
        local why="a failure"
        case "$status" in
            129) why="a hangup" ;;
            130) why="Ctrl-C" ;;
            143) why="SIGTERM" ;;
        esac
        say "cleaning up after $why: destroying and removing stack $STACK"
        pulumi destroy --yes --skip-preview --non-interactive --stack "$STACK" >"$WORK/cleanup-destroy.log" 2>&1 \
            || { echo "pulumi destroy failed during cleanup:"; tail -n 20 "$WORK/cleanup-destroy.log"; }
        pulumi stack rm --yes --force --non-interactive --stack "$STACK" >/dev/null 2>&1
    fi
    rm -f "$ROOT/Pulumi.$STACK.yaml"
    if [ -n "$EMULATOR_PID" ] && kill -0 "$EMULATOR_PID" 2>/dev/null; then
        if [ "$status" -ne 0 ] && [ -n "$BASE_URL" ]; then
            report_emulator
        fi
        kill "$EMULATOR_PID" 2>/dev/null
        wait "$EMULATOR_PID" 2>/dev/null
    fi
    rm -rf "$BACKEND_DIR"
    rmdir "$STATE_DIR" 2>/dev/null # only when no other state is kept there
    rm -rf "$WORK"
    if [ "$status" -ne 0 ]; then
        printf '\nmake demo failed (exit status %s); the emulator is stopped and the stack removed.\n' "$status" >&2
    fi
    # The relays end once this script has closed its ends of the streams (everything it started has ended).
    exec >&- 2>&-
    for _ in $(seq 1 50); do
        kill -0 "$RELAY_OUT" 2>/dev/null || kill -0 "$RELAY_ERR" 2>/dev/null || break
        sleep 0.1
    done
    exit "$status"
}
# Bash runs a trap once the foreground command has ended: after one Ctrl-C, once the cancelled `pulumi up` has
# finished what it started.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP # a closed terminal: the emulator, in its own session, gets no hangup of its own

# -------------------------------------------------------------------------------------------- emulator
say "starting the Together RL emulator on a free loopback port"
DEMO_API_KEY="demo-key-not-a-secret"
# More emulator options from TOGETHER_RL_DEMO_EMULATOR_ARGS (split on spaces), after the defaults so that a
# --timings there wins: tests/e2e/test_demo_interrupt.py holds the model resource in PENDING with it.
read -r -a EXTRA_EMULATOR_ARGS <<<"${TOGETHER_RL_DEMO_EMULATOR_ARGS:-}"
# In a session of its own (os.setsid, then exec, so $! is the emulator; macOS has no setsid(1)): an emulator in
# the terminal's process group dies with the Ctrl-C, and the cancelled `pulumi up` and cleanup's destroy then
# wait on a dead API (up to the 3600 s create timeout). cleanup stops it, after the destroy.
# Its output file exists before the wait below reads it: the background shell opens it only once it runs.
: >"$WORK/emulator.out"
"$PYTHON" -c 'import os, sys; os.setsid(); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])' \
    -m pulumi_together_rl.emulator --host 127.0.0.1 --port 0 --api-key "$DEMO_API_KEY" \
    --timings resource_pending=4,resource_creating=3,resource_stopping=2,session_creating=2,session_stopping=1 \
    ${EXTRA_EMULATOR_ARGS[@]+"${EXTRA_EMULATOR_ARGS[@]}"} \
    >"$WORK/emulator.out" 2>"$WORK/emulator.err" &
EMULATOR_PID=$!

for _ in $(seq 1 300); do
    # A complete first line (newline included) is the base URL.
    if [ "$(wc -l <"$WORK/emulator.out")" -ge 1 ]; then
        BASE_URL="$(head -n 1 "$WORK/emulator.out")"
        break
    fi
    if ! kill -0 "$EMULATOR_PID" 2>/dev/null; then
        echo "the emulator exited before printing its URL:" >&2
        cat "$WORK/emulator.err" >&2
        exit 1
    fi
    sleep 0.1
done
case "$BASE_URL" in
    http://127.0.0.1:*) ;;
    "") ;;
    *) echo "unexpected first line from the emulator: $BASE_URL" >&2; exit 1 ;;
esac
if [ -z "$BASE_URL" ]; then
    echo "the emulator printed no URL within 30 s:" >&2
    cat "$WORK/emulator.err" >&2
    exit 1
fi
# It prints the URL once it listens (connections queue until it serves): ready is its first answer.
if ! "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/_emulator/state", timeout=30)' \
    "$BASE_URL" 2>/dev/null; then
    echo "the emulator at $BASE_URL does not answer:" >&2
    cat "$WORK/emulator.err" >&2
    exit 1
fi
echo "emulator: $BASE_URL (pid $EMULATOR_PID)"

# ---------------------------------------------------------------------------------------------- pulumi
# A file backend inside the repo, through the environment: the user's own `pulumi login` is left untouched.
mkdir -p "$BACKEND_DIR"
export PULUMI_BACKEND_URL="file://$BACKEND_DIR"
export PULUMI_CONFIG_PASSPHRASE="demo-passphrase-not-a-secret"
export PULUMI_SKIP_UPDATE_CHECK=true
# The dynamic-provider plugin resolves a relative venv from `main` (examples/quickstart/), not from the project
# root (pulumi/pulumi#7061): hand it the absolute path of the one venv.
export PULUMI_RUNTIME_VIRTUALENV="$ROOT/.venv"
# Pulumi runs `uv run` for the program: never let it re-resolve the lock, nor sync the development group in.
export UV_FROZEN=1 UV_NO_SYNC=1
# Poll the emulator every half second so progress lines show each state.
export TOGETHER_RL_POLL_INTERVAL=0.5
# The stack config decides; a key or URL from the caller's shell must not leak into the demo.
unset TOGETHER_API_KEY TOGETHER_BASE_URL
# The create journal records what the provider makes in the throwaway emulator: it lives and goes with the run's
# temporary folder, never in the user's journal (or in one a caller's TOGETHER_RL_STATE_DIR names).
export TOGETHER_RL_STATE_DIR="$WORK/state"

say "creating the throwaway stack $STACK (local backend: $BACKEND_DIR)"
pulumi stack init "$STACK" --secrets-provider passphrase --non-interactive
STACK_CREATED=1
pulumi config set --stack "$STACK" together:baseUrl "$BASE_URL"
pulumi config set --stack "$STACK" --secret together:apiKey "$DEMO_API_KEY"

say "pulumi up (examples/quickstart against the emulator)"
pulumi up --yes --non-interactive --stack "$STACK"

say "stack outputs"
pulumi stack output --stack "$STACK"

say "pulumi destroy"
pulumi destroy --yes --non-interactive --stack "$STACK"

say "checking that nothing is left running in the emulator"
report_emulator

pulumi stack rm --yes --non-interactive --stack "$STACK"
STACK_REMOVED=1
say "demo finished: up, outputs, destroy, nothing left running"
