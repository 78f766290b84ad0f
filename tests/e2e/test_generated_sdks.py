"""The checked-in SDKs of the plugin (sdk/python, sdk/nodejs, sdk/go, sdk/java, sdk/dotnet) are those of the
current schema, and they work the way users consume them.

- Regenerating them from the schema (scripts/gen-sdk.sh --out, with the generators it builds into the cache)
  gives exactly the checked-in files: a change to the resource tables without `make sdk` fails here.
- The Python SDK, installed from its folder as a user installs it, imports in the repository's venv and, under
  Pulumi's mocks, sends the plugin's tokens and camelCase properties.
- The TypeScript example (examples/typescript, the SDK as a `file:` dependency) type-checks. It cannot run here:
  there is no Node.js language host on these machines.
- The Go module builds and vets as checked in (go.mod and go.sum complete), and a Go program using it
  (tests/e2e/projects/go-sdk) builds, vets and, run under Pulumi's mocks, sends the plugin's tokens and
  camelCase properties. Modules from the Go module proxy only.
- The Java SDK, with a Java program using it (tests/e2e/projects/java-sdk), compiles with Maven against the
  com.pulumi:pulumi its build.gradle names, from Maven Central (harness/sdk_builds.py). Not run: no Java host.
- The .NET SDK is only generated (and held up to date above): NuGet, where its dependencies are, is not
  reachable from these machines (docs/plugin.md).

A tool that cannot be had here (Go, uv, npm, Maven and a JDK, their registries) skips its test with the reason,
or fails it where TOGETHER_RL_REQUIRE_CLI=1 (CI), as for the CLI tests.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import sdk_builds
from harness.cli import ROOT, unavailable

from pulumi_together_rl.plugin.package_schema import JAVA_PULUMI_VERSION, schema_text

SCRIPT = ROOT / "scripts" / "gen-sdk.sh"
SDK = ROOT / "sdk"
EXAMPLE = ROOT / "examples" / "typescript"
# scripts/gen-sdk.sh: the generator cannot be provided here (no Go, or its build failed).
NO_GENERATOR = 3
# npm's codes for a registry it cannot reach (what --prefer-offline could not make up for from its cache).
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH")

# The Go build of the generator, once per cache: minutes on 2 cores from a cold Go build cache.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.release]  # the release tier


def last_lines(text: str, n: int = 6) -> str:
    return " ".join(text.strip().splitlines()[-n:])


def run(args, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


# ---------------------------------------------------------------------------------------- up to date


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    """DIR with DIR/<language> generated from the current schema, for every language."""
    out = tmp_path_factory.mktemp("sdk")
    result = run(["bash", SCRIPT, "--out", out], cwd=ROOT, timeout=1200)
    if result.returncode == NO_GENERATOR:
        unavailable(f"scripts/gen-sdk.sh could not provide the SDK generator: {last_lines(result.stderr)}")
    assert result.returncode == 0, f"scripts/gen-sdk.sh --out failed:\n{result.stdout}\n{result.stderr}"
    return out


def files(root: Path, ignore: list[str]) -> dict[str, bytes]:
    """The files under root by relative path, without those the generated .gitignore leaves out (a build's)."""

    def ignored(name: str) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in ignore)

    found = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not ignored(d)]  # node_modules/, bin/, build/ are not walked
        for name in names:
            if not ignored(name):
                path = Path(folder) / name
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


# What a build leaves in an SDK folder that the generator writes no .gitignore for (Go writes nothing there).
BUILD_OUTPUT = {"go": [], "java": ["build", ".gradle"], "dotnet": ["bin", "obj"]}


@pytest.mark.parametrize("language", ["python", "nodejs", "go", "java", "dotnet"])
def test_checked_in_sdk_is_the_generated_one(regenerated, language):
    fresh = regenerated / language
    if (fresh / ".gitignore").is_file():
        gitignore = (fresh / ".gitignore").read_text().splitlines()
        ignore = [line.strip().rstrip("/") for line in gitignore if line.strip() and not line.startswith("#")]
    else:
        ignore = BUILD_OUTPUT[language]
    expected = files(fresh, ignore)
    actual = files(SDK / language, ignore) if (SDK / language).is_dir() else {}

    missing = sorted(expected.keys() - actual.keys())
    extra = sorted(actual.keys() - expected.keys())
    changed = sorted(name for name in expected.keys() & actual.keys() if expected[name] != actual[name])
    if missing or extra or changed:
        lines = [
            f"sdk/{language} is not the SDK of the current schema: run `make sdk` and commit the result."
        ]
        lines += [f"  missing: {name}" for name in missing]
        lines += [f"  not generated: {name}" for name in extra]
        lines += [f"  differs: {name}" for name in changed]
        if changed:
            diff = difflib.unified_diff(
                actual[changed[0]].decode(errors="replace").splitlines(),
                expected[changed[0]].decode(errors="replace").splitlines(),
                f"sdk/{language}/{changed[0]} (checked in)",
                f"sdk/{language}/{changed[0]} (generated)",
                lineterm="",
            )
            lines += list(diff)[:40]
        pytest.fail("\n".join(lines), pytrace=False)


