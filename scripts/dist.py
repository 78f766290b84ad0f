"""``make dist``: every artifact of a release, built from this tree into ``dist/`` (or ``--out DIR``).

* the package's wheel and sdist (``pulumi_together_rl-<V>-py3-none-any.whl``, ``pulumi_together_rl-<V>.tar.gz``);
* the provider plugin's archives, ``pulumi-resource-together-rl-v<V>-<os>-<arch>.tar.gz`` for linux and darwin
  (amd64, arm64) and windows (amd64): what ``pulumi plugin install resource together-rl <V>`` unpacks, and what
  the engine downloads from the GitHub release that the schema's ``pluginDownloadURL`` names. Each is the same
  pure-Python folder, and installs from itself: ``PulumiPlugin.yaml`` (``runtime: python``), the launcher
  ``__main__.py``, the package's own wheel, and ``requirements.txt``: that wheel by relative path with its
  ``bucket`` extra (a stack whose state is in a bucket keeps its journal there) and its SHA-256, then every
  runtime dependency as uv.lock pins it, with its hashes (``uv export``). The engine has the Python language
  host make the plugin's venv and run ``pip install -r requirements.txt`` in the plugin's folder at install time,
  with the user's own Python: pip installs in hash-checking mode, takes nothing of this project from an index
  (the archive works before the package is on PyPI), no wheel built for another Python lands there, and no pip
  runs during a preview;
* the generated SDKs, from the checked-in ``sdk/`` (``make sdk``; a release-tier test holds them to the schema):
  the Python SDK's wheel (``pulumi_together_rl_sdk-<V>-py3-none-any.whl``), the TypeScript SDK's npm tarball
  (``pulumi-together-rl-sdk-<V>.tgz``), the Go module as the Go module proxy serves it
  (``pulumi-together-rl-sdk-go-<V>.zip``: every file under ``<module>@v<V>/``), and the sources of the Java and
  .NET SDKs with their build files (``pulumi-together-rl-sdk-java-<V>.tar.gz``,
  ``pulumi-together-rl-sdk-dotnet-<V>.tar.gz``: one folder of that name; Gradle and ``dotnet pack`` build them,
  neither runs here);
* ``SHA256SUMS``: the SHA-256 of every file above, in ``sha256sum -c`` form.

The version is the package's ``__version__`` (provider/pulumi_together_rl/__init__.py), which the SDKs and the
schema carry too: a mismatch stops the build. Needs uv (the Makefile's) and npm; the builds fetch their build
backends (hatchling, setuptools) from the package index the first time. The artifacts are reproducible: the
builds run with ``SOURCE_DATE_EPOCH`` fixed, and the archives have fixed times, owners and modes, so the same tree
and uv.lock give the same bytes; the five archives are one folder under five names.

    uv run python scripts/dist.py [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIR = ROOT / "provider" / "pulumi_together_rl" / "plugin"
PLUGIN = "together-rl"
PLATFORMS = (
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("windows", "amd64"),
)
SUMS = "SHA256SUMS"
# A fixed time for every archive member (and the gzip header): the same tree gives the same bytes.
EPOCH = 315532800  # 1980-01-01, the oldest time a zip (a wheel) can hold too


def version() -> str:
    """``__version__`` as the source says it, read without importing the package (no venv needed)."""
    text = (ROOT / "provider" / "pulumi_together_rl" / "__init__.py").read_text()
    (found,) = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    return found


def archive_name(ver: str, os_name: str, arch: str) -> str:
    return f"pulumi-resource-{PLUGIN}-v{ver}-{os_name}-{arch}.tar.gz"


REQUIREMENTS_HEADER = """\
# pulumi-together-rl {version} with its bucket extra, for this plugin's own venv: `pulumi plugin install` has the
# Python language host make `venv` in this folder and run `pip install -r requirements.txt` here. The package
# is the wheel beside this file (a path relative to this folder, which is pip's working directory), and every
# dependency is pinned as the project's uv.lock pins it. Every line has its hashes, so pip installs in
# hash-checking mode: nothing of this project comes from an index, and no file that differs from the lock's is
# installed.
"""


def locked_requirements() -> str:
    """The runtime dependencies of the package with its ``bucket`` extra, as uv.lock pins them, each with the
    hashes of its files (every platform's: the one archive serves them all), in requirements form."""
    return run(
        [*uv(), "export", "--frozen", "--no-dev", "--extra", "bucket", "--hashes", "--no-emit-project",
         "--no-header", "--format", "requirements-txt"],
        ROOT,
    )  # fmt: skip


def plugin_requirements(ver: str, wheel: Path, locked: str) -> str:
    """The archive's requirements.txt: ``wheel`` (in the plugin's folder) with its hash and the bucket extra, then
    ``locked`` (:func:`locked_requirements`)."""
    package = f"./{wheel.name}[bucket] --hash=sha256:{sha256(wheel)}\n"
    return REQUIREMENTS_HEADER.format(version=ver) + package + locked


def plugin_files(ver: str, wheel: Path, locked: str) -> dict[str, bytes]:
    """The plugin folder of the archives: {name: content}."""
    return {
        "PulumiPlugin.yaml": (PLUGIN_DIR / "PulumiPlugin.yaml").read_bytes(),
        # The package itself, which requirements.txt names by path: the archive needs no index for it.
        wheel.name: wheel.read_bytes(),
        # What the engine's language host installs into the plugin's own venv (`venv` in its folder).
        "requirements.txt": plugin_requirements(ver, wheel, locked).encode(),
        # The launcher: the language host runs `<venv>/bin/python <folder>`, which runs this.
        "__main__.py": (PLUGIN_DIR / "__main__.py").read_bytes(),
    }


def write_archive(path: Path, files: dict[str, bytes]) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), EPOCH, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    with path.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=EPOCH) as gz:
        gz.write(raw.getvalue())


