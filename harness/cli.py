"""The real Pulumi CLI, driven as a user drives it: for the end-to-end suite and the scripts (bench, chaos).

:func:`provide` returns the folder holding the pinned CLI, or the reason there is none. `make test` runs
``scripts/pulumi-cli.sh`` before pytest and hands its answer over in ``TOGETHER_RL_PULUMI_BIN`` (empty: it
could not provide one); anywhere else the script runs once. What a missing CLI means is the caller's to decide:
the suite's ``pulumi_bin`` fixture (tests/conftest.py) skips, or fails where ``TOGETHER_RL_REQUIRE_CLI=1``.

:class:`CLIStack` is one throwaway stack of a project directory: a file backend and ``PULUMI_HOME`` under the
test's temporary folder, secrets encrypted by a loopback KMS (:mod:`harness.secrets` says why not a passphrase),
the emulator's URL and key in the stack config, nothing from the caller's ``TOGETHER_*`` environment. Every
command runs as a subprocess with ``--non-interactive``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from . import secrets
from .bucket import AWS_ENV
from .faces import DYNAMIC, Face

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "pulumi-cli.sh"
YAML_SCRIPT = ROOT / "scripts" / "pulumi-yaml.sh"
PASSPHRASE = "e2e-passphrase-not-a-secret"
RESOURCE_GONE = ("STOPPING", "STOPPED", "ERROR")
SESSION_GONE = ("STOPPED", "EXPIRED", "ERROR")


@functools.cache
def provide() -> tuple[str | None, str]:
    """(the folder of the pinned Pulumi CLI, "") or (None, why it cannot be provided)."""
    handed = os.environ.get("TOGETHER_RL_PULUMI_BIN")
    if handed is not None:
        if handed:
            return handed, ""
        return (
            None,
            "scripts/pulumi-cli.sh could not provide the Pulumi CLI (its reason is in make test's output)",
        )
    return _folder_from(SCRIPT, "the Pulumi CLI")


@functools.cache
def provide_yaml_host() -> tuple[str | None, str]:
    """(the folder of the Pulumi YAML language host, "") or (None, why it cannot be provided): what
    ``scripts/pulumi-yaml.sh`` prints (PATH, the per-user cache, or a build from the Go module proxy). With a
    CLI at hand the host goes next to it (``--beside``), where the CLI takes it without a warning."""
    cli, _ = provide()
    return _folder_from(YAML_SCRIPT, "the YAML language host", *(["--beside", cli] if cli else []))


def _folder_from(script: Path, what: str, *args: str) -> tuple[str | None, str]:
    """The folder a provider script prints last on stdout, or (None, its reason from stderr)."""
    result = subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=3600, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode == 0 and lines:
        return lines[-1], ""
    reason = " ".join(result.stderr.strip().splitlines()[-4:]) or f"exit status {result.returncode}"
    return None, f"scripts/{script.name} could not provide {what}: {reason}"


def unavailable(reason: str) -> NoReturn:
    """A tool a test needs is missing: the test is skipped with ``reason``, or fails where
    TOGETHER_RL_REQUIRE_CLI=1 (CI), where every tool must be provided."""
    import pytest

    if os.environ.get("TOGETHER_RL_REQUIRE_CLI") == "1":
        pytest.fail(f"{reason} (TOGETHER_RL_REQUIRE_CLI=1: every CLI test must run here)", pytrace=False)
    pytest.skip(reason)


def cli_env(bin_dir: str, home: Path, backend: Path | None, **extra: str | None) -> dict[str, str]:
    """The environment of a CLI command: the pinned CLI and uv first on PATH, nothing from TOGETHER_*, the
    credentials of the loopback AWS servers (:data:`harness.bucket.AWS_ENV`: the buckets' and the KMS's of
    :mod:`harness.secrets`); ``backend``: the file backend (``PULUMI_BACKEND_URL``), or None for the one ``pulumi
    login`` chose."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOGETHER_", "PULUMI_"))}
    path = [bin_dir]
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv:  # the uv toolchain runs the `uv` executable
        path.append(str(Path(uv).parent))
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    env.update(
        AWS_ENV,
        PULUMI_HOME=str(home),
        PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
        PULUMI_SKIP_UPDATE_CHECK="true",
        PULUMI_DIY_BACKEND_NO_LEGACY_WARNING="true",
        UV_FROZEN="1",
        TOGETHER_RL_POLL_INTERVAL="0.2",
    )
    if backend is not None:
        env["PULUMI_BACKEND_URL"] = f"file://{backend}"
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@dataclasses.dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:
        return f"pulumi {' '.join(self.args)} -> {self.returncode}\n{self.stdout}\n{self.stderr}"


