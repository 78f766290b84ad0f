"""Earlier releases of this project, built from this repository's history, for the upgrade tests
(tests/e2e/test_upgrade.py).

:func:`build` writes one release's tree into a folder with ``git archive`` (the commit's files exactly; unlike
``git worktree add`` it registers nothing in the repository, so a killed run leaves nothing to prune and two runs
never contend for the worktree lock), then syncs that tree's own venv from that tree's own uv.lock with
``uv sync --frozen --no-dev``: the package and its runtime dependencies, which is all a Pulumi program of the
release and its dynamic provider run with. An example of the tree (``examples/sweep``: ``virtualenv:
../../.venv``) then runs with the release's code, as a user's stack made by that release did.

Nothing is recorded, so nothing can go stale. Everything that goes wrong here (a commit missing from a shallow
clone, git, uv, PyPI) raises AssertionError, which fails the test: only a missing Pulumi CLI skips one.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from harness.artifacts import base_python
from harness.cli import ROOT

SYNC_TIMEOUT = 1200  # seconds: a fresh machine downloads the release's wheels from PyPI


@dataclasses.dataclass(frozen=True)
class Release:
    revision: str  # as listed: a commit or a tag
    commit: str  # the full commit it names
    root: Path  # the release's tree, its .venv inside
    seconds: float  # how long the build took

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"

    def example(self, name: str) -> Path:
        return self.root / "examples" / name


def _git(*args: str, text: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=text, timeout=300, check=False)


def resolve(revision: str) -> str:
    """The full commit that ``revision`` names in this repository; a clear failure where it is not there."""
    found = _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode == 0:
        return found.stdout.strip()
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    raise AssertionError(
        f"release {revision} is not a commit of this clone ({ROOT})"
        + (
            ": the clone is shallow; fetch the whole history (`git fetch --unshallow --tags`, or "
            "actions/checkout with fetch-depth: 0)"
            if shallow
            else ": fetch it (`git fetch --tags origin`), or fix the list of releases"
        )
    )


def release_tags() -> dict[str, str]:
    """{tag: commit} of this repository's release tags (``v`` and a digit, or a digit: ``v0.2.0``, ``1.0``)."""
    listed = _git("tag", "--list", "v[0-9]*", "[0-9]*")
    assert listed.returncode == 0, f"git tag --list failed: {listed.stderr}"
    return {name: resolve(f"refs/tags/{name}") for name in listed.stdout.split()}


def build(revision: str, dest: Path) -> Release:
    """The release ``revision`` in ``dest`` (an empty or missing folder), with its venv synced."""
    started = time.monotonic()
    commit = resolve(revision)
    dest.mkdir(parents=True, exist_ok=True)
    archive = _git("archive", "--format=tar", commit, text=False)
    assert archive.returncode == 0, f"git archive {commit} failed: {archive.stderr.decode(errors='replace')}"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # The "tar" filter where this Python has extraction filters (3.12, and 3.10/3.11 security releases).
        tar.extractall(dest, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))

    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "no `uv` on PATH: the old release's venv cannot be synced"
    # The release's own project and lock, never the caller's venv (`uv run` exports VIRTUAL_ENV); on the interpreter
    # this run's venv was made from, as a team runs every release of a stack on one Python (the state's pickled
    # provider needs its minor version), and the optimized one where `make sync` chose it (scripts/venv-python.sh).
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    env["UV_PYTHON"] = str(base_python())
    try:
        sync = subprocess.run(
            [uv, "sync", "--frozen", "--no-dev"],
            cwd=dest,
            env=env,
            capture_output=True,
            text=True,
            timeout=SYNC_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"uv sync of release {revision} did not finish in {SYNC_TIMEOUT} s") from exc
    assert sync.returncode == 0, (
        f"uv sync --frozen --no-dev of release {revision} ({dest}) failed:\n{sync.stdout}\n{sync.stderr}"
    )
    release = Release(revision, commit, dest, 0.0)
    # The venv runs the release's own package, from its own tree.
    where = subprocess.run(
        [str(release.python), "-c", "import pulumi_together_rl; print(pulumi_together_rl.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert where.returncode == 0, f"release {revision}'s venv cannot import its package:\n{where.stderr}"
    package = Path(where.stdout.strip()).resolve()
    assert package.is_relative_to((dest / "provider").resolve()), (
        f"release {revision}'s venv imports pulumi_together_rl from {package}, not from its own tree {dest}"
    )
    return dataclasses.replace(release, seconds=time.monotonic() - started)