# What a build of an SDK leaves in its folder (not the generator's): never packed.
BUILD_OUTPUT = {"bin", "obj", "build", ".gradle", "node_modules", "__pycache__"}


def sdk_files(language: str) -> dict[str, bytes]:
    """The checked-in files of sdk/<language> by relative path, without a build's output."""
    top = ROOT / "sdk" / language
    found: dict[str, bytes] = {}
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in BUILD_OUTPUT)
        for name in sorted(names):
            path = Path(folder) / name
            found[path.relative_to(top).as_posix()] = path.read_bytes()
    return found


def go_module(root: Path = ROOT) -> str:
    match = re.search(r"^module\s+(\S+)", (root / "sdk" / "go" / "go.mod").read_text(), re.M)
    if not match:
        sys.exit("dist: sdk/go/go.mod names no module")
    return match.group(1)


def write_go_module_zip(path: Path, ver: str) -> None:
    """sdk/go as the Go module proxy serves a module version (``<module>@v<V>/<file>``, golang.org/x/mod/zip),
    with fixed times: ``GOPROXY=file://...`` can serve it, and a Go tag ``sdk/go/v<V>`` gives the same files."""
    prefix = f"{go_module()}@v{ver}/"
    files = sdk_files("go")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(prefix + name, date_time=time.gmtime(EPOCH)[:6])
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])


def uv() -> list[str]:
    """The uv to build with: $UV (`uv run` sets it; the Makefile may pass `python3 -m uv`), else uv on PATH."""
    named = os.environ.get("UV") or shutil.which("uv")
    if not named:
        sys.exit("dist: no uv (run it through `make dist`, which installs the pinned uv)")
    return shlex.split(named)