class CLIStack:
    """A throwaway stack of ``project`` run through the real CLI against ``emulator``."""

    def __init__(
        self,
        project: Path,
        tmp_path: Path,
        emulator: Any,
        *,
        bin_dir: str,
        name: str | None = None,
        face: Face = DYNAMIC,
        backend: Path | None = None,
        **env: str | None,
    ):
        self.project = project
        self.face = face
        self.emulator = emulator
        self.name = name or f"e2e-{uuid.uuid4().hex[:8]}"
        self.tmp = tmp_path
        self.backend = backend or tmp_path / "backend"
        """Its file backend (its own, unless it shares another stack's)."""
        self.backend.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pulumi-home").mkdir(parents=True, exist_ok=True)
        env.setdefault("TOGETHER_RL_STATE_DIR", str(tmp_path / "state"))  # the create journal of this stack
        self.env = cli_env(bin_dir, tmp_path / "pulumi-home", self.backend, **env)
        self.initialized = False

    # ------------------------------------------------------------------------------------------ commands

    def popen(self, *args: str, stack: bool = True, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
        """Start ``pulumi args [--stack S] --non-interactive`` in its own process group (for signal tests);
        ``prefix`` runs it under another command (``unshare --pid --fork --mount-proc``: a fresh pid
        namespace, as in a container)."""
        return subprocess.Popen(
            [*prefix, "pulumi", *args, *(["--stack", self.name] if stack else []), "--non-interactive"],
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float = 600,
        stack: bool = True,
        prefix: tuple[str, ...] = (),
    ) -> Result:
        process = self.popen(*args, stack=stack, prefix=prefix)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            raise AssertionError(
                f"pulumi {' '.join(args)} did not finish in {timeout} s:\n{stdout}\n{stderr}"
            ) from None
        result = Result(list(args), process.returncode, stdout, stderr)
        if check:
            assert result.returncode == 0, str(result)
        return result

    def init(self, config: dict[str, Any] | None = None, *, api_key: str | None = None) -> CLIStack:
        """``stack init`` with the suite's secrets provider (:mod:`harness.secrets`), then the emulator's URL, the
        key (as a secret) and ``config`` in one ``config set-all``: two commands, however much config."""
        self.run("stack", "init", "--secrets-provider", secrets.provider_url())
        self.initialized = True
        settings: dict[str, Any] = {f"{self.face.config}:baseUrl": self.emulator.base_url, **(config or {})}
        self.set_all(settings, secrets={f"{self.face.config}:apiKey": api_key or self.emulator.api_key})
        return self

    def set(self, key: str, value: Any) -> None:
        self.set_all({key: value})

    def set_all(self, values: Mapping[str, Any], *, secrets: Mapping[str, str] | None = None) -> None:
        """Set every key of ``values`` (and ``secrets``, encrypted) in one ``pulumi config set-all``.

        A list of scalars goes in item by item (``key[i]``, as ``--path``): structured config, which a YAML
        program's typed config needs and ``Config.get_object`` reads too. Anything else nested goes in as its
        JSON text."""
        plain: list[str] = []
        for key, value in values.items():
            if isinstance(value, list) and value and all(isinstance(v, (int, float, str)) for v in value):
                for index, item in enumerate(value):
                    plain += ["--plaintext", f"{key}[{index}]={item}"]
            else:
                text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
                plain += ["--plaintext", f"{key}={text}"]
        hidden = [arg for key, value in (secrets or {}).items() for arg in ("--secret", f"{key}={value}")]
        self.run("config", "set-all", "--path", *plain, *hidden)

    def up(self, *extra: str, check: bool = True, prefix: tuple[str, ...] = ()) -> Result:
        return self.run("up", "--yes", "--skip-preview", *extra, check=check, prefix=prefix)

    def preview(self, *extra: str, check: bool = True) -> Result:
        return self.run("preview", *extra, check=check)

    def outputs(self) -> dict[str, Any]:
        return json.loads(self.run("stack", "output", "--json", "--show-secrets").stdout)

    def export(self) -> str:
        return self.run("stack", "export").stdout

    def resources(self) -> dict[str, dict[str, Any]]:
        """The state's custom resources by name: {name: {id, type, inputs, outputs}}."""
        deployment = json.loads(self.export())["deployment"]
        return {
            entry["urn"].rsplit("::", 1)[1]: entry
            for entry in deployment.get("resources", [])
            if entry.get("custom") and entry["type"].startswith(self.face.type_prefix)
        }

    def destroy(self, *extra: str) -> Result:
        """``destroy``; afterwards nothing the stack held before it is active in the emulator."""
        before = self.held()
        result = self.run("destroy", "--yes", "--skip-preview", *extra)
        left = sorted(before & _active_ids(self.emulator))
        assert not left, f"still active after destroy: {left}\n{result}"
        return result

    def held(self) -> set[str]:
        """Every id the stack's state holds (its resources' and its pending operations'), read from its file
        backend: no CLI command."""
        ids: set[str] = set()
        for path in self.backend.glob(f".pulumi/stacks/**/{self.name}.json"):
            deployment = json.loads(path.read_text()).get("checkpoint", {}).get("latest") or {}
            for resource in deployment.get("resources") or []:
                if resource.get("id"):
                    ids.add(resource["id"])
            for operation in deployment.get("pending_operations") or []:
                if (operation.get("resource") or {}).get("id"):
                    ids.add(operation["resource"]["id"])
        return ids

    def destroy_and_remove(self) -> None:
        """The end of a test: its temporary folder (backend, home, journal) goes with it, and the stack file of
        the project with this; a stack that still holds active objects in the emulator is destroyed, and that
        fails the test (a test destroys what it made, or says why not)."""
        try:
            left = sorted(self.held() & _active_ids(self.emulator)) if self.initialized else []
            if left:
                self.run("destroy", "--yes", "--skip-preview", check=False, timeout=300)
                raise AssertionError(
                    f"stack {self.name} still held active objects at the end of the test ({', '.join(left)}): "
                    "destroyed them now; the test must destroy what it made"
                )
        finally:
            (self.project / f"Pulumi.{self.name}.yaml").unlink(missing_ok=True)


def _active_ids(emulator: Any) -> set[str]:
    now = active(emulator)
    return {o["id"] for o in now["model_resources"] + now["training_sessions"]}


def active(emulator: Any) -> dict[str, list[dict[str, Any]]]:
    """The emulator's objects that are still active (billing, for a model resource)."""
    state = emulator.control.state()
    return {
        "model_resources": [o for o in state["model_resources"] if not o["status"].endswith(RESOURCE_GONE)],
        "training_sessions": [
            o for o in state["training_sessions"] if not o["status"].endswith(SESSION_GONE)
        ],
    }


ESTIMATE = ("POST", "/v1/rl/model-resources/estimate-cost")


def writes(emulator: Any, clear: bool = True, *, estimates: bool = False) -> list[tuple[str, str]]:
    """The emulator's requests that change something since the last clear: (method, path). An estimate-cost
    POST (what check asks at preview) changes nothing and is left out unless ``estimates``."""
    found = [(r["method"], r["path"]) for r in emulator.control.requests(clear=clear) if r["method"] != "GET"]
    return [w for w in found if estimates or w != ESTIMATE]


def provider_pids(state_dir: str, face: Face = DYNAMIC) -> list[int]:
    """The provider processes of ``face`` (``python -m pulumi.dynamic``, or the plugin) whose create journal is
    ``state_dir`` (every stack of a test gets its own ``TOGETHER_RL_STATE_DIR`` unless two stacks share one on
    purpose)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(face.process_mark in part for part in cmdline) and (
            f"TOGETHER_RL_STATE_DIR={state_dir}".encode() in environ
        ):
            pids.append(int(proc.name))
    return pids


def wait_until(predicate: Any, timeout: float, what: str) -> Any:
    """``predicate()``'s first truthy value, polled every 0.2 s; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def processes_of(stack: CLIStack) -> list[int]:
    """Every process started for ``stack`` (its ``PULUMI_HOME`` is in their environment): what a killed CLI
    leaves behind (its language host and plugins live in process groups of their own)."""
    mark = f"PULUMI_HOME={stack.env['PULUMI_HOME']}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def policy_pack(tmp_path: Path, settings: dict[str, Any]) -> tuple[Path, Path]:
    """The policy pack as a user makes it (``python -m pulumi_together_rl policy-pack FOLDER --venv``, this
    checkout's venv) in ``tmp_path/policy``, and ``settings`` written as its config file: (folder, config file),
    for ``pulumi preview --policy-pack FOLDER --policy-pack-config FILE``."""
    folder = tmp_path / "policy"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pulumi_together_rl",
            "policy-pack",
            str(folder),
            "--venv",
            str(ROOT / ".venv"),
        ],
        check=True,
        capture_output=True,
    )
    file = folder / "settings.json"
    file.write_text(json.dumps(settings))
    return folder, file
