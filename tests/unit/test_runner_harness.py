"""The runner harness (:mod:`harness.runner`) does to a machine what its name says, checked with real processes
and real signals and no Pulumi CLI: a "command" here is a Python script that starts a tree of its own (a child in
its own session, as the CLI starts its plugins, and a grandchild whose parent exits at once, reparented away from
the tree), each process recording the signals it gets.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from harness.bucket import Bucket
from harness.cli import ROOT
from harness.runner import GITHUB_SIGKILL_AFTER, GITHUB_SIGTERM_AFTER, Runner, Running

TREE = r"""
import os, signal, subprocess, sys, time
log = sys.argv[1]
def record(name):
    def handler(signum, frame):
        with open(log, "a") as out:
            out.write(f"{name} {signal.Signals(signum).name} {time.time()}\n")
    return handler
role = sys.argv[2]
if role == "cli":
    subprocess.Popen([sys.executable, __file__, log, "plugin"], start_new_session=True)
    subprocess.Popen([sys.executable, __file__, log, "launcher"])
elif role == "launcher":  # exits at once: its child is reparented out of the tree
    subprocess.Popen([sys.executable, __file__, log, "orphan"], start_new_session=True)
    sys.exit(0)
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, record(role))  # recorded, and otherwise ignored: only SIGKILL ends it
with open(log, "a") as out:
    out.write(f"{role} started {os.getpid()}\n")
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def machine(tmp_path):
    runner = Runner(ROOT / "examples" / "sweep", tmp_path / "runner", None, Bucket("unused", "127.0.0.1:9"),
                    bin_dir=str(tmp_path / "no-cli"))  # fmt: skip
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    log = tmp_path / "signals.log"
    yield runner, script, log
    runner.kill()


def start_tree(runner: Runner, script: Path, log: Path) -> tuple[Running, dict[str, int]]:
    import subprocess

    process = subprocess.Popen(
        [sys.executable, str(script), str(log), "cli"],
        env=runner.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    running = Running(["tree"], process)
    runner.started.append(running)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pids = started(log)
        if set(pids) == {"cli", "plugin", "orphan"}:
            return running, pids
        time.sleep(0.05)
    raise AssertionError(f"the tree did not start: {log.read_text() if log.exists() else ''}")


def started(log: Path) -> dict[str, int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {line.split()[0]: int(line.split()[2]) for line in lines if " started " in line}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_kill_ends_the_whole_tree_even_a_process_reparented_away_from_it(machine):
    runner, script, log = machine
    _, pids = start_tree(runner, script, log)
    assert all(alive(pid) for pid in pids.values())
    assert pids["orphan"] in runner.processes()  # outside the tree, found by the machine's PULUMI_HOME

    runner.kill()

    assert not any(alive(pid) for pid in pids.values())
    assert not runner.processes()
    assert "SIG" not in log.read_text()  # no process got a chance to act: SIGKILL only


def test_throw_away_also_deletes_the_machines_folders(machine):
    runner, script, log = machine
    _, pids = start_tree(runner, script, log)
    journal = Path(runner.env["XDG_STATE_HOME"]) / "pulumi-together-rl" / "journal"
    journal.mkdir(parents=True)

    runner.throw_away()

    assert not any(alive(pid) for pid in pids.values())
    assert not runner.root.exists() and runner.gone


def test_github_cancel_is_sigint_then_sigterm_after_7_5_s_then_sigkill_of_the_tree_after_2_5_s(machine):
    runner, script, log = machine
    running, pids = start_tree(runner, script, log)
    began = time.time()

    result = runner.github_cancel(running)

    ended = time.time()
    got = [line.split() for line in log.read_text().splitlines() if " SIG" in line]
    assert [(who, sig) for who, sig, _ in got] == [("cli", "SIGINT"), ("cli", "SIGTERM")]  # the CLI alone
    sigint, sigterm = (float(when) for *_, when in got)
    assert sigint - began < 1.0
    assert sigterm - sigint == pytest.approx(GITHUB_SIGTERM_AFTER, abs=0.5)
    assert ended - sigterm == pytest.approx(GITHUB_SIGKILL_AFTER, abs=1.0)
    assert result.returncode == -9
    assert not any(alive(pid) for pid in pids.values())


def test_a_runner_has_a_home_of_its_own_and_a_program_copy_that_finds_the_repositorys_venv(machine):
    runner, _, _ = machine
    for key in ("HOME", "PULUMI_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TMPDIR"):
        assert Path(runner.env[key]).is_dir() and Path(runner.env[key]).is_relative_to(runner.root), key
    assert "PULUMI_BACKEND_URL" not in runner.env  # the login decides, as on a runner
    assert not any(key.startswith("TOGETHER_") and key != "TOGETHER_RL_POLL_INTERVAL" for key in runner.env)
    project = (runner.project / "Pulumi.yaml").read_text()
    assert f"virtualenv: {(ROOT / '.venv').resolve()}" in project
    assert os.path.isdir((ROOT / ".venv").resolve())
