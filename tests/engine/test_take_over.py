"""Take-overs after a killed provider, against the stand-in engine: real provider processes, SIGKILL.

What the create journal does when the process that holds its entries dies with no say: twins (two identical
declarations of one stack) each get their own object back, and a run killed while it takes an object over leaves
the entry (with the id) for the run after it. The journal's rules themselves are in
``tests/resources/test_create_journal.py``; here the same program goes through whole `up`s, one provider process
per command, as under the CLI.
"""

from __future__ import annotations

from pathlib import Path

from harness.faces import DYNAMIC
from harness.journals import entries
from harness.stack import INTERRUPTS, Stack, python_program, sweep_program

TWINS = Path(__file__).resolve().parents[1] / "e2e" / "projects" / "twins"
HOLD = 600.0
"""Seconds a model resource stays PENDING while a test needs it waiting (set back to 0 afterwards)."""


def resources(emulator) -> list[dict]:
    return emulator.control.state()["model_resources"]


def test_twins_interrupted_once_each_get_their_own_object(emulator):
    """Two identical model resources of one stack, both waiting when the provider is killed: the next `up` takes
    each over by its own entry (the declaration's name tells them apart), none is made twice or left orphaned."""
    emulator.control.configure(timings={"resource_pending": HOLD})
    stack = Stack(emulator, DYNAMIC, python_program(TWINS), project="together-rl-twins", config={"count": 2})

    stack.interrupted_up(INTERRUPTS["sigkill"], when=lambda: len(resources(emulator)) == 2)
    made = {r["id"] for r in resources(emulator)}
    assert {e.entry.id for e in entries()} == made and len(made) == 2

    emulator.control.configure(timings={"resource_pending": 0.0})
    stack.up()

    ids = [stack.ids()[name] for name in ("gpu-0", "gpu-1")]
    assert len(resources(emulator)) == 2 and set(ids) == made  # one each, none orphaned, none made again
    stack.destroy()


def test_a_run_killed_during_its_take_over_leaves_the_entry_for_the_next_run(emulator):
    emulator.control.configure(timings={"resource_pending": HOLD})
    stack = Stack(
        emulator, DYNAMIC, sweep_program(DYNAMIC), project="together-rl-sweep", config={"sessions": 1}
    )

    stack.interrupted_up(INTERRUPTS["sigkill"], when=lambda: resources(emulator))  # killed while it waits
    [made] = resources(emulator)
    [first] = entries()

    def taking_over() -> bool:  # the second run's process has taken the entry over (its lease is live)
        return any(
            e.key == first.key
            and e.entry.process != first.entry.process
            and e.entry.id == made["id"]
            and e.live()
            for e in entries()
        )

    second = stack.interrupted_up(INTERRUPTS["sigkill"], when=taking_over)  # killed while it takes over
    assert "taking it over" in second.output
    [left] = entries()
    assert left.key == first.key and left.entry.id == made["id"] and not left.live()

    emulator.control.configure(timings={"resource_pending": 0.0})
    stack.up()

    assert [r["id"] for r in resources(emulator)] == [made["id"]]  # never a second allocation
    assert stack.ids()["sweep-gpu"] == made["id"]
    stack.destroy()
