"""The repository's own Python language host (scripts/pulumi-cli/pulumi-language-python), through the real CLI.

scripts/pulumi-cli.sh builds it where the upstream host cannot be had, and stamps it with the hash of its
source; these tests run only against that host (with another one, the CLI is not the one they are about).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from harness.cli import ROOT, active, processes_of, unavailable

HOST_SOURCE = ROOT / "scripts" / "pulumi-cli" / "pulumi-language-python" / "main.go"


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
