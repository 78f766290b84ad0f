"""Runners: stand-ins for the machines a team's `pulumi up` runs on (a laptop, a CI runner that is thrown away).

A :class:`Runner` is a :class:`~harness.cli.CLIStack` with a machine of its own: its own ``HOME``, ``PULUMI_HOME``,
XDG state, config and cache folders (so the local create journal, ``${XDG_STATE_HOME}/pulumi-together-rl``, is
the runner's own), its own ``TMPDIR``, and its own copy of the program, logged into a bucket backend with
``pulumi login`` (the provider finds the backend the way the CLI does: the login's ``current``). Two runners of one
stack share only the bucket and the stack's config file (``Pulumi.<stack>.yaml``, what a repository holds).

What happens to a machine is done to every process it runs: :meth:`Runner.kill` SIGKILLs the whole process tree
of the runner (each descendant of each command it started, found through ``/proc`` and frozen with SIGSTOP before
anything is killed, so that no child escapes by being reparented, plus any process that carries the runner's
``PULUMI_HOME``); :meth:`Runner.throw_away` is that and the deletion of its folders (a CI runner gone for good);
:meth:`Runner.github_cancel` is what GitHub Actions does to a cancelled job's step: SIGINT to the command, SIGTERM
7.5 s later, then SIGKILL of the tree 2.5 s after that (and of what is left of it when the step ends earlier:
the runner cleans up orphan processes at the end of the job).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .bucket import Bucket
from .cli import CLIStack, Result, cli_env, processes_of
from .faces import DYNAMIC, Face

GITHUB_SIGTERM_AFTER = 7.5
"""Seconds between GitHub Actions' SIGINT and SIGTERM of a cancelled step."""
GITHUB_SIGKILL_AFTER = 2.5
"""Seconds between that SIGTERM and the SIGKILL of the process tree."""


class Running:
    """A command started in its own session, its output read as it comes (so that a test can wait for a line)."""

    def __init__(self, args: list[str], process: subprocess.Popen[str]) -> None:
        self.args = args
        self.process = process
        self._lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._lock = threading.Lock()
        self._readers = [
            threading.Thread(target=self._read, args=(stream, name), daemon=True)
            for stream, name in ((process.stdout, "stdout"), (process.stderr, "stderr"))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, name: str) -> None:
        for line in stream:
            with self._lock:
                self._lines[name].append(line)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> str:
        """Everything it printed so far (stdout, then stderr)."""
        with self._lock:
            return "".join(self._lines["stdout"]) + "".join(self._lines["stderr"])

    def wait_for_output(self, text: str, timeout: float) -> None:
        """Until ``text`` shows in its output; fails when it ends without it or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.process.poll() is not None:
                self._join()
                if text in self.output:
                    return
                raise AssertionError(
                    f"`{' '.join(self.args)}` ended without printing {text!r}:\n{self.output}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"`{' '.join(self.args)}` did not print {text!r} in {timeout} s:\n{self.output}"
                )
            time.sleep(0.1)

    def finish(self, timeout: float = 300) -> Result:
        """Wait for it to end: its :class:`~harness.cli.Result`."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"`{' '.join(self.args)}` did not end in {timeout} s:\n{self.output}"
            ) from None
        self._join()
        with self._lock:
            stdout, stderr = "".join(self._lines["stdout"]), "".join(self._lines["stderr"])
        return Result(self.args, self.process.returncode, stdout, stderr)

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(timeout=10)


def kill_frozen(find: Callable[[], set[int]]) -> set[int]:
    """SIGKILL every process ``find()`` names, frozen first (SIGSTOP, looking again until nothing new shows up)
    so that none forks or is reparented away between the look and the kill: a machine going down. Returns
    the processes killed."""
    frozen: set[int] = set()
    while found := find() - frozen:
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        frozen |= found
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return frozen


