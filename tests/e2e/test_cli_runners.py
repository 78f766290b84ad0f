"""Runners through the real CLI, with the stack's state in a bucket of the S3-compatible server the suite starts
(:mod:`harness.bucket`): machines of their own (:mod:`harness.runner`), killed as machines are, and the recovery
command (``python -m pulumi_together_rl recover``) clearing what the killed engine left.

What is judged: the emulator's objects (exactly one, never a second GPU), the stack's state as ``pulumi stack
export`` gives it (the object recorded, no pending operation), a preview with no changes, and the bucket's own
keys (the stack's lock). The recovery command's decisions on every case are in ``tests/unit/test_recovery.py``.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from harness.cli import active, wait_until
from harness.faces import DYNAMIC, PLUGIN

RESOURCES = "/v1/rl/model-resources"
CONFIG = {"sessions": 1, "loraRanks": [8]}


def pending(runner) -> list[dict]:
    return json.loads(runner.export())["deployment"].get("pending_operations") or []


def locks(runner) -> list[str]:
    return [
        key for key in runner.bucket.keys(f"{runner.bucket.prefix}/.pulumi/locks/") if key.endswith(".json")
    ]


def model_resources(emulator) -> list[dict]:
    return emulator.control.state()["model_resources"]


def answered(emulator) -> bool:
    """The model resource's POST was answered: the object exists (and a second for the answer to arrive)."""
    if not model_resources(emulator):
        return False
    time.sleep(1.0)
    return True


KILLS = [("sigkill", DYNAMIC), ("github-cancel", PLUGIN)]
"""Each kill on one face (the recovery is the core's; the faces alternate so that both stay covered)."""


@pytest.mark.parametrize(("how", "face"), KILLS, ids=[f"{how}-{face}" for how, face in KILLS])
def test_a_runner_killed_mid_create_recovers_with_one_command_and_its_next_up_leaves_one_object(
    runners, emulator, how, face
):
    """The runner's `pulumi up` dies while its GPU provisions, after the POST was answered: its whole process tree
    SIGKILLed (a machine going down), or GitHub's cancel sequence (SIGINT, SIGTERM 7.5 s later, SIGKILL of the
    tree 2.5 s after). The engine leaves a pending create (and, killed, the stack locked); `recover` clears both,
    the journal keeping the id; the next `up` takes the object over by it, makes nothing, and records it."""
    emulator.control.configure(timings={"resource_pending": 30.0})
    runner = runners("sweep", face=face).init(CONFIG)
    up = runner.start_up()
    wait_until(lambda: answered(emulator), 120, "the model resource's POST to be answered")
    if how == "sigkill":
        runner.kill()
    else:
        started = time.monotonic()
        runner.github_cancel(up)
        assert time.monotonic() - started < 12.0  # the whole sequence: 7.5 + 2.5 s, and the reaping
    assert not runner.processes()
    [made] = model_resources(emulator)
    assert [p["type"] for p in pending(runner)] == ["creating"]  # what the engine left
    if how == "sigkill":
        assert locks(runner)  # a SIGTERMed engine unlocks its stack on its way out; a killed one cannot

    recovered = runner.module("recover", "--stack", runner.name)

    assert recovered.returncode == 0, recovered
    assert f"-> import {made['id']}: the create journal holds its id" in recovered.stdout
    assert "removed the stack's lock, if it had one" in recovered.stdout
    assert not pending(runner) and not locks(runner)
    # The pinned CLI (v3.274.1) drops a pending create named by --import-pending-creates without recording the
    # resource: the journal keeps the id, and the next `up` takes the object over by it.
    assert "sweep-gpu" not in runner.resources()
    assert "the next `pulumi up` takes it over from the create journal by that id" in recovered.stdout

    emulator.control.configure(timings={"resource_pending": 0.0})
    emulator.control.clear_requests()
    rerun = runner.up()
    assert f"model resource {made['id']}: taking it over" in rerun.output

    assert [r["id"] for r in model_resources(emulator)] == [made["id"]]  # never a second GPU
    assert not [r for r in emulator.control.requests() if r["method"] == "POST" and r["path"] == RESOURCES]
    assert runner.resources()["sweep-gpu"]["id"] == made["id"]
    assert not pending(runner)
    runner.preview("--expect-no-changes")
    runner.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_recover_refuses_while_a_create_of_the_stack_is_live_and_says_whose(runners, emulator):
    """A `pulumi up` frozen in its create (SIGSTOP: alive, holding its journal entry) is a runner still at work:
    `recover` refuses in one sentence naming whose create it is, and the stack's lock stays that run's. The report
    says the same and exits 0. Once thawed, the run finishes on its own."""
    emulator.control.configure(timings={"resource_pending": 8.0})
    runner = runners("sweep").init(CONFIG)
    up = runner.start_up()
    wait_until(lambda: answered(emulator), 120, "the model resource's POST to be answered")
    frozen = runner.processes()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        held = locks(runner)
        assert held

        refused = runner.module("recover", "--stack", runner.name)
        report = runner.module("recover", "--stack", runner.name, "--report")
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)

    assert refused.returncode == 4, refused
    [sentence] = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert sentence.startswith(
        f"error: recovering stack ({runner.name}): a create of it is live: model resource"
    )
    assert f"/{runner.name}/sweep-gpu" in sentence
    assert any(f"pid {pid} on " in sentence for pid in frozen)  # the provider process at work
    assert sentence.endswith("Let that run finish or stop it, then run this command again.")
    assert report.returncode == 0 and "recover refuses while it runs" in report.stdout
    assert locks(runner) == held  # its lock was left alone

    finished = up.finish()
    assert finished.returncode == 0, finished
    [made] = model_resources(emulator)
    assert runner.resources()["sweep-gpu"]["id"] == made["id"] and not pending(runner)
    runner.destroy()
