"""One Ctrl-C on `make demo`, for real: SIGINT to the whole process group, as a terminal sends it.

`make demo` runs in a session of its own, with the emulator holding the model resource in PENDING long enough
(TOGETHER_RL_DEMO_EMULATOR_ARGS) for the signal to land while `pulumi up` waits for it. An emulator that died
with the signal would leave the cancelled `pulumi up` waiting on a dead API for up to the 3600 s create
timeout; here the demo must be done within a minute, with nothing of the run left running and, in the
emulator's last report before it stopped, nothing active. Nothing else is left either: no stack file, no
backend folder, no temporary folder, no create-journal record (the demo keeps its journal in its temporary
folder, whatever TOGETHER_RL_STATE_DIR says).

The same Ctrl-C on `make demo 2>&1 | tee demo.log`: the terminal's signal ends `tee` too, and every later write
of the demo and of `pulumi` goes to a pipe nobody reads. Such a write must not end the cancelled `pulumi up` or
the cleanup (SIGPIPE), or the emulator, a READY model resource and the stack files are left behind.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
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


def _demo_env(tmp_path: Path, pulumi_bin: str, run: str) -> dict[str, str]:
    """The environment of a demo run: its marker, a slow PENDING, and its own temporary and state folders (a
    journal record the demo left would land in the second)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env["PATH"] = f"{pulumi_bin}{os.pathsep}{env['PATH']}"
    (tmp_path / "tmp").mkdir()
    env.update(
        {
            MARKER: run,
            "TOGETHER_RL_DEMO_EMULATOR_ARGS": f"--timings resource_pending={PENDING_SECONDS}",
            "TMPDIR": str(tmp_path / "tmp"),
            "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
            # A caller's journal folder: the demo must not write there either.
            "TOGETHER_RL_STATE_DIR": str(tmp_path / "state"),
        }
    )
    return env


def _assert_nothing_left(tmp_path: Path, text: str) -> None:
    """No stack file, no backend, no temporary folder of the demo, no journal record anywhere."""
    stack = re.search(r"creating the throwaway stack (demo-[\w-]+) ", text).group(1)
    assert not (ROOT / f"Pulumi.{stack}.yaml").exists()
    assert not (ROOT / ".pulumi-state" / stack).exists()
    assert list((tmp_path / "tmp").glob("together-rl-demo.*")) == []
    records = [p for p in tmp_path.glob("*state/**/*") if p.is_file()]
    assert records == [], records


def _remove_leftovers(text: str) -> None:
    """What a failed run left in the repository (the user's checkout would keep it)."""
    found = re.search(r"creating the throwaway stack (demo-[\w-]+) ", text)
    if found:
        (ROOT / f"Pulumi.{found.group(1)}.yaml").unlink(missing_ok=True)
        shutil.rmtree(ROOT / ".pulumi-state" / found.group(1), ignore_errors=True)


def test_one_ctrl_c_on_make_demo_cancels_destroys_and_stops_the_emulator_within_a_minute(
    tmp_path, pulumi_bin
):
    run = uuid.uuid4().hex
    env = _demo_env(tmp_path, pulumi_bin, run)
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

        _assert_nothing_left(tmp_path, text)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        for pid, _ in _processes_of(run):  # the emulator and the plugins run in process groups of their own
            os.kill(pid, signal.SIGKILL)
        _remove_leftovers("".join(output))


def _snapshots(base_url: str, into: list[dict]) -> None:
    """The emulator's state, polled until the emulator is gone: what it held last before it stopped."""
    while True:
        try:
            into.append(httpx.get(base_url + "/_emulator/state", timeout=2).json())
        except httpx.TransportError:
            return
        time.sleep(0.1)


def test_one_ctrl_c_on_make_demo_piped_into_tee_still_cleans_up_everything(tmp_path, pulumi_bin):
    run = uuid.uuid4().hex
    env = _demo_env(tmp_path, pulumi_bin, run)
    log = tmp_path / "demo.log"
    # The user's pipeline, in its own process group as a shell's job is: `make demo 2>&1 | tee demo.log`.
    demo = subprocess.Popen(
        ["bash", "-c", f"make demo 2>&1 | tee {shlex.quote(str(log))} >/dev/null"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    output = []

    def text() -> str:
        output[:] = [log.read_text() if log.exists() else ""]
        return output[0]

    try:
        found = _wait_for(
            lambda: re.search(r"^emulator: (http://127\.0\.0\.1:\d+) \(pid (\d+)\)$", text(), re.M),
            300,
            "the demo to start the emulator",
            output,
        )
        base_url = found.group(1)
        creating = _wait_for(lambda: _pending_resource(base_url), 300, "the model resource's create", output)
        states: list[dict] = []
        poller = threading.Thread(target=_snapshots, args=(base_url, states), daemon=True)
        poller.start()
        time.sleep(1.0)  # inside the wait for READY
        [tee] = [pid for pid, cmdline in _processes_of(run) if cmdline.startswith("tee ")]

        os.kill(tee, signal.SIGKILL)  # the pipe's reader is gone: every later write is a broken pipe...
        os.killpg(demo.pid, signal.SIGINT)  # ...when the Ctrl-C comes
        try:
            demo.wait(timeout=EXIT_BOUND)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"make demo still ran {EXIT_BOUND:.0f} s after one Ctrl-C:\n{text()}"
            ) from None

        # Nothing of the run is left: no emulator, no pulumi, no language host, no dynamic provider.
        deadline = time.monotonic() + 10  # the demo's output relay may drain for a moment after make exits
        while _processes_of(run) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_of(run) == [], text()

        with pytest.raises(httpx.TransportError):
            httpx.get(base_url + "/_emulator/state", timeout=2)
        poller.join(timeout=10)
        # What the emulator held last before the cleanup stopped it: the resource being created when the signal
        # came, stopped by the cleanup's destroy, and nothing active.
        last = states[-1]
        assert creating["id"] in [o["id"] for o in last["model_resources"]], last
        active = [o for o in last["model_resources"] if not o["status"].endswith(RESOURCE_GONE)] + [
            o for o in last["training_sessions"] if not o["status"].endswith(SESSION_GONE)
        ]
        assert active == [], last
        _assert_nothing_left(tmp_path, text())
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        for pid, _ in _processes_of(run):
            os.kill(pid, signal.SIGKILL)
        _remove_leftovers(text())
