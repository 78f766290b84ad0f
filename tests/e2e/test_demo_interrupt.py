"""One Ctrl-C on `make demo`, for real: SIGINT to the whole process group, as a terminal sends it.

`make demo` runs in a session of its own, with the emulator holding the model resource in PENDING long enough
(TOGETHER_RL_DEMO_EMULATOR_ARGS) for the signal to land while `pulumi up` waits for it. An emulator that died
with the signal would leave the cancelled `pulumi up` waiting on a dead API for up to the 3600 s create
timeout; here the demo must be done within a minute, with nothing of the run left running and, in the
emulator's last report before it stopped, nothing active.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from harness.cli import RESOURCE_GONE, ROOT, SESSION_GONE

PENDING_SECONDS = 12  # the window for the signal; the cancelled up still waits out the rest of it
EXIT_BOUND = 60.0  # seconds from the signal to the end of `make demo` on a slow 2-core machine
MARKER = "TOGETHER_RL_DEMO_INTERRUPT_RUN"  # read by nothing: it tags every process the run starts


def _processes_of(run: str) -> list[tuple[int, str]]:
    """Live processes (zombies have no environ) whose environment carries this run's marker."""
    found = []
    tag = f"{MARKER}={run}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in environ:
            found.append((int(proc.name), cmdline.strip()))
    return found


def _wait_for(predicate, timeout: float, what: str, output: list[str]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{''.join(output)}")


def _pending_resource(base_url: str) -> dict | None:
    state = httpx.get(base_url + "/_emulator/state", timeout=5).json()
    pending = [o for o in state["model_resources"] if o["status"].endswith("PENDING")]
    return pending[0] if pending else None


def test_one_ctrl_c_on_make_demo_cancels_destroys_and_stops_the_emulator_within_a_minute(
    tmp_path, pulumi_bin
):
    run = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env["PATH"] = f"{pulumi_bin}{os.pathsep}{env['PATH']}"
    env.update(
        {
            MARKER: run,
            "TOGETHER_RL_DEMO_EMULATOR_ARGS": f"--timings resource_pending={PENDING_SECONDS}",
            "TOGETHER_RL_STATE_DIR": str(tmp_path / "state"),  # the create journal, out of the user's home
        }
    )
    demo = subprocess.Popen(
        ["make", "demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, for killpg: the terminal's foreground group
    )
    output: list[str] = []

    def read() -> None:
        for line in demo.stdout:
            output.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        found = _wait_for(
            lambda: re.search(r"^emulator: (http://127\.0\.0\.1:\d+) \(pid (\d+)\)$", "".join(output), re.M),
            300,
            "the demo to start the emulator",
            output,
        )
        base_url, emulator_pid = found.group(1), int(found.group(2))
        creating = _wait_for(lambda: _pending_resource(base_url), 300, "the model resource's create", output)
        time.sleep(1.0)  # inside the wait for READY
        # The marker finds the run's processes: the emulator (in its own session) and the dynamic provider.
        before = _processes_of(run)
        assert emulator_pid in [pid for pid, _ in before], before
        assert any("pulumi.dynamic" in cmdline for _, cmdline in before), before

        os.killpg(demo.pid, signal.SIGINT)  # one Ctrl-C
        try:
            demo.wait(timeout=EXIT_BOUND)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"make demo still ran {EXIT_BOUND:.0f} s after one Ctrl-C:\n{''.join(output)}"
            ) from None
        reader.join(timeout=10)
        text = "".join(output)

        assert demo.returncode != 0, text
        assert "^C received; cancelling" in text  # pulumi up heard the Ctrl-C and cancelled...
        assert "cleaning up after Ctrl-C: destroying and removing stack" in text  # ...then cleanup destroyed

        # Nothing of the run is left: no emulator, no pulumi, no language host, no dynamic provider.
        assert _processes_of(run) == [], text
        with pytest.raises(httpx.TransportError):
            httpx.get(base_url + "/_emulator/state", timeout=2)

        # The emulator's last report, printed by the trap before it stopped the emulator: the resource that was
        # being created when the signal came is there, and nothing is active any more.
        reports = re.findall(r"^emulator objects: (.*)$", text, re.M)
        assert len(reports) == 1, text
        objects = json.loads(reports[0])
        assert creating["id"] in [o["id"] for o in objects if o["kind"] == "resource"], objects
        gone = {"resource": RESOURCE_GONE, "session": SESSION_GONE}
        assert [o for o in objects if not o["status"].endswith(gone[o["kind"]])] == [], objects

        stack = re.search(r"creating the throwaway stack (demo-[\w-]+) ", text).group(1)
        assert not (ROOT / f"Pulumi.{stack}.yaml").exists()
        assert not (ROOT / ".pulumi-state" / stack).exists()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        for pid, _ in _processes_of(run):  # the emulator and the plugins run in process groups of their own
            os.kill(pid, signal.SIGKILL)
