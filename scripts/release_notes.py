"""The notes of the release being made (its CHANGELOG.md section), after checking that the release is consistent:
the tag is ``v`` + the package's ``__version__``, CHANGELOG.md has a dated section for that version, and the
workflow runs in the repository that pyproject.toml names (the schema's ``pluginDownloadURL`` points the SDKs at
that repository's releases: published from anywhere else, they would fetch the plugin from the wrong place).

The release workflow runs it before building (.github/workflows/release.yml), and again for the GitHub release's
text. Standard library only: it runs with any ``python3``, before any venv exists.

    python3 scripts/release_notes.py [--tag v0.4.0] [--repository owner/name]

Exit status 1, with one line on stderr, when something disagrees.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    text = (ROOT / "provider" / "pulumi_together_rl" / "__init__.py").read_text()
    (found,) = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    return found


def repository() -> str:
    """``owner/name`` from pyproject.toml's ``[project.urls] Repository``, the one place it is written."""
    text = (ROOT / "pyproject.toml").read_text()
    (found,) = re.findall(r'^Repository = "https://github\.com/([\w.-]+/[\w.-]+)"$', text, re.M)
    return found


def section(changelog: str, ver: str) -> str | None:
    """The body of ``## [ver] - YYYY-MM-DD`` in the changelog, or None if there is no such dated section."""
    match = re.search(
        rf"^## \[{re.escape(ver)}\] - \d{{4}}-\d{{2}}-\d{{2}}\n(.*?)(?=^## |^\[[^\]]+\]: |\Z)",
        changelog,
        re.M | re.S,
    )
    return match.group(1).strip() if match else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check a release and print its notes (CHANGELOG.md section)."
    )
    parser.add_argument("--tag", help="the tag being released (the workflow's github.ref_name)")
    parser.add_argument("--repository", help="owner/name the workflow runs in (github.repository)")
    args = parser.parse_args(argv)
    ver = version()
    problems = []
    if args.tag is not None and args.tag != f"v{ver}":
        problems.append(
            f"the tag {args.tag} is not v{ver}, the version in provider/pulumi_together_rl/__init__.py"
        )
    if args.repository is not None and args.repository.lower() != repository().lower():
        problems.append(
            f"this runs in {args.repository}, but pyproject.toml names {repository()} as the project's "
            "repository (the schema's pluginDownloadURL)"
        )
    notes = section((ROOT / "CHANGELOG.md").read_text(), ver)
    if notes is None:
        problems.append(f"CHANGELOG.md has no section '## [{ver}] - YYYY-MM-DD'")
    if problems:
        print(f"releasing {args.tag or 'v' + ver}: refused, {'; '.join(problems)}.", file=sys.stderr)
        return 1
    print(notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