# -------------------------------------------------------------------------------------------- Python


def test_python_sdk_installs_and_imports(tmp_path):
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        unavailable("uv is not on PATH: it installs the Python SDK as a user would")
    # A copy: a setuptools build writes build/ and *.egg-info next to setup.py.
    source = tmp_path / "source"
    shutil.copytree(
        SDK / "python", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    site = tmp_path / "site"
    install = [uv, "pip", "install", "--python", sys.executable, "--no-deps", "--target", site, source]
    result = run([*install, "--offline"], cwd=tmp_path)  # setuptools from uv's cache, where it is
    if result.returncode != 0:
        result = run(install, cwd=tmp_path)
    if result.returncode != 0 and ("Failed to fetch" in result.stderr or "network" in result.stderr):
        unavailable(f"uv cannot get setuptools to build the Python SDK: {last_lines(result.stderr)}")
    assert result.returncode == 0, f"uv pip install sdk/python failed:\n{result.stderr}"

    version = json.loads(schema_text())["version"]
    # Under Pulumi's mocks: what the SDK sends the engine is the plugin's tokens and camelCase properties.
    check = f"""
import pulumi

class Mocks(pulumi.runtime.Mocks):
    sent = []
    def new_resource(self, args):
        self.sent.append((args.typ, args.inputs))
        return args.name + "-id", args.inputs
    def call(self, args):
        self.sent.append((args.token, args.args))
        return {{"pricePerHour": 2.5, "currency": "USD"}}

pulumi.runtime.set_mocks(Mocks(), preview=False)
import pulumi_together_rl_sdk as sdk

assert sdk.__file__.startswith({str(site)!r}), sdk.__file__
assert sdk._utilities.get_version() == {version!r}, sdk._utilities.get_version()

@pulumi.runtime.test
def program():
    gpu = sdk.ModelResource("gpu", base_model="Qwen/Qwen3.5-4B", compute_config={{"num_generator_replicas": 1}})
    session = sdk.TrainingSession("rank8", model_resources_id=gpu.id, lora_config=sdk.LoraConfigArgs(rank=8))
    price = sdk.estimate_cost(base_model="Qwen/Qwen3.5-4B")
    assert price.price_per_hour == 2.5
    def check(_):
        assert Mocks.sent == [
            ("together-rl:index:estimateCost", {{"baseModel": "Qwen/Qwen3.5-4B"}}),
            ("together-rl:index:ModelResource",
             {{"baseModel": "Qwen/Qwen3.5-4B", "computeConfig": {{"numGeneratorReplicas": 1}}}}),
            ("together-rl:index:TrainingSession", {{"modelResourcesId": "gpu-id", "loraConfig": {{"rank": 8}}}}),
        ], Mocks.sent
    return session.id.apply(check)

program()
"""
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, (
        f"the installed Python SDK does not import or send what the plugin expects:\n{result.stderr}"
    )


# ---------------------------------------------------------------------------------------- TypeScript


def test_typescript_example_type_checks(tmp_path):
    npm, npx, node = shutil.which("npm"), shutil.which("npx"), shutil.which("node")
    if not (npm and npx and node):
        unavailable("Node.js and npm are not on PATH: the TypeScript example is type-checked with them")
    # A copy in the same layout (the example names the SDK as file:../../sdk/nodejs), without any local build.
    skip = shutil.ignore_patterns("node_modules", "bin")
    project = tmp_path / "examples" / "typescript"
    shutil.copytree(EXAMPLE, project, ignore=skip)
    shutil.copytree(SDK / "nodejs", tmp_path / "sdk" / "nodejs", ignore=skip)

    result = run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=project)
    if result.returncode != 0 and any(code in result.stderr for code in NETWORK_ERRORS):
        unavailable(f"npm ci cannot reach the registry: {last_lines(result.stderr)}")
    assert result.returncode == 0, (
        "npm ci failed in a copy of examples/typescript (if package.json or sdk/nodejs/package.json changed, "
        f"run `npm install` in examples/typescript and commit package-lock.json):\n{result.stderr}"
    )

    result = run([npx, "tsc", "--noEmit"], cwd=project, timeout=300)
    assert result.returncode == 0, (
        f"examples/typescript does not type-check:\n{result.stdout}\n{result.stderr}"
    )

    # What the Node.js language host would load: the SDK built to JavaScript by its postinstall.
    load = (
        "const sdk = require('@pulumi-together-rl/sdk');"
        "for (const name of ['ModelResource', 'TrainingSession', 'estimateCost']) {"
        "  if (typeof sdk[name] !== 'function') throw new Error(name + ' is ' + typeof sdk[name]); }"
    )
    result = run([node, "-e", load], cwd=project, timeout=120)
    assert result.returncode == 0, f"the installed Node.js SDK does not load:\n{result.stderr}"


