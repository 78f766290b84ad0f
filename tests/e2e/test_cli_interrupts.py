"""Interrupted creates through the real CLI: what only the CLI shows, with real signals to real processes.

A terminal's Ctrl-C goes to the CLI's whole process group, once (the engine cancels: the create already started
finishes and is recorded) or twice (the engine ends before the answer and ends its plugins); a CI job's cancel is
SIGTERM to the CLI alone. Each test starts `pulumi up` of the sweep example (one LoRA resource, one session)
against an emulator whose model resource waits in PENDING (or whose session waits in CREATING), sends the signal
while the provider waits, lets the processes end, then runs `pulumi up` again: afterwards exactly the declared
objects are active, no second allocation was made, the state matches the emulator, a preview shows no changes
and a destroy leaves nothing. Each interrupt runs on one face, both faces covered between them.

The matrix of every interrupt of the provider (SIGINT, SIGTERM, SIGKILL, its engine killed or a zombie) during
each create is the stand-in engine's, with real provider processes and real signals
(``tests/engine/test_interrupts.py``); a killed CLI and what its engine leaves are in ``test_cli_ownership.py``.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from harness.cli import active
from harness.cli import provider_pids as _provider_pids
from harness.cli import wait_until as _wait_until
from harness.faces import DYNAMIC, PLUGIN


def _interrupt(stack, emulator, *, during: str, how: str) -> str:
    """Start `pulumi up`, interrupt it as ``how`` while ``during`` waits; returns what the CLI printed."""
    key = "model_resources" if during == "resource" else "training_sessions"
    process = stack.popen("up", "--yes", "--skip-preview")
    try:
        _wait_until(lambda: emulator.control.state()[key], 120, f"the {during} create")
        time.sleep(1.0)  # well inside the wait
        if how == "sigint-once":
            os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        elif how == "sigint-twice":
            os.killpg(process.pid, signal.SIGINT)
            time.sleep(0.5)
            os.killpg(process.pid, signal.SIGINT)
        elif how == "sigterm-cli":
            os.kill(process.pid, signal.SIGTERM)  # a CI job's cancel: the CLI alone
        stdout, stderr = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return stdout + stderr


KEPT = [
    ("sigint-once", DYNAMIC, "resource"),
    ("sigint-twice", PLUGIN, "session"),
    ("sigterm-cli", PLUGIN, "resource"),
]
"""What only the CLI shows, each on one face (Ctrl-C twice on the dynamic face: the pending-create test below)."""


@pytest.mark.parametrize(
    ("how", "face", "during"), KEPT, ids=[f"{how}-{face}-{during}" for how, face, during in KEPT]
)
def test_an_interrupted_up_converges_on_the_next_up_with_no_second_allocation(
    cli_stack, emulator, during, how, face
):
    timing = "resource_pending" if during == "resource" else "session_creating"
    emulator.control.configure(timings={timing: 8.0})
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})

    _interrupt(stack, emulator, during=during, how=how)
    # Let whatever the interrupted run left behind finish or die.
    _wait_until(
        lambda: not _provider_pids(stack.env["TOGETHER_RL_STATE_DIR"], face), 60, "the old provider to exit"
    )
    emulator.control.configure(timings={timing: 0.0})

    stack.up()

    state = emulator.control.state()
    assert len(state["model_resources"]) == 1, state["model_resources"]  # never a second allocation
    assert len(state["training_sessions"]) == 1, state["training_sessions"]
    now = active(emulator)
    recorded = stack.resources()
    assert [o["id"] for o in now["model_resources"]] == [recorded["sweep-gpu"]["id"]]
    assert [o["id"] for o in now["training_sessions"]] == [recorded["trial-0"]["id"]]
    stack.preview("--expect-no-changes")

    stack.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def _pending(stack) -> list[str]:
    return [p["type"] for p in json.loads(stack.export())["deployment"].get("pending_operations") or []]


def test_ctrl_c_twice_leaves_a_pending_create_that_the_take_over_names_and_refresh_clears(
    cli_stack, emulator
):
    """The engine records a create as pending when it starts it; Ctrl-C twice ends it before the answer. With
    `refresh: always` the engine's own warning about pending operations is never shown, so the take-over's line
    names the command, and that command clears it."""
    emulator.control.configure(timings={"resource_pending": 8.0})
    stack = cli_stack("sweep").init({"sessions": 1, "loraRanks": [8]})

    _interrupt(stack, emulator, during="resource", how="sigint-twice")
    _wait_until(
        lambda: not _provider_pids(stack.env["TOGETHER_RL_STATE_DIR"]), 60, "the old provider to exit"
    )
    assert _pending(stack) == ["creating"]

    rerun = stack.up()
    assert "taking it over" in rerun.output
    assert "pending create" in rerun.output and "pulumi refresh --clear-pending-creates --yes" in rerun.output
    assert _pending(stack) == ["creating"]  # the take-over does not clear it: the command does

    stack.run("refresh", "--clear-pending-creates", "--yes")
    assert _pending(stack) == []
    assert [o["id"] for o in active(emulator)["model_resources"]] == [stack.resources()["sweep-gpu"]["id"]]
    stack.preview("--expect-no-changes")
    stack.destroy()
