"""What the repository runs from elsewhere is pinned: every GitHub Action by the full commit SHA of its release,
uv to one version wherever it is installed, the build backend to one version; and no test stack's config file
is committed."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def _tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / name for name in listed.stdout.split("\0") if name]


def _workflows() -> list[Path]:
    found = _tracked("*.github/workflows/*.yml", "*.github/workflows/*.yaml")
    assert found, "no workflow found: the pattern no longer matches the repository's layout"
    return found


def _uses(workflow: Path) -> list[str]:
    """The text after every `uses:` of the file, comment included (YAML drops comments: read the lines)."""
    return [
        line.split("uses:", 1)[1].strip()
        for line in workflow.read_text().splitlines()
        if re.match(r"^\s*(-\s+)?uses:", line)
    ]


def test_every_action_is_pinned_by_a_full_commit_sha_with_its_release_tag_beside_it():
    for workflow in _workflows():
        steps = [
            step
            for job in yaml.safe_load(workflow.read_text())["jobs"].values()
            for step in job.get("steps", [])
            if "uses" in step
        ]
        uses = _uses(workflow)
        assert len(uses) == len(steps), workflow  # every `uses:` line is a step's
        unpinned = [text for text in uses if not PINNED.match(text)]
        assert unpinned == [], f"{workflow.relative_to(ROOT)}: {unpinned}"
        # One action, one pin: the same action is never at two commits.
        pins: dict[str, set[str]] = {}
        for text in uses:
            action, _, ref = text.partition("@")
            pins.setdefault(action, set()).add(ref)
        assert all(len(refs) == 1 for refs in pins.values()), pins


def test_uv_is_one_exact_version_wherever_it_is_installed():
    makefile = (ROOT / "Makefile").read_text()
    (version,) = re.findall(r"^UV_VERSION := (\S+)$", makefile, re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert '"uv==$(UV_VERSION)"' in makefile and "uv>=" not in makefile
    setups = [
        step
        for workflow in _workflows()
        for job in yaml.safe_load(workflow.read_text())["jobs"].values()
        for step in job.get("steps", [])
        if step.get("uses", "").startswith("astral-sh/setup-uv@")
    ]
    assert setups and all(step.get("with", {}).get("version") == version for step in setups), setups


def test_the_build_backend_is_one_exact_version():
    # Read without tomllib (Python >= 3.11 only): the section's `requires = [...]` line is a Python list literal.
    section = (ROOT / "pyproject.toml").read_text().split("[build-system]", 1)[1].split("\n[", 1)[0]
    (line,) = [line for line in section.splitlines() if line.startswith("requires = ")]
    requires = ast.literal_eval(line.split("=", 1)[1].strip())
    assert [re.fullmatch(r"hatchling==\d+\.\d+\.\d+", r) is not None for r in requires] == [True], requires


def test_no_stack_config_of_a_test_stack_is_committed_and_git_ignores_them():
    assert _tracked("*Pulumi.e2e-*.yaml") == []
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "examples/python-sdk/Pulumi.e2e-0123abcd.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ignored.returncode == 0, ignored
