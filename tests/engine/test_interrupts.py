"""Interrupted creates against the stand-in engine, with real provider processes and real signals.

The behaviour matrix: each way an `up` is cut short while a create waits (SIGINT, SIGTERM or SIGKILL to the
provider process; the provider's engine killed, reaped or left a zombie), during each create of the sweep
scenario (the model resource in its capacity queue, PENDING; the session starting, CREATING). The `up` runs
through the stand-in engine (``harness/stack.py``): a fresh provider process for every command, as the CLI
starts one, and the provider's create journal is this test's own. Afterwards:

* the interrupted create's journal entry keeps the object's id (with the note that its engine was gone, when
  the provider saw the interrupt), and nothing was stopped;
* the next `up` takes that object over: exactly the declared objects are active, no second allocation was ever
  made, and the state holds the emulator's objects;
* a preview shows no changes, and a destroy leaves nothing active.

The dynamic face runs the whole matrix; the plugin the interrupts that reach its own code (its SIGINT and SIGTERM
handler, its lifeline) and a SIGKILL, during the resource's create: a zombie is the journal's to tell apart and a
session's create the core's, the same code on both faces (the CLI's zombie test runs on the plugin face). What only the CLI shows (Ctrl-C to a process group, a killed CLI and what its engine leaves)
is in ``tests/e2e/test_cli_interrupts.py`` and ``tests/e2e/test_cli_ownership.py``.
"""

from __future__ import annotations

import pytest
from harness.faces import DYNAMIC, PLUGIN
from harness.journals import entries
from harness.stack import INTERRUPTS, Stack, sweep_program

from pulumi_together_rl import lifeline

HOLD = 600.0
"""Seconds the emulator keeps the interrupted create waiting (PENDING, CREATING): longer than any test, so the
interrupt (0.3 s in) always finds it waiting, however loaded the machine; the next `up` finds it done waiting."""

PHASES = {
    "resource": ("model_resources", "sweep-gpu", "resource_pending"),
    "session": ("training_sessions", "trial-0", "session_creating"),
}
GONE = {"RESOURCE": ("STOPPING", "STOPPED", "ERROR"), "SESSION": ("STOPPED", "EXPIRED", "ERROR")}

CASES = [(DYNAMIC, during, how) for during in PHASES for how in INTERRUPTS] + [
    (PLUGIN, "resource", how) for how in ("sigint", "sigterm", "sigkill", "engine-killed")
]


def sweep(emulator, face) -> Stack:
    """examples/sweep with one session (rank 8) on ``face``."""
    program = sweep_program(face)
    return Stack(
        emulator, face, program, project="together-rl-sweep", config={"sessions": 1, "loraRanks": [8]}
    )


def active(emulator) -> dict[str, set[str]]:
    state = emulator.control.state()
    return {
        "model_resources": {
            o["id"] for o in state["model_resources"] if not o["status"].endswith(GONE["RESOURCE"])
        },
        "training_sessions": {
            o["id"] for o in state["training_sessions"] if not o["status"].endswith(GONE["SESSION"])
        },
    }


def stops(emulator) -> list[str]:
    return [r["path"] for r in emulator.control.requests() if r["path"].endswith("/stop")]


def sees(face, how: str) -> bool:
    """Whether the provider itself sees this interrupt (and leaves its entries with the note before it exits);
    otherwise it is killed outright and the kernel drops its locks."""
    return how in ("sigint", "engine-killed", "engine-zombie") or (face is PLUGIN and how == "sigterm")


@pytest.mark.parametrize(
    ("face", "during", "how"), CASES, ids=[f"{face}-{during}-{how}" for face, during, how in CASES]
)
def test_an_up_interrupted_while_a_create_waits_converges_on_the_next_up_with_no_second_allocation(
    emulator, face, during, how
):
    collection, name, timing = PHASES[during]
    emulator.control.configure(timings={timing: HOLD})
    stack = sweep(emulator, face)

    left = stack.interrupted_up(INTERRUPTS[how], when=lambda: emulator.control.state()[collection])

    [made] = emulator.control.state()[collection]
    [seen] = [e for e in entries() if e.entry.owner and e.entry.owner.endswith("/" + name)]
    entry = seen.entry
    assert (entry.id, entry.state) == (made["id"], "created"), (entry, left.output)  # the id kept, not done
    assert entry.note == (lifeline.GONE_NOTE if sees(face, how) else None), left.output
    assert not seen.live()
    assert stops(emulator) == []  # nothing stopped: the object is the next run's
    assert name not in stack.ids()  # the engine never got the answer
    if how == "engine-zombie":
        assert left.engine_was_zombie  # still unreaped when the provider decided

    emulator.control.configure(timings={timing: 0.0})  # the object is READY / RUNNING by the next up
    with stack.command() as engine:  # the next command: a fresh provider process
        stack.up(engine)
        state = emulator.control.state()
        ids = stack.ids()
        converged = active(emulator)
        preview = stack.preview(engine)
        stack.destroy(engine)

    taken_by_id = f"{made['id']}: taking it over: an interrupted `pulumi up` of this declaration created it"
    assert taken_by_id in stack.outputs[-1]
    assert len(state["model_resources"]) == 1, state["model_resources"]  # never a second allocation
    assert len(state["training_sessions"]) == 1, state["training_sessions"]
    assert converged == {"model_resources": {ids["sweep-gpu"]}, "training_sessions": {ids["trial-0"]}}
    assert ids[name] == made["id"]
    assert {op for op, _ in preview} == {"same"}  # no changes
    assert active(emulator) == {"model_resources": set(), "training_sessions": set()}  # the destroy
