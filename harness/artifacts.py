"""A release's artifacts, installed as a user installs them, with no checkout on the path: for the release tier's
artifact tests (tests/e2e/test_artifacts.py).

* :func:`provide_dist`: the artifacts of ``make dist``. The folder ``TOGETHER_RL_DIST`` names (the release
  workflow's, downloaded from its build job), checked against its ``SHA256SUMS``; else built once per test run by
  ``scripts/dist.py`` (what ``make dist`` runs) into a folder that every pytest-xdist worker of the run shares,
  the first worker building behind a file lock while the others wait for it.
* :func:`provide_index`: a local package index in place of PyPI, a ``--find-links`` folder: the built wheels,
  every runtime dependency the lock pins (``uv export`` of uv.lock, downloaded by pip with their hashes, for this
  Python), and pip, setuptools and wheel, which the Python language host upgrades in a plugin's new venv before it
  installs the plugin's requirements. Built once per run beside the artifacts, under the same lock.
* :class:`ReleaseServer`: a loopback HTTP server in place of GitHub and npm: ``/releases/<file>`` serves the
  artifacts as the GitHub release does (the engine's plugin download, redirected to it by
  ``PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES``), and the ``@pulumi-together-rl`` scope of an npm registry serves the
  TypeScript SDK's tarball (the rest of npm stays the real registry).
* :func:`user_env`: a user's shell: the Pulumi CLI, uv and a plain Python on ``PATH`` (never this repository's
  venv), every index swapped for the local ones, and a Pulumi home and file backend of the test's own.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import http.server
import importlib.util
import io
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

from .cli import PASSPHRASE, ROOT

DIST_ENV = "TOGETHER_RL_DIST"
NPM_SCOPE = "@pulumi-together-rl"
# What the Python language host's pip toolchain installs into a new plugin venv before the requirements
# (`pip install --upgrade pip setuptools wheel`): with no index but the local one, these must be in it.
VENV_TOOLS = ("pip==26.3", "setuptools==84.2.1", "wheel==0.48.0", "packaging==26.4")
PIP = "pip==26.3"  # the pip that downloads the index (uv has no `pip download`)
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
    """The interpreter this test run's venv was made from: a plain Python, as a user's (the index is built for
    its version)."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def provide_index(dist: Dist, shared: Path) -> Path:
    index = shared / "index"
    with _locked(shared):
        if not (index / ".complete").exists():
            shutil.rmtree(index, ignore_errors=True)
            index.mkdir(parents=True)
            uv = _uv()
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
            exported = _run(
                [*uv, "export", "--frozen", "--no-dev", "--extra", "emulator", "--extra", "policy",
                 "--no-emit-project", "--no-header", "--format", "requirements-txt"],
                "uv export", cwd=ROOT, env=env,
            )  # fmt: skip
            requirements = index / ".requirements.txt"
            requirements.write_text(exported.stdout)
            download = [*uv, "tool", "run", "--python", str(base_python()), "--from", PIP, "pip", "download",
                        "--disable-pip-version-check", "--only-binary=:all:", "--dest", str(index)]  # fmt: skip
            _run(
                [*download, "--no-deps", "--require-hashes", "-r", str(requirements)],
                "pip download (locked)",
                env=env,
            )
            _run([*download, *VENV_TOOLS], "pip download (venv tools)", env=env)
            for built in (dist.wheel, dist.sdk_wheel):
                shutil.copy2(built, index / built.name)
            (index / ".complete").write_text("")
    return index


class ReleaseServer:
    """GitHub's release downloads and the npm registry's ``@pulumi-together-rl`` scope, on loopback."""

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

    def packument(self) -> dict:
        """The npm registry's document of the SDK package: its one version, the tarball here."""
        tarball = self.dist.npm_tarball
        data = tarball.read_bytes()
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.extractfile("package/package.json")
            assert member is not None
            manifest = json.load(member)
        manifest["dist"] = {
            "tarball": f"{self.url}/npm/{tarball.name}",
            "shasum": hashlib.sha1(data).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
        }
        version = manifest["version"]
        return {"name": manifest["name"], "dist-tags": {"latest": version}, "versions": {version: manifest}}

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = unquote(self.path.split("?", 1)[0])
                server.requests.append(path)
                body, kind = None, "application/octet-stream"
                name = path.rsplit("/", 1)[-1]
                if path.startswith(("/releases/", "/npm/")) and (server.dist.folder / name).is_file():
                    body = (server.dist.folder / name).read_bytes()
                elif path.lower() == f"/{NPM_SCOPE}/sdk":
                    body, kind = json.dumps(server.packument()).encode(), "application/json"
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def user_env(
    tmp: Path, index: Path, *, bin_dirs: tuple[str, ...] = (), server: ReleaseServer | None = None
) -> dict[str, str]:
    """A user's environment in ``tmp``: ``bin_dirs`` (the Pulumi CLI, a language host), uv and the plain Python
    first on PATH, nothing of this repository (its venv, its package, its TOGETHER_*/PULUMI_* settings), the local
    index instead of PyPI for uv and pip, and ``server`` instead of GitHub's releases."""
    here = str(ROOT)
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOGETHER_", "PULUMI_", "UV_", "PIP_", "VIRTUAL_ENV", "PYTHON", "npm_"))
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
        # The index swapped: uv (the README's commands) and pip (the language host's, in a plugin's venv).
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(index),
        "UV_PYTHON": str(base_python()),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(index),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if server is not None:
        from pulumi_together_rl.plugin.package_schema import plugin_download_url

        source = plugin_download_url().replace(".", r"\.")
        env["PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES"] = f"^{source}={server.releases()}"
    return env
