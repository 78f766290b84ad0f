"""The repository's own Python language host (scripts/pulumi-cli/pulumi-language-python), through the real CLI.

scripts/pulumi-cli.sh builds it where the upstream host cannot be had, and stamps it with the hash of its
source; these tests run only against that host (with another one, the CLI is not the one they are about).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
from harness.cli import ROOT, active, processes_of, provider_pids, unavailable, wait_until

HOST_SOURCE = ROOT / "scripts" / "pulumi-cli" / "pulumi-language-python" / "main.go"
HOST_GONE_WITHIN = 5.0  # seconds from the CLI's death to the host's


@pytest.fixture
def own_host(pulumi_bin) -> Path:
    """The language host next to the CLI, when it is this repository's, built from this source."""
    stamp = Path(pulumi_bin) / ".pulumi-language-python.source-sha256"
    if not stamp.exists():
        unavailable(f"the Python language host in {pulumi_bin} is not the repository's own")
    if stamp.read_text().strip() != hashlib.sha256(HOST_SOURCE.read_bytes()).hexdigest():
        unavailable(
            f"the Python language host in {pulumi_bin} was built from older source: run scripts/pulumi-cli.sh"
        )
    return Path(pulumi_bin) / "pulumi-language-python"


def _hosts(stack) -> list[int]:
    """The stack's language host processes (what the CLI started from the pinned folder)."""
    found = []
    for pid in processes_of(stack):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.endswith("/pulumi-language-python"):
            found.append(pid)
    return found


def test_a_stack_with_no_config_at_all_runs_its_program(cli_stack, emulator, own_host):
    """No config at all (the key and URL from the environment): the host leaves PULUMI_CONFIG out, as upstream
    does, rather than handing the SDK `null`."""
    stack = cli_stack(ROOT, TOGETHER_BASE_URL=emulator.base_url, TOGETHER_API_KEY=emulator.api_key)
    stack.run("stack", "init", "--secrets-provider", "passphrase")
    stack.initialized = True
    assert "together:" not in stack.run("config", "--json").stdout.replace("{}", "")

    up = stack.up(check=False)
    assert up.returncode == 0, str(up)
    assert "AttributeError" not in up.output
    outputs = stack.outputs()
    assert outputs["model_resource_status"] == "READY"
    assert [o["id"] for o in active(emulator)["model_resources"]] == [outputs["model_resource_id"]]
    stack.destroy()


def test_a_killed_cli_leaves_no_language_host_behind(cli_stack, emulator, own_host):
    """A CI runner's hard cancel mid-create: the CLI is SIGKILLed; its language host, in a process group of its
    own, must end with it within seconds (it lived on for 12-30 minutes)."""
    emulator.control.configure(timings={"resource_pending": 30.0})
    stack = cli_stack(ROOT).init()
    process = stack.popen("up", "--yes", "--skip-preview")
    try:
        wait_until(lambda: emulator.control.state()["model_resources"], 120, "the create")
        hosts = wait_until(lambda: _hosts(stack), 10, "the language host")
        assert all(os.readlink(f"/proc/{pid}/exe") == str(own_host) for pid in hosts), hosts
        os.kill(process.pid, signal.SIGKILL)  # the CLI itself, nothing else
        process.communicate()
        killed = time.monotonic()
        deadline = killed + HOST_GONE_WITHIN
        while time.monotonic() < deadline and _hosts(stack):
            time.sleep(0.1)
        left = _hosts(stack)
        assert left == [], (
            f"the language host {left} still runs {HOST_GONE_WITHIN} s after its CLI was killed"
        )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
        wait_until(
            lambda: not provider_pids(stack.env["TOGETHER_RL_STATE_DIR"]), 60, "the orphaned provider to exit"
        )
        for pid in processes_of(stack):
            os.kill(pid, signal.SIGKILL)
    stack.run("cancel", "--yes")  # the lock the killed engine left, so that clean-up can destroy
