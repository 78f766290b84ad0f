"""`make demo` with the real Pulumi CLI, without any way to get one, and with a recording stand-in.

The real-CLI test runs wherever scripts/pulumi-cli.sh can provide the CLI (harness/cli.py; in CI it must). The
tests of scripts/demo.sh with no way to get a CLI, and with a stand-in `pulumi` that records what the script asks
of it, always run: they pin down that the demo fails clearly without the CLI and cleans up after itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "demo.sh"
INSTALL_COMMAND = "curl -fsSL https://get.pulumi.com | sh"
STAND_IN_VERSION = "v3.274.1"


def _path_without(*names: str) -> str:
    """PATH with every directory that holds one of these executables left out."""
    keep = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and not any(os.access(os.path.join(entry, name), os.X_OK) for name in names):
            keep.append(entry)
    return os.pathsep.join(keep)


def _path_without_pulumi() -> str:
    return _path_without("pulumi")


def _stand_in_pulumi(directory: Path, *, fail_on: str | None = None) -> Path:
    """A fake `pulumi` that appends each call (argv and a few env vars) as JSON to calls.jsonl."""
    log = directory / "calls.jsonl"
    script = directory / "pulumi"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys
            if sys.argv[1:] == ["version"]:  # scripts/pulumi-cli.sh asks first: a recent enough CLI
                print({STAND_IN_VERSION!r})
                sys.exit(0)
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


def _run_demo(path: str, timeout: float = 240, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, **extra}
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


def test_demo_without_any_way_to_get_the_cli_exits_1_naming_the_ways(tmp_path):
    # No pulumi and no go on PATH, an empty cache, and (on this machine) no answer from get.pulumi.com.
    started = time.monotonic()
    result = _run_demo(
        _path_without("pulumi", "go"),
        timeout=90,
        TOGETHER_RL_CACHE_DIR=str(tmp_path / "cache"),
    )
    output = result.stdout + result.stderr

    assert result.returncode == 1, output
    assert INSTALL_COMMAND in output
    assert "install Go" in output and "internet" in output
    assert "Traceback" not in output
    # It stops before any set-up: no venv sync, no emulator.
    assert time.monotonic() - started < 60
    assert "syncing the venv" not in output


# ------------------------------------------------------------------------ with a stand-in Pulumi CLI


def test_demo_drives_pulumi_against_the_emulator_and_cleans_up(tmp_path):
    log = _stand_in_pulumi(tmp_path)
    result = _run_demo(f"{tmp_path}{os.pathsep}{_path_without_pulumi()}")
    output = result.stdout + result.stderr
    calls = _calls(log)
    commands = [call["argv"] for call in calls]

    assert result.returncode == 0, output
    assert "demo.sh: line" not in output  # no shell error on the way (the emulator's start raced its wait)
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


def test_make_demo_runs_the_quickstart_up_and_destroy(pulumi_bin, tmp_path):
    bin_dir = pulumi_bin
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    # Where a run would leave its temporary folder and its create-journal records (the user's default journal).
    (tmp_path / "tmp").mkdir()
    env.update(TMPDIR=str(tmp_path / "tmp"), XDG_STATE_HOME=str(tmp_path / "state"))
    result = subprocess.run(
        ["make", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    output = result.stdout + result.stderr

    assert result.returncode == 0, output
    assert "demo.sh: line" not in output  # no shell error on the way
    # The progress lines of both waits, and the outputs.
    assert "PENDING" in output and "READY" in output and "RUNNING" in output
    for name in ("model_resource_id", "model_resource_status", "training_session_id", "base_model"):
        assert name in output
    assert "none is active now" in output
    assert not list(ROOT.glob("Pulumi.demo-*.yaml"))
    assert list((tmp_path / "tmp").glob("together-rl-demo.*")) == []
    records = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert records == [], records