def run(args: list[str], cwd: Path) -> str:
    """``args`` in ``cwd``, with ``SOURCE_DATE_EPOCH`` fixed (the builds' file times); its standard output."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"dist: `{shlex.join(args)}` failed in {cwd}:\n{result.stdout}{result.stderr}")
    return result.stdout


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


SDK_VERSIONS = (
    ("sdk/python/setup.py", "VERSION"),
    ("sdk/python/pulumi_together_rl_sdk/pulumi-plugin.json", "version"),
    ("sdk/nodejs/package.json", "version"),
    ("sdk/nodejs/package.json", "pulumi.version"),
    ("sdk/go/togetherrl/pulumi-plugin.json", "version"),
    ("sdk/go/togetherrl/internal/pulumiUtilities.go", "semver.MustParse"),
    ("sdk/java/build.gradle", "version"),
    ("sdk/dotnet/pulumi-plugin.json", "version"),
    ("sdk/dotnet/version.txt", "version"),
    ("sdk/dotnet/PulumiTogetherRl.TogetherRl.csproj", "Version"),
)
"""Where the checked-in SDKs carry the version: the packages' own, and the plugin version each tells the engine
to install (``pulumi-plugin.json``, ``package.json``'s ``pulumi``, the Go SDK's default plugin version)."""

TEXT_VERSIONS = {
    "sdk/python/setup.py": r'^VERSION = "([^"]+)"$',
    "sdk/go/togetherrl/internal/pulumiUtilities.go": r'semver\.MustParse\("([^"]+)"\)',
    # The version a Gradle build takes when none is given (PACKAGE_VERSION, -Pversion).
    "sdk/java/build.gradle": r'^\s*\? "([^"]+)"$',
    "sdk/dotnet/version.txt": r"\A(\S+)\s*\Z",
    "sdk/dotnet/PulumiTogetherRl.TogetherRl.csproj": r"<Version>([^<]+)</Version>",
}
"""The files of :data:`SDK_VERSIONS` that are not JSON: the version is what the pattern captures, every time it
matches (a file that says two versions says none)."""


def sdk_versions(root: Path = ROOT) -> dict[str, str | None]:
    """``{"<file> <field>": version}`` of every place in :data:`SDK_VERSIONS` (None: not there, or unreadable)."""
    found: dict[str, str | None] = {}
    for relative, field in SDK_VERSIONS:
        try:
            text = (root / relative).read_text()
            if relative in TEXT_VERSIONS:
                (value,) = set(re.findall(TEXT_VERSIONS[relative], text, re.M))
            else:
                value = json.loads(text)
                for part in field.split("."):
                    value = value[part]
        except (OSError, ValueError, KeyError, TypeError):
            value = None
        found[f"{relative} {field}"] = value if isinstance(value, str) else None
    return found


def check_versions(ver: str, root: Path = ROOT) -> None:
    """The SDKs are generated from the schema at a version: every place they carry it must be ``ver`` (the
    package's ``__version__``), or the build stops with one sentence (else a release would ship SDKs that name
    another plugin version)."""
    wrong = {where: got for where, got in sdk_versions(root).items() if got != ver}
    if wrong:
        said = ", ".join(f"{where} is {got or 'missing'}" for where, got in wrong.items())
        sys.exit(
            f"building the release artifacts (version {ver}): the checked-in SDKs carry another version ({said}). "
            "Run `make sdk` and commit the result."
        )


def build(out: Path) -> list[Path]:
    ver = version()
    check_versions(ver)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env_uv = uv()
    with tempfile.TemporaryDirectory(prefix="together-rl-dist-") as scratch:
        work = Path(scratch)
        # The package: the sdist, then the wheel from the sdist (so the sdist is known to build); --no-sources
        # builds as a user's installer would (no [tool.uv.sources] of this repository).
        run([*env_uv, "build", "--no-sources", "--out-dir", str(out), str(ROOT)], ROOT)
        # The SDKs from copies: setuptools writes build/ and *.egg-info beside setup.py.
        shutil.copytree(
            ROOT / "sdk" / "python",
            work / "python",
            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
        )
        run([*env_uv, "build", "--no-sources", "--wheel", "--out-dir", str(out), str(work / "python")], work)
        npm = shutil.which("npm")
        if not npm:
            sys.exit("dist: npm is not on PATH: it packs the TypeScript SDK (install Node.js)")
        shutil.copytree(
            ROOT / "sdk" / "nodejs", work / "nodejs", ignore=shutil.ignore_patterns("node_modules", "bin")
        )
        run([npm, "pack", "--silent", "--pack-destination", str(out)], work / "nodejs")
    write_go_module_zip(out / f"pulumi-together-rl-sdk-go-{ver}.zip", ver)
    for language in ("java", "dotnet"):
        folder = f"pulumi-together-rl-sdk-{language}-{ver}"
        files = {f"{folder}/{name}": content for name, content in sdk_files(language).items()}
        write_archive(out / f"{folder}.tar.gz", files)
    # uv marks a folder it creates as one git ignores: dist/ is ignored by the repository's own .gitignore.
    (out / ".gitignore").unlink(missing_ok=True)
    files = plugin_files(ver, out / f"pulumi_together_rl-{ver}-py3-none-any.whl", locked_requirements())
    for os_name, arch in PLATFORMS:
        write_archive(out / archive_name(ver, os_name, arch), files)

    expected = {
        f"pulumi_together_rl-{ver}-py3-none-any.whl",
        f"pulumi_together_rl-{ver}.tar.gz",
        f"pulumi_together_rl_sdk-{ver}-py3-none-any.whl",
        f"pulumi-together-rl-sdk-{ver}.tgz",
        f"pulumi-together-rl-sdk-go-{ver}.zip",
        f"pulumi-together-rl-sdk-java-{ver}.tar.gz",
        f"pulumi-together-rl-sdk-dotnet-{ver}.tar.gz",
        *(archive_name(ver, o, a) for o, a in PLATFORMS),
    }
    made = {path.name for path in out.iterdir()}
    if made != expected:
        sys.exit(f"dist: expected {sorted(expected)} in {out}, found {sorted(made)}")
    artifacts = sorted(out.iterdir())
    (out / SUMS).write_text("".join(f"{sha256(path)}  {path.name}\n" for path in artifacts))
    return [*artifacts, out / SUMS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "dist", help="the folder to (re)create (default: dist/)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    made = build(args.out.resolve())
    for path in made:
        print(f"{path.stat().st_size:>10,}  {path.relative_to(args.out.resolve())}")
    print(f"dist: {len(made)} files in {args.out} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
