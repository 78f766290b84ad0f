"""Whether a process still runs, as the journal and the lifeline judge it: by pid and start time, and a process that
has ended but was not reaped (a zombie) is gone. Real processes and real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from pulumi_together_rl import lifeline
from pulumi_together_rl.ownership import leases
from pulumi_together_rl.ownership.records import Process


@pytest.fixture(autouse=True)
def _no_entry_held(monkeypatch):
    """Each test here starts with no create journal entry held in this process: the exit waits up to
    ``lifeline.POST_GRACE`` for a POST in flight, and the registry of held entries is the process's, where another
    test of the same worker may have left a create thread mid-POST (make test failed once on the 10 s wait below,
    with the tests in a new order; such a leftover is the likely cause, not proven)."""
    monkeypatch.setattr(leases, "_held", {})


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rindex(")") + 2 :].split()[0]


def test_a_live_process_runs_and_a_killed_unreaped_one_does_not():
    child = subprocess.Popen(["sleep", "300"])
    try:
        seen = Process.of(child.pid)
        assert seen.running() is True
        _kill_unreaped(child)
        assert seen.running() is False  # same pid, same start time, but it runs nothing
    finally:
        child.kill()
        child.wait()


def test_the_lifeline_takes_a_zombie_engine_for_gone():
    engine = subprocess.Popen(["sleep", "300"])
    exits: list[int] = []
    try:
        watched = Process.of(engine.pid)
        assert lifeline.watch(watched, exit=exits.append, every=0.05)
        time.sleep(0.3)
        assert not lifeline.gone()
        _kill_unreaped(engine)
        deadline = time.monotonic() + 10
        while not exits:
            assert time.monotonic() < deadline, "the lifeline never noticed"
            time.sleep(0.05)
        assert lifeline.gone() and exits == [0]
    finally:
        engine.kill()
        engine.wait()
        lifeline.reset()


def _kill_unreaped(child: subprocess.Popen) -> None:
    """SIGKILL ``child`` and leave it unreaped: a zombie, as a parent that never waits leaves it."""
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _state(child.pid) != "Z":
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.02)


def test_a_create_asking_right_after_its_engine_died_hears_it_before_the_watch_looks():
    """The watch looks every half second; a create that finishes in between asks before it marks its entry done,
    and must hear that the engine is gone (else the answer nobody reads is marked done, and the next run makes
    a second object)."""
    engine = subprocess.Popen(["sleep", "300"])
    exits: list[int] = []
    try:
        assert lifeline.watch(Process.of(engine.pid), exit=exits.append, every=3600)
        assert not lifeline.gone()
        _kill_unreaped(engine)
        assert lifeline.gone()  # at once, not at the watch's next look an hour later
        deadline = time.monotonic() + 10
        while not exits:
            assert time.monotonic() < deadline, "the provider never went on to exit"
            time.sleep(0.05)
    finally:
        engine.kill()
        engine.wait()
        lifeline.reset()
