"""scripts/pulumi-cli.sh's download path (PULUMI_CLI_FORCE=install): it runs a release archive only when the
archive's SHA-256 is the one the user gives in PULUMI_CLI_SHA256.

The release here is one the test makes (a `pulumi/` folder of stand-in executables, packed as the release packs
it) and serves as a file:// URL through PULUMI_CLI_RELEASES_URL; a stand-in leaves a marker file if anything runs it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pulumi-cli.sh"
VERSION = re.search(
    r"github\.com/pulumi/pulumi/pkg/v3 v([0-9.]+)", (ROOT / "scripts" / "pulumi-cli" / "go.mod").read_text()
).group(1)  # type: ignore[union-attr]
EXECUTABLES = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-pulumi-python",
)


def _platform() -> str:
    system = {"Linux": "linux", "Darwin": "darwin"}[platform.system()]
    return f"{system}-{'arm64' if platform.machine() in ('aarch64', 'arm64') else 'x64'}"


def _release(folder: Path, marker: Path) -> tuple[Path, str]:
    """A release archive of the pinned version in ``folder``; returns it and its SHA-256."""
    tree = folder / "tree" / "pulumi"
    tree.mkdir(parents=True)
    for name in EXECUTABLES:
        (tree / name).write_text(
            f'#!/bin/sh\necho "{name} $*" >> "{marker}"\n[ "$1" != version ] || echo v{VERSION}\n'
        )
        (tree / name).chmod(0o755)
    archive = folder / f"pulumi-v{VERSION}-{_platform()}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="pulumi")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def _provide(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CLI_")}
    return subprocess.run(
        ["bash", str(SCRIPT)],
        env={
            **environ,
            "TOGETHER_RL_CACHE_DIR": str(tmp_path / "cache"),
            "PULUMI_CLI_FORCE": "install",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_release_archive_whose_checksum_differs_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    archive, digest = _release(tmp_path / "releases", marker)
    wrong = hashlib.sha256(b"another archive").hexdigest()

    done = _provide(tmp_path, PULUMI_CLI_RELEASES_URL=archive.parent.as_uri(), PULUMI_CLI_SHA256=wrong)

    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert (
        f"refusing {archive.as_uri()}: its SHA-256 is {digest}, not PULUMI_CLI_SHA256 ({wrong})"
        in done.stderr
    )
    assert not marker.exists()
    assert not (tmp_path / "cache" / "pulumi-cli" / f"v{VERSION}").exists()
    assert [p.name for p in (tmp_path / "cache" / "pulumi-cli").iterdir()] == [".lock"]  # no download kept


def test_without_a_checksum_nothing_is_downloaded(tmp_path):
    marker = tmp_path / "ran"
    archive, _ = _release(tmp_path / "releases", marker)

    done = _provide(tmp_path, PULUMI_CLI_RELEASES_URL=archive.parent.as_uri())

    assert done.returncode == 1 and done.stdout == ""
    assert f"not downloading {archive.name}: set PULUMI_CLI_SHA256" in done.stderr
    assert not marker.exists()
    assert not (tmp_path / "cache" / "pulumi-cli" / f"v{VERSION}").exists()


def test_a_checksum_that_is_no_sha256_is_refused(tmp_path):
    archive, _ = _release(tmp_path / "releases", tmp_path / "ran")

    done = _provide(tmp_path, PULUMI_CLI_RELEASES_URL=archive.parent.as_uri(), PULUMI_CLI_SHA256="latest")

    assert done.returncode == 1
    assert "PULUMI_CLI_SHA256 is not a SHA-256 (64 hex digits)" in done.stderr


def test_a_release_archive_with_the_given_checksum_is_unpacked_into_the_cache(tmp_path):
    marker = tmp_path / "ran"
    archive, digest = _release(tmp_path / "releases", marker)

    done = _provide(
        tmp_path, PULUMI_CLI_RELEASES_URL=archive.parent.as_uri(), PULUMI_CLI_SHA256=digest.upper()
    )

    assert done.returncode == 0, done.stderr
    folder = tmp_path / "cache" / "pulumi-cli" / f"v{VERSION}" / "bin"
    assert done.stdout == f"{folder}\n"
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXECUTABLES)
    assert marker.read_text() == "pulumi version\n"  # the script's own check of what it unpacked
