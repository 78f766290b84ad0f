"""End to end with the real Pulumi CLI, and `make demo`'s behaviour without it.

The CLI tests run only where `pulumi` is on PATH (the reason is given when they are skipped). The tests of
scripts/demo.sh without the CLI, and with a stand-in `pulumi` that records what the script asks of it, always run:
they pin down that the demo fails clearly without the CLI and cleans up after itself whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "demo.sh"
INSTALL_COMMAND = "curl -fsSL https://get.pulumi.com | sh"

needs_pulumi = pytest.mark.skipif(shutil.which("pulumi") is None, reason="the Pulumi CLI is not on PATH")


def _path_without_pulumi() -> str:
    """PATH with every directory that holds a `pulumi` executable left out."""
    keep = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and not os.access(os.path.join(entry, "pulumi"), os.X_OK):
            keep.append(entry)
    return os.pathsep.join(keep)


def _stand_in_pulumi(directory: Path, *, fail_on: str | None = None) -> Path:
    """A fake `pulumi` that appends each call (argv and a few env vars) as JSON to calls.jsonl."""
    log = directory / "calls.jsonl"
    script = directory / "pulumi"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys
            call = {{
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "env": {{k: os.environ.get(k) for k in (
                    "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_RUNTIME_VIRTUALENV",
                    "TOGETHER_API_KEY", "TOGETHER_BASE_URL")}},
            }}
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps(call) + "\\n")
            if sys.argv[1:2] == ["stack"] and sys.argv[2:3] == ["init"]:
                stack = sys.argv[3]
                open(os.path.join(os.getcwd(), "Pulumi." + stack + ".yaml"), "w").write("config: {{}}\\n")
            if {fail_on!r} is not None and sys.argv[1:2] == [{fail_on!r}]:
                print("error: the stand-in pulumi fails here on purpose", file=sys.stderr)
                sys.exit(255)
            """
        )
    )
    script.chmod(0o755)
    return log


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _run_demo(path: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path}
    env.pop("TOGETHER_API_KEY", None)
    env.pop("TOGETHER_BASE_URL", None)
    return subprocess.run(
        ["bash", str(DEMO)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _emulator_base_url(calls: list[dict]) -> str:
    for call in calls:
        if call["argv"][:2] == ["config", "set"] and "together:baseUrl" in call["argv"]:
            return call["argv"][call["argv"].index("together:baseUrl") + 1]
    raise AssertionError(f"the demo never set together:baseUrl: {calls}")


def _assert_stopped(base_url: str) -> None:
    with pytest.raises(httpx.TransportError):
        httpx.get(base_url + "/_emulator/state", timeout=2)


# ----------------------------------------------------------------------------------- without the CLI


def test_demo_without_pulumi_cli_exits_1_with_the_install_command():
    started = time.monotonic()
    result = _run_demo(_path_without_pulumi(), timeout=30)
    output = result.stdout + result.stderr

    assert result.returncode == 1, output
    assert INSTALL_COMMAND in output
    assert "Traceback" not in output
    # It stops at once: no venv sync, no emulator.
    assert time.monotonic() - started < 10
    assert "syncing the venv" not in output


# ------------------------------------------------------------------------ with a stand-in Pulumi CLI


def test_demo_drives_pulumi_against_the_emulator_and_cleans_up(tmp_path):
    log = _stand_in_pulumi(tmp_path)
    result = _run_demo(f"{tmp_path}{os.pathsep}{_path_without_pulumi()}")
    output = result.stdout + result.stderr
    calls = _calls(log)
    commands = [call["argv"] for call in calls]

    assert result.returncode == 0, output
    stack = commands[0][2]
    assert commands[0][:2] == ["stack", "init"] and stack.startswith("demo-")
    verbs = [argv[0] if argv[0] not in ("stack", "config") else " ".join(argv[:2]) for argv in commands]
    assert verbs == ["stack init", "config set", "config set", "up", "stack output", "destroy", "stack rm"]
    for argv in commands[1:]:
        assert argv[argv.index("--stack") + 1] == stack, argv
    assert "--yes" in commands[3] and "--yes" in commands[5]
    secret = next(argv for argv in commands if "together:apiKey" in argv)
    assert "--secret" in secret

    base_url = _emulator_base_url(calls)
    assert base_url.startswith("http://127.0.0.1:")
    for call in calls:
        assert call["cwd"] == str(ROOT)
        assert call["env"]["PULUMI_BACKEND_URL"] == f"file://{ROOT / '.pulumi-state' / stack}"
        assert call["env"]["PULUMI_CONFIG_PASSPHRASE"]
        assert call["env"]["PULUMI_RUNTIME_VIRTUALENV"] == str(ROOT / ".venv")
        assert call["env"]["TOGETHER_API_KEY"] is None and call["env"]["TOGETHER_BASE_URL"] is None
    assert "none is active now" in output
    _assert_stopped(base_url)
    assert not (ROOT / f"Pulumi.{stack}.yaml").exists()
    assert not (ROOT / ".pulumi-state" / stack).exists()


def test_demo_cleans_up_when_pulumi_up_fails(tmp_path):
    log = _stand_in_pulumi(tmp_path, fail_on="up")
    result = _run_demo(f"{tmp_path}{os.pathsep}{_path_without_pulumi()}")
    output = result.stdout + result.stderr
    commands = [call["argv"] for call in _calls(log)]

    assert result.returncode != 0, output
    assert "Traceback" not in output
    stack = commands[0][2]
    after_up = commands[[argv[0] for argv in commands].index("up") + 1 :]
    assert [argv[0] for argv in after_up] == ["destroy", "stack"], commands
    assert after_up[1][:2] == ["stack", "rm"] and "--force" in after_up[1]
    _assert_stopped(_emulator_base_url(_calls(log)))
    assert not (ROOT / f"Pulumi.{stack}.yaml").exists()
    assert not (ROOT / ".pulumi-state" / stack).exists()


# --------------------------------------------------------------------------------- with the real CLI


@needs_pulumi
@pytest.mark.cli
def test_make_demo_runs_the_quickstart_up_and_destroy():
    result = subprocess.run(
        ["make", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    output = result.stdout + result.stderr

    assert result.returncode == 0, output
    for name in ("model_resource_id", "model_resource_status", "training_session_id", "base_model"):
        assert name in output
    assert "none is active now" in output
    assert not list(ROOT.glob("Pulumi.demo-*.yaml"))


@needs_pulumi
@pytest.mark.cli
def test_sweep_up_refresh_destroy_with_the_pulumi_cli(emulator, tmp_path):
    project = ROOT / "examples" / "sweep"
    stack = f"e2e-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{tmp_path}",
        "PULUMI_CONFIG_PASSPHRASE": "e2e-passphrase",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "TOGETHER_RL_POLL_INTERVAL": "0.05",
        "UV_FROZEN": "1",
    }

    def pulumi(*args: str) -> str:
        result = subprocess.run(
            ["pulumi", *args, "--stack", stack, "--non-interactive"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, f"pulumi {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def active(kind: str) -> list[dict]:
        gone = (
            ("STOPPING", "STOPPED", "ERROR") if kind == "model_resources" else ("STOPPED", "EXPIRED", "ERROR")
        )
        return [obj for obj in emulator.control.state()[kind] if not obj["status"].endswith(gone)]

    try:
        pulumi("stack", "init", "--secrets-provider", "passphrase")
        pulumi("config", "set", "together:baseUrl", emulator.base_url)
        pulumi("config", "set", "--secret", "together:apiKey", emulator.api_key)
        pulumi("config", "set", "sessions", "2")
        pulumi("config", "set", "loraRanks", "[8, 16]")

        pulumi("up", "--yes")
        outputs = json.loads(pulumi("stack", "output", "--json"))
        assert len(outputs["session_ids"]) == 2
        assert [obj["id"] for obj in active("model_resources")] == [outputs["model_resource_id"]]
        assert sorted(obj["id"] for obj in active("training_sessions")) == sorted(outputs["session_ids"])
        assert sorted(obj["lora_config"]["rank"] for obj in active("training_sessions")) == [8, 16]

        # A second run changes nothing. Refresh then reads every object (outputs such as expires_at move on) and
        # invents no input diff: the next run still changes nothing.
        pulumi("preview", "--refresh=false", "--expect-no-changes")
        pulumi("refresh", "--yes")
        assert len(active("training_sessions")) == 2
        pulumi("preview", "--refresh=false", "--expect-no-changes")

        pulumi("destroy", "--yes")
        assert active("model_resources") == []
        assert active("training_sessions") == []
    finally:
        subprocess.run(
            ["pulumi", "stack", "rm", "--yes", "--force", "--stack", stack, "--non-interactive"],
            cwd=project,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        (project / f"Pulumi.{stack}.yaml").unlink(missing_ok=True)