# ------------------------------------------------------------------------------------------------------ Go


def test_go_sdk_builds_and_vets_and_a_program_of_it_runs(tmp_path):
    go = shutil.which("go")
    if not go:
        unavailable("Go is not on PATH: the Go SDK is built and vetted with it")
    sdk, program = sdk_builds.prepare_go(tmp_path)
    with sdk_builds.building("go"):
        for cwd, argv, goflags in sdk_builds.go_steps(sdk, program):
            result = sdk_builds.run(argv, cwd, GOFLAGS=goflags)
            if result.returncode != 0 and any(sign in result.stderr for sign in ("dial tcp", "no such host")):
                unavailable(f"the Go module proxy cannot be reached: {last_lines(result.stderr)}")
            where = "sdk/go" if cwd == sdk else "tests/e2e/projects/go-sdk"
            assert result.returncode == 0, (
                f"`{' '.join(map(str, argv))}` (GOFLAGS={goflags}) failed in a copy of {where}"
                f" (stale go.sum: `make sdk`):\n{result.stdout}\n{result.stderr}"
            )

    # Under Pulumi's mocks: what the SDK sends the engine is the plugin's tokens and camelCase properties.
    result = sdk_builds.run([program / "program"], program, timeout=120)
    assert result.returncode == 0, f"the Go program failed under mocks:\n{result.stderr}"
    assert result.stdout.splitlines() == [
        "together-rl:index:ModelResource map[baseModel:Qwen/Qwen3.5-4B computeConfig:map[numGeneratorReplicas:1]]",
        "together-rl:index:TrainingSession map[loraConfig:map[rank:8] modelResourcesId:gpu-id]",
        "together-rl:index:estimateCost map[baseModel:Qwen/Qwen3.5-4B]",
    ], result.stdout


def test_go_sdk_is_the_module_its_import_path_names():
    """sdk/go is a module of its own at the path the schema's importBasePath names, requiring the Pulumi Go SDK
    of the pinned CLI (what the generator writes, raised from its v3.269.0: scripts/pulumi-cli/gen-sdk)."""
    schema = json.loads(schema_text())
    assert schema["language"]["go"]["importBasePath"] == sdk_builds.go_module_path() + "/togetherrl"
    cli_pin = re.search(
        r"github.com/pulumi/pulumi/sdk/v3 (v\S+)", (ROOT / "scripts" / "pulumi-cli" / "go.mod").read_text()
    )
    assert cli_pin
    assert f"github.com/pulumi/pulumi/sdk/v3 {cli_pin.group(1)}\n" in (SDK / "go" / "go.mod").read_text()


# ---------------------------------------------------------------------------------------------------- Java


def test_java_sdk_and_a_program_of_it_compile_with_maven(tmp_path):
    mvn, javac = shutil.which("mvn"), shutil.which("javac")
    if not (mvn and javac):
        unavailable("Maven and a JDK are not on PATH: the Java SDK is compiled with them")
    gradle = sdk_builds.gradle_build()
    # The core SDK the build file names is the one the schema pins (a version Maven Central serves).
    assert ("com.pulumi", "pulumi", JAVA_PULUMI_VERSION) in sdk_builds.gradle_dependencies(gradle)
    project = sdk_builds.prepare_java(tmp_path)
    with sdk_builds.building("java"):
        result = sdk_builds.run(sdk_builds.maven_compile(), project)
    output = result.stdout + result.stderr
    if result.returncode != 0 and ("Could not transfer" in output or "UnknownHost" in output):
        unavailable(f"Maven Central cannot be reached: {last_lines(output)}")
    assert result.returncode == 0, f"the Java SDK and program do not compile with Maven:\n{output}"
    classes = project / "target" / "classes"
    assert (classes / "app" / "App.class").is_file()
    assert (classes / "io" / "github" / "pulumitogetherrl" / "togetherrl" / "ModelResource.class").is_file()


# ------------------------------------------------------------------------------------------------------ .NET


def test_dotnet_sdk_names_the_schema_version_and_plugin_server():
    """Generated only (no NuGet here): what a program of it would ask the engine for is this plugin, this version,
    from this repository's releases."""
    schema = json.loads(schema_text())
    plugin = json.loads((SDK / "dotnet" / "pulumi-plugin.json").read_text())
    assert plugin == {
        "resource": True,
        "name": schema["name"],
        "version": schema["version"],
        "server": schema["pluginDownloadURL"],
    }
    project = (SDK / "dotnet" / "PulumiTogetherRl.TogetherRl.csproj").read_text()
    assert f"<Version>{schema['version']}</Version>" in project
