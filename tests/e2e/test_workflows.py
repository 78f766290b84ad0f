"""Every GitHub Actions workflow of the repository passes two linters: actionlint (syntax, expressions, job
graph, action inputs; built from its Go module at the version scripts/actionlint/go.mod pins) and zizmor (the
security audits: template injection, credentials left in .git/config, excessive permissions, cache poisoning in
a release, unpinned actions...; the dev dependency pinned in pyproject.toml, run offline, every finding counted).

Every workflow means the release workflow (.github/workflows/) and the ones the gitops example tells users to copy
(examples/gitops/.github/workflows/): whatever git tracks under a .github/workflows/ folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness.cli import ROOT, unavailable

pytestmark = [pytest.mark.release, pytest.mark.timeout(900)]  # the release tier (make test-release)

NOT_PROVIDED = 3  # scripts/actionlint.sh: no Go, or the build failed


def workflows() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.github/workflows/*.yml", "*.github/workflows/*.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = [ROOT / name for name in listed.stdout.split("\0") if name]
    assert ROOT / ".github" / "workflows" / "release.yml" in found, found
    assert any("examples/gitops" in str(path) for path in found), found
    return found


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_actionlint_finds_nothing_in_any_workflow():
    provided = run(["bash", str(ROOT / "scripts" / "actionlint.sh")])
    if provided.returncode == NOT_PROVIDED:
        unavailable(f"scripts/actionlint.sh could not provide actionlint: {provided.stderr.strip()}")
    assert provided.returncode == 0, provided.stderr
    actionlint = provided.stdout.strip().splitlines()[-1]
    # The shell checks of `run:` scripts are shellcheck's, a tool of its own that the machine may or may not have:
    # off, so that the verdict does not depend on the machine.
    result = run([actionlint, "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", *map(str, workflows())])
    assert result.returncode == 0, f"actionlint:\n{result.stdout}{result.stderr}"


def test_zizmor_finds_nothing_in_any_workflow():
    zizmor = shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if not zizmor:
        unavailable(
            "zizmor is not in this venv (a dev dependency for Python >= 3.11): `make sync` on Python 3.11+"
        )
    # --offline: no GitHub API (the audits that ask it whether a pinned SHA is a tag's are left out). The pedantic
    # persona: every finding, the low-confidence ones too (a job without a name, a write permission without a
    # comment saying why, a workflow without a concurrency limit).
    result = run(
        [
            zizmor,
            "--offline",
            "--no-progress",
            "--format",
            "plain",
            "--persona",
            "pedantic",
            *map(str, workflows()),
        ]
    )
    assert result.returncode == 0, f"zizmor:\n{result.stdout}{result.stderr}"
