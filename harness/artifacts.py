"""A release's artifacts, installed as a user installs them, with no checkout on the path: for the release tier's
artifact tests (tests/e2e/test_artifacts.py).

* :func:`provide_dist`: the artifacts of ``make dist``. The folder ``TOGETHER_RL_DIST`` names (the release
  workflow's, downloaded from its build job), checked against its ``SHA256SUMS``; else built once per test run by
  ``scripts/dist.py`` (what ``make dist`` runs) into a folder that every pytest-xdist worker of the run shares,
  the first worker building behind a file lock while the others wait for it.
* :func:`scratch`: a folder outside the repository holding ``dist/`` (copies of the artifacts) and nothing else,
  where the README's install commands run as written.
* :class:`ReleaseServer`: a loopback HTTP server in place of GitHub's release downloads: ``/releases/<file>``
  serves the artifacts as the GitHub release does (the engine's plugin download, redirected to it by
  ``PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES``).
* :func:`user_env`: a user's shell: the Pulumi CLI, uv and a plain Python on ``PATH`` (never this repository's
  venv), no setting of this project, pip or uv (so every package comes from the public index, PyPI, and
  npm's from its registry), and a Pulumi home and file backend of the test's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import http.server
import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

from .cli import PASSPHRASE, ROOT

DIST_ENV = "TOGETHER_RL_DIST"
BUILD_TIMEOUT = 1200  # seconds: a cold machine fetches the build backends and every dependency


@functools.cache
def dist_script() -> ModuleType:
    """scripts/dist.py, the one place the artifacts' names and contents are decided."""
    spec = importlib.util.spec_from_file_location("together_rl_dist", ROOT / "scripts" / "dist.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True)
class Dist:
    folder: Path
    version: str
    seconds: float  # how long the build took here (0: built elsewhere)

    def path(self, name: str) -> Path:
        found = self.folder / name
        assert found.is_file(), f"{name} is not among the artifacts in {self.folder}"
        return found

    @property
    def wheel(self) -> Path:
        return self.path(f"pulumi_together_rl-{self.version}-py3-none-any.whl")

    @property
    def sdk_wheel(self) -> Path:
        return self.path(f"pulumi_together_rl_sdk-{self.version}-py3-none-any.whl")

    @property
    def npm_tarball(self) -> Path:
        return self.path(f"pulumi-together-rl-sdk-{self.version}.tgz")

    def archive(self, os_name: str, arch: str) -> Path:
        return self.path(dist_script().archive_name(self.version, os_name, arch))

    def host_archive(self) -> Path:
        """The plugin archive of this machine's os and arch, the one the engine would download here."""
        arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[
            platform.machine().lower()
        ]
        return self.archive(platform.system().lower(), arch)

    def sums(self) -> dict[str, str]:
        """{file name: SHA-256} as SHA256SUMS lists them."""
        lines = (self.folder / dist_script().SUMS).read_text().splitlines()
        return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shared_folder(basetemp: Path) -> Path:
    """The folder every pytest-xdist worker of this run shares: the parent of a worker's basetemp."""
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "release-artifacts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker builds; the others wait here, then reuse
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(
    args: list[str], what: str, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(
            args, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{what} did not finish in {BUILD_TIMEOUT} s") from exc
    assert result.returncode == 0, f"{what} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _uv() -> list[str]:
    """The uv command: $UV (`uv run` sets it; `python3 -m uv` where the Makefile installed it so), else PATH's."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "no uv on PATH: the artifacts are built and installed with it"
    return shlex.split(uv)


def provide_dist(shared: Path) -> Dist:
    version = dist_script().version()
    handed = os.environ.get(DIST_ENV)
    if handed:
        dist = Dist(Path(handed).resolve(), version, 0.0)
        listed = dist.sums()
        assert listed, f"{DIST_ENV}={handed}: SHA256SUMS lists nothing"
        for name, digest in listed.items():
            assert sha256(dist.path(name)) == digest, f"{DIST_ENV}={handed}: {name} does not match SHA256SUMS"
        return dist
    folder = shared / "dist"
    with _locked(shared):
        done = shared / "dist.seconds"
        if not done.exists():
            started = time.monotonic()
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
            _run(
                [sys.executable, str(ROOT / "scripts" / "dist.py"), "--out", str(folder)],
                "scripts/dist.py",
                env=env,
                cwd=ROOT,
            )
            done.write_text(f"{time.monotonic() - started:.1f}")
        return Dist(folder, version, float(done.read_text()))


def base_python() -> Path:
    """The interpreter this test run's venv was made from: a plain Python, as a user's (uv's projects and the
    plugin's venv are made with it)."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def scratch(dist: Dist, folder: Path) -> Path:
    """``folder`` (made here) holding ``dist/``, a copy of every artifact and nothing else: a user's folder with a
    release's files, where the README's commands run as written."""
    copy = folder / "dist"
    copy.mkdir(parents=True)
    for path in dist.folder.iterdir():
        shutil.copy2(path, copy / path.name)
    return folder


class ReleaseServer:
    """GitHub's release downloads on loopback: ``/releases/<file>`` serves each artifact of ``dist``."""

    def __init__(self, dist: Dist):
        self.dist = dist
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.requests: list[str] = []
        """Every path asked for, in order."""

    def __enter__(self) -> ReleaseServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def releases(self) -> str:
        """The URL that stands in for the project's GitHub releases (``/releases/<file>``)."""
        return f"{self.url}/releases"

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = unquote(self.path.split("?", 1)[0])
                server.requests.append(path)
                name = path.rsplit("/", 1)[-1]
                if not (path.startswith("/releases/") and (server.dist.folder / name).is_file()):
                    self.send_error(404)
                    return
                body = (server.dist.folder / name).read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


INDEX_SETTINGS = ("PIP_", "UV_", "npm_", "NPM_CONFIG_")
"""The prefixes of every setting that could point pip, uv or npm at another index (``PIP_FIND_LINKS``,
``UV_INDEX_URL``, ...): none reaches a user's shell."""


def user_env(
    tmp: Path, *, bin_dirs: tuple[str, ...] = (), server: ReleaseServer | None = None, **extra: str
) -> dict[str, str]:
    """A user's environment in ``tmp``: ``bin_dirs`` (the Pulumi CLI, a language host), uv and the plain Python
    first on PATH, nothing of this repository (its venv, its package, its TOGETHER_*/PULUMI_* settings), no
    setting of pip, uv or npm (every package from the public index), ``server`` instead of GitHub's releases, and
    ``extra`` (a bucket's credentials)."""
    here = str(ROOT)
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOGETHER_", "PULUMI_", "VIRTUAL_ENV", "PYTHON", *INDEX_SETTINGS))
        and k not in ("PWD", "OLDPWD")
    }
    uv_dir = str(Path(shutil.which("uv") or _uv()[0]).parent)  # the README's commands run `uv`
    path = [*bin_dirs, str(base_python().parent), uv_dir]
    path += [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not p.startswith(here) and p not in path
    ]
    home = tmp / "pulumi-home"
    backend = tmp / "backend"
    for folder in (home, backend):
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        **keep,
        "PATH": os.pathsep.join(path),
        "HOME": os.environ.get("HOME", str(tmp)),
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        "TOGETHER_RL_STATE_DIR": str(tmp / "journal"),
        "TOGETHER_RL_POLL_INTERVAL": "0.2",
        # uv's Python: the one this run's venv was made from, rather than one uv would download.
        "UV_PYTHON": str(base_python()),
        **extra,
    }
    if server is not None:
        from pulumi_together_rl.plugin.package_schema import plugin_download_url

        source = plugin_download_url().replace(".", r"\.")
        env["PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES"] = f"^{source}={server.releases()}"
    return env