def machine_folders(root: Path) -> dict[str, Path]:
    """A machine's own folders under ``root``, made: the environment variables that name them (``HOME``,
    ``PULUMI_HOME``, the XDG folders, ``TMPDIR``) -> where they are."""
    home = root / "home"
    folders = {
        "HOME": home,
        "PULUMI_HOME": home / ".pulumi",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_CACHE_HOME": home / ".cache",
        "TMPDIR": root / "tmp",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return folders


class Runner(CLIStack):
    """One machine running one stack of ``project`` against ``emulator``, its state in ``bucket`` (see the module
    docstring). ``like``: another runner of the same stack, whose program copy (and so the stack's config file)
    this one starts from, as two CI runners check out one repository."""

    def __init__(
        self,
        project: Path,
        root: Path,
        emulator: Any,
        bucket: Bucket,
        *,
        bin_dir: str,
        name: str | None = None,
        face: Face = DYNAMIC,
        like: Runner | None = None,
        **env: str | None,
    ) -> None:
        self.root = root
        self.bucket = bucket
        self.gone = False
        folders = machine_folders(root)
        program = root / "program"
        _copy_program(like.project if like is not None else project, project, program)
        self.project = program
        self.face = like.face if like is not None else face
        self.emulator = emulator
        self.name = like.name if like is not None else (name or f"runner-{root.name}")
        self.tmp = root
        self.backend = root / "no-file-backend"  # never made: the state is in the bucket (see held)
        self.initialized = like.initialized if like is not None else False
        # The uv cache is the machine image's toolchain, not its state: shared, so that a runner does not fetch
        # the program's Python packages again.
        uv_cache = os.environ.get("UV_CACHE_DIR") or _uv_cache_dir()
        self.env = cli_env(
            bin_dir,
            folders["PULUMI_HOME"],
            None,
            **{key: str(path) for key, path in folders.items() if key != "PULUMI_HOME"},
            **bucket.env,
            **({"UV_CACHE_DIR": uv_cache} if uv_cache else {}),
            **env,
        )
        self.started: list[Running] = []

    # ------------------------------------------------------------------------------------------ commands

    def login(self) -> Runner:
        """``pulumi login <bucket URL>``: what the runner's CLI and provider take the backend from."""
        self.run("login", self.bucket.url, stack=False)
        return self

    def init(self, config: dict[str, Any] | None = None, *, api_key: str | None = None) -> Runner:
        super().init(config, api_key=api_key)
        return self

    def start(self, *args: str) -> Running:
        """Start ``pulumi args --stack S --non-interactive`` in a session of its own, its output read as it comes."""
        running = Running(["pulumi", *args], self.popen(*args))
        self.started.append(running)
        return running

    def start_up(self) -> Running:
        return self.start("up", "--yes", "--skip-preview")

    def module(self, *args: str, check: bool = False, timeout: float = 300) -> Result:
        """``python -m pulumi_together_rl args`` on this machine (its folders, its login), in the program's folder."""
        command = [sys.executable, "-m", "pulumi_together_rl", *args]
        result = subprocess.run(
            command,
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        outcome = Result(command[1:], result.returncode, result.stdout, result.stderr)
        if check:
            assert outcome.returncode == 0, str(outcome)
        return outcome

    def held(self) -> set[str]:
        """Every id the stack's state holds (its resources' and its pending operations'), from ``stack export``."""
        import json

        deployment = json.loads(self.export()).get("deployment") or {}
        ids = {r["id"] for r in deployment.get("resources") or [] if r.get("id")}
        for operation in deployment.get("pending_operations") or []:
            if (operation.get("resource") or {}).get("id"):
                ids.add(operation["resource"]["id"])
        return ids

    # ------------------------------------------------------------------------------------------ the machine

    def processes(self) -> set[int]:
        """Every live process of this machine: the trees of the commands it started, and whatever carries its
        ``PULUMI_HOME`` (a plugin whose parent is gone)."""
        roots = {running.pid for running in self.started if running.process.poll() is None}
        return descendants(roots) | set(processes_of(self))

    def kill(self) -> None:
        """SIGKILL every process of the machine at once (frozen first, so none forks or is reparented away
        between the look and the kill), and reap the commands it started."""
        frozen = kill_frozen(self.processes)
        for running in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                running.process.wait(timeout=30)
        # A SIGKILL is delivered, not done: the machine is down once none of them runs any more.
        deadline = time.monotonic() + 30
        while descendants(frozen) and time.monotonic() < deadline:
            time.sleep(0.02)

    def throw_away(self) -> None:
        """The runner is gone: every process killed, every folder (home, journal, program copy) deleted."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
        self.gone = True

    def github_cancel(self, running: Running) -> Result:
        """GitHub Actions' cancel of the step running ``running``: SIGINT to it, SIGTERM 7.5 s later if it still
        runs, SIGKILL of the machine's processes 2.5 s after that; what is left then is killed too (the runner
        kills orphan processes when the job ends). Its result, as far as it got."""
        process = running.process
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        for sent, wait in ((signal.SIGINT, GITHUB_SIGTERM_AFTER), (signal.SIGTERM, GITHUB_SIGKILL_AFTER)):
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                if sent == signal.SIGINT:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
        self.kill()
        return running.finish(timeout=30)

    def destroy_and_remove(self) -> None:
        """The end of a test: the machine's processes are killed; a stack that still holds active objects is
        destroyed from here, and that fails the test (see :meth:`CLIStack.destroy_and_remove`)."""
        self.kill()
        if not self.gone:
            super().destroy_and_remove()


def descendants(roots: set[int]) -> set[int]:
    """Those of ``roots`` that still run, and every running process descending from them (``/proc/<pid>/stat``'s
    parent pid)."""
    children: dict[int, list[int]] = {}
    live: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            continue  # ended: a zombie runs nothing, whoever reaps it
        live.add(int(proc.name))
        children.setdefault(int(fields[1]), []).append(int(proc.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in found or pid not in live:
            continue
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def _copy_program(source: Path, original: Path, target: Path) -> None:
    """A copy of the program folder ``source`` at ``target`` (a checkout on another machine), with the paths its
    project file gives relative to ``original`` (the repository's venv, the plugin's folder) made absolute."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", ".pulumi"))
    project_file = target / "Pulumi.yaml"
    data = yaml.safe_load(project_file.read_text())
    options = (data.get("runtime") or {}).get("options") if isinstance(data.get("runtime"), dict) else None
    if isinstance(options, dict) and options.get("virtualenv"):
        options["virtualenv"] = str((original / options["virtualenv"]).resolve())
    for plugin in (data.get("plugins") or {}).get("providers") or []:
        if isinstance(plugin, dict) and plugin.get("path") and not os.path.isabs(plugin["path"]):
            plugin["path"] = str((original / plugin["path"]).resolve())
    project_file.write_text(yaml.safe_dump(data, sort_keys=False))


def _uv_cache_dir() -> str | None:
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, timeout=30, check=True)
        return found.stdout.strip() or None
    return None
