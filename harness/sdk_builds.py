"""Builds of the generated Go and Java SDKs as their users build them (tests/e2e/test_generated_sdks.py), and the
same builds ahead of the release tier to fill the caches they use (scripts/tiers.sh runs ``python -m
harness.sdk_builds warm`` in the background while the earlier tiers run).

- Go: a copy of sdk/go builds and vets with ``-mod=readonly`` (its checked-in go.sum is complete), and the
  program tests/e2e/projects/go-sdk, which requires the SDK through a ``replace``, builds, vets and runs under
  Pulumi's mocks. Modules come from the Go module proxy into the Go module cache.
- Java: the SDK's sources with the program tests/e2e/projects/java-sdk compile with Maven, with a pom made from
  sdk/java/build.gradle (its dependencies and Java release: the Gradle build the generator writes is the one
  users get; Debian's Gradle is too old for it). Artifacts come from Maven Central into
  ``$TOGETHER_RL_CACHE_DIR/maven`` (default ``~/.cache/pulumi-together-rl/maven``), a repository of this
  project's own, not ``~/.m2``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
SDK = ROOT / "sdk"
PROJECTS = ROOT / "tests" / "e2e" / "projects"
GO_MODULE_OF_PROGRAM = "example.com/together-rl-go-program"

# The Maven plugins a `compile` runs, pinned (Maven's defaults change with its version): versions Maven Central
# serves.
MAVEN_PLUGINS = {"maven-resources-plugin": "3.3.1", "maven-compiler-plugin": "3.13.0"}


def cache_dir() -> Path:
    """The scripts' cache: ``$TOGETHER_RL_CACHE_DIR``, default ``${XDG_CACHE_HOME:-~/.cache}/pulumi-together-rl``."""
    if os.environ.get("TOGETHER_RL_CACHE_DIR"):
        return Path(os.environ["TOGETHER_RL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pulumi-together-rl"


def maven_repository() -> Path:
    return cache_dir() / "maven"


@contextlib.contextmanager
def building(language: str) -> Iterator[None]:
    """One build of a language at a time per cache: a test that starts while scripts/tiers.sh warms the caches
    waits for it, then finds them warm, instead of downloading and compiling the same things beside it."""
    folder = cache_dir() / "sdk-builds"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{language}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run(
    args: list[str | Path], cwd: Path, timeout: float = 900, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# ------------------------------------------------------------------------------------------------------- Go


def go_module_path() -> str:
    """The module of sdk/go, as its go.mod names it."""
    match = re.search(r"^module\s+(\S+)", (SDK / "go" / "go.mod").read_text(), re.MULTILINE)
    if not match:
        raise ValueError("sdk/go/go.mod names no module")
    return match.group(1)


def prepare_go(into: Path) -> tuple[Path, Path]:
    """Copies sdk/go and the program into ``into``; returns (sdk, program). The program's go.mod requires the SDK
    from the copy (``replace``), at the SDK's go directive; its go.sum starts as the SDK's (``go mod tidy`` adds
    the program's own)."""
    sdk = into / "sdk-go"
    program = into / "program"
    shutil.copytree(SDK / "go", sdk)
    shutil.copytree(PROJECTS / "go-sdk", program)
    go_line = re.search(r"^go\s+(\S+)", (sdk / "go.mod").read_text(), re.MULTILINE)
    module = go_module_path()
    (program / "go.mod").write_text(
        f"module {GO_MODULE_OF_PROGRAM}\n\n"
        f"go {go_line.group(1) if go_line else '1.26'}\n\n"
        f"require {module} v0.0.0\n\n"
        f"replace {module} => ../sdk-go\n"
    )
    shutil.copyfile(sdk / "go.sum", program / "go.sum")
    return sdk, program


# Each step: (the folder, the command, GOFLAGS). The SDK with -mod=readonly: its go.mod and go.sum must be complete
# as checked in. The program's go.mod is written by prepare_go, so it is tidied first.
def go_steps(sdk: Path, program: Path) -> list[tuple[Path, list[str | Path], str]]:
    return [
        (sdk, ["go", "build", "./..."], "-mod=readonly"),
        (sdk, ["go", "vet", "./..."], "-mod=readonly"),
        (program, ["go", "mod", "tidy"], "-mod=mod"),
        (program, ["go", "build", "-o", program / "program", "."], "-mod=readonly"),
        (program, ["go", "vet", "."], "-mod=readonly"),
    ]


# ----------------------------------------------------------------------------------------------------- Java


def gradle_build() -> str:
    return (SDK / "java" / "build.gradle").read_text()


def gradle_dependencies(text: str) -> list[tuple[str, str, str]]:
    """The ``implementation("group:artifact:version")`` lines of a build.gradle."""
    return re.findall(r'^\s*implementation\("([^:"]+):([^:"]+):([^:"]+)"\)', text, re.MULTILINE)


def gradle_java_release(text: str) -> str:
    match = re.search(r"JavaLanguageVersion\.of\((\d+)\)", text)
    if not match:
        raise ValueError("sdk/java/build.gradle names no Java toolchain version")
    return match.group(1)


def maven_pom(text: str) -> str:
    """A pom that compiles what build.gradle compiles: its group, dependencies and Java release."""
    group = re.search(r'^group\s*=\s*"([^"]+)"', text, re.MULTILINE)
    dependencies = "\n".join(
        f"    <dependency><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId>"
        f"<version>{escape(v)}</version></dependency>"
        for g, a, v in gradle_dependencies(text)
    )
    plugins = "\n".join(
        f"      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>{name}</artifactId>"
        f"<version>{version}</version></plugin>"
        for name, version in MAVEN_PLUGINS.items()
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>{escape(group.group(1) if group else "app")}</groupId>
  <artifactId>together-rl-java-check</artifactId>
  <version>0</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>{gradle_java_release(text)}</maven.compiler.release>
  </properties>
  <dependencies>
{dependencies}
  </dependencies>
  <build>
    <plugins>
{plugins}
    </plugins>
  </build>
</project>
"""


def prepare_java(into: Path) -> Path:
    """A Maven project in ``into``: the SDK's sources and the program's, and the pom of build.gradle."""
    project = into / "java"
    sources = project / "src" / "main" / "java"
    shutil.copytree(SDK / "java" / "src" / "main" / "java", sources)
    (sources / "app").mkdir()
    shutil.copyfile(PROJECTS / "java-sdk" / "App.java", sources / "app" / "App.java")
    (project / "pom.xml").write_text(maven_pom(gradle_build()))
    return project


def maven_compile() -> list[str]:
    """``mvn compile`` in batch mode, quiet, into this project's Maven repository."""
    return ["mvn", "-B", "-q", "-Dstyle.color=never", f"-Dmaven.repo.local={maven_repository()}", "compile"]


# ----------------------------------------------------------------------------------------------------- warm


def warm() -> int:
    """Runs both builds once (the tests' steps), to fill the Go module and build caches and the Maven repository.
    A failure is left for the tests to report; the time of each build goes to stderr."""
    with tempfile.TemporaryDirectory(prefix="sdk-builds-") as folder:
        tmp = Path(folder)
        if shutil.which("go"):
            with building("go"):
                start = time.monotonic()
                sdk, program = prepare_go(tmp)
                for cwd, argv, goflags in go_steps(sdk, program):
                    if run(argv, cwd, GOFLAGS=goflags).returncode != 0:
                        break
                print(f"sdk-builds: Go in {time.monotonic() - start:.0f} s", file=sys.stderr)
        if shutil.which("mvn"):
            with building("java"):
                start = time.monotonic()
                run(maven_compile(), prepare_java(tmp))
                print(f"sdk-builds: Java in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["warm"]:
        sys.exit("usage: python -m harness.sdk_builds warm")
    sys.exit(warm())
