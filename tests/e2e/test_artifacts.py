"""A release as its users get it: the artifacts of ``make dist`` installed the ways the README says, with no
checkout on the path and a local package index in place of PyPI (harness/artifacts.py).

* ``dist/`` holds every artifact of the version, listed in ``SHA256SUMS``: the wheel and sdist, five identical
  plugin archives (``PulumiPlugin.yaml``, the launcher, the package's wheel and a ``requirements.txt`` that
  installs that wheel and the locked dependencies with their hashes), the Python SDK's wheel and the TypeScript
  SDK's tarball, both SDKs naming the release's GitHub repository as ``server``. The archives are rebuilt here
  from the wheel and uv.lock, byte for byte.
* The README's install commands, read from the README itself (each block after its ``<!-- install:... -->``
  marker), with the index swapped for the local one:
  - ``uv add "pulumi-together-rl[emulator,policy]"`` in a new project, whose README program then runs preview
    (with the executable policy pack, which reports the version), up and destroy against the emulator that
    install starts;
  - ``pulumi plugin install ... --server github://...`` (GitHub's release downloads answered on loopback): the
    engine installs the plugin's dependencies into the plugin's own venv at install time, and a Pulumi YAML
    program with no plugin path runs preview, up, ``pulumi import`` and destroy with that plugin, installing
    nothing during the preview;
  - ``uv add pulumi-together-rl-sdk``: the SDK's program gets the plugin installed by the engine on first use,
    from the SDK's ``server``, then runs up and destroy;
  - ``npm install @pulumi-together-rl/sdk`` (the scope's registry on loopback): the tarball installs, builds and
    type-checks under ``tsc``.
* ``pulumi plugin install resource together-rl <V> -f <archive>`` makes the same venv.

The artifacts are built once per run (or taken from ``TOGETHER_RL_DIST``); every test works in its own tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from harness.artifacts import ReleaseServer, dist_script, sha256, user_env
from harness.cli import ROOT, CLIStack, active, unavailable, writes
from harness.faces import PLUGIN

from pulumi_together_rl.plugin.package_schema import plugin_download_url, repository

pytestmark = [pytest.mark.release, pytest.mark.timeout(1800)]  # the release tier (make test-release)

README = (ROOT / "README.md").read_text()
PLATFORMS = {"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64", "windows-amd64"}
SMALL = "Qwen/Qwen3.5-4B"
KEY = "tk-artifacts-0123456789abcdef-secret"
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH")


def readme_commands(marker: str) -> list[str]:
    """The commands of the README's fenced block after ``<!-- install:<marker> ... -->``, comments removed."""
    match = re.search(
        rf"^<!-- install:{re.escape(marker)}\b[^\n]*-->\n```bash\n(.*?)^```", README, re.M | re.S
    )
    assert match, f"the README has no install:{marker} block"
    commands = [line.split("  #", 1)[0].strip() for line in match.group(1).splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


def readme_snippet(after: str, language: str) -> str:
    """The first ``language`` block of the README after the text ``after``."""
    start = README.index(after)
    match = re.compile(rf"^```{language}\n(.*?)^```", re.M | re.S).search(README, start)
    assert match, f"no {language} block after {after!r} in the README"
    return match.group(1)


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``args`` with no standard input; on a timeout the process group is killed and its output shown."""
    process = subprocess.Popen(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(f"{args} did not finish in {timeout} s:\n{stdout}\n{stderr}") from None
    result = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    assert result.returncode == 0, f"{args} failed:\n{stdout}\n{stderr}"
    return result


def sh(commands: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    """Run ``commands`` as one bash script, as a user pastes them."""
    result = run(["bash", "-c", "set -euo pipefail\n" + "\n".join(commands) + "\n"], cwd, env, timeout)
    return result.stdout + result.stderr


def pulumi(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    return run(["pulumi", *args, "--non-interactive"], cwd, env, timeout)


def installed(python: Path) -> tuple[str, Path]:
    """(the version of pulumi-together-rl, the folder it is imported from) as ``python`` sees them."""
    code = "import importlib.metadata as m, pulumi_together_rl as p; print(m.version('pulumi-together-rl')); print(p.__file__)"
    result = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    version, where = result.stdout.split()
    return version, Path(where).resolve()


def plugin_folder(env: dict[str, str], version: str) -> Path:
    return Path(env["PULUMI_HOME"]) / "plugins" / f"resource-together-rl-v{version}"


def assert_installed_in_its_own_venv(folder: Path, version: str) -> None:
    """The plugin folder has its venv, made at install time, with this version of the package from the wheel."""
    python = folder / "venv" / "bin" / "python"
    assert python.exists(), (
        f"no venv in the installed plugin {folder}: {sorted(p.name for p in folder.iterdir())}"
    )
    found, where = installed(python)
    assert found == version
    assert where.is_relative_to((folder / "venv").resolve()), where


def site_packages(folder: Path) -> set[str]:
    return {p.name for p in (folder / "venv").glob("lib/python*/site-packages/*")}


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def server(dist):
    with ReleaseServer(dist) as serving:
        yield serving


# ------------------------------------------------------------------------------------------- what dist holds


def test_dist_holds_every_artifact_of_the_version_with_its_sums(dist, tmp_path):
    version = dist.version
    print(
        f"dist built in {dist.seconds:.0f} s: "
        + ", ".join(f"{p.name} {p.stat().st_size:,} B" for p in sorted(dist.folder.iterdir()))
    )
    archives = {f"pulumi-resource-together-rl-v{version}-{p}.tar.gz" for p in PLATFORMS}
    assert {p.name for p in dist.folder.iterdir()} == {
        f"pulumi_together_rl-{version}-py3-none-any.whl",
        f"pulumi_together_rl-{version}.tar.gz",
        f"pulumi_together_rl_sdk-{version}-py3-none-any.whl",
        f"pulumi-together-rl-sdk-{version}.tgz",
        "SHA256SUMS",
        *archives,
    }
    sums = dist.sums()
    assert set(sums) == {p.name for p in dist.folder.iterdir()} - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256(dist.path(name).read_bytes()).hexdigest() == digest, name

    # One plugin folder under five names, nothing built for a platform: the launcher, the package's own wheel
    # (the very file of dist/), and requirements that install that wheel and the locked dependencies with hashes.
    assert len({sums[name] for name in archives}) == 1
    with tarfile.open(dist.host_archive()) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["PulumiPlugin.yaml", "__main__.py", dist.wheel.name, "requirements.txt"]
        assert all(
            m.isfile() and m.mode == 0o644 and m.mtime == dist_script().EPOCH for m in members.values()
        )
        read = {name: tar.extractfile(member).read() for name, member in members.items()}
    assert read[dist.wheel.name] == dist.wheel.read_bytes()
    assert yaml.safe_load(read["PulumiPlugin.yaml"]) == {"runtime": "python"}
    assert b"from pulumi_together_rl.plugin.server import main" in read["__main__.py"]
    requirements = read["requirements.txt"].decode()
    lines = [line for line in requirements.splitlines() if line and not line.lstrip().startswith("#")]
    assert lines[0] == f"./{dist.wheel.name}[bucket] --hash=sha256:{sums[dist.wheel.name]}"
    pinned = [line for line in lines[1:] if not line.startswith(" ")]
    assert pinned and all(re.fullmatch(r"[a-z0-9._-]+==\S+( ; .*)? \\", line) for line in pinned), pinned
    assert requirements.count("--hash=sha256:") > len(pinned)  # every dependency with its files' hashes
    assert {"pulumi", "obstore", "grpcio", "pydantic"} <= {line.split("==")[0] for line in pinned}
    assert "pulumi-together-rl" not in {line.split("==")[0] for line in pinned}  # never from an index

    # Reproducible: the same wheel and uv.lock give the same archive, byte for byte.
    script = dist_script()
    again = tmp_path / "again.tar.gz"
    script.write_archive(again, script.plugin_files(version, dist.wheel, script.locked_requirements()))
    assert again.read_bytes() == dist.host_archive().read_bytes()

    with zipfile.ZipFile(dist.wheel) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"pulumi_together_rl-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in metadata
    assert f"Project-URL: Repository, https://github.com/{repository()}" in metadata
    assert "pulumi_together_rl/plugin/PulumiPlugin.yaml" in names
    assert not [n for n in names if n.startswith(("harness/", "tests/", "examples/"))]
    with tarfile.open(dist.folder / f"pulumi_together_rl-{version}.tar.gz") as sdist:
        assert not [n for n in sdist.getnames() if "/tests/" in n or "/harness/" in n]

    # Both SDKs at this version, naming the releases the engine downloads the plugin from.
    with zipfile.ZipFile(dist.sdk_wheel) as wheel:
        plugin_json = json.loads(wheel.read("pulumi_together_rl_sdk/pulumi-plugin.json"))
    assert plugin_json == {
        "resource": True,
        "name": "together-rl",
        "version": version,
        "server": plugin_download_url(),
    }
    with tarfile.open(dist.npm_tarball) as tar:
        package = json.load(tar.extractfile("package/package.json"))
    assert package["version"] == version
    assert package["pulumi"] == {
        "resource": True,
        "name": "together-rl",
        "version": version,
        "server": plugin_download_url(),
    }


# ----------------------------------------------------------------------------------- the package from PyPI


def test_the_readme_install_from_pypi_runs_preview_up_and_destroy(dist, index, pulumi_bin, tmp_path):
    env = user_env(tmp_path, index, bin_dirs=(pulumi_bin,))
    work = tmp_path / "work"
    work.mkdir()
    sh(readme_commands("package"), cwd=work, env=env)
    project = work / "my-training"
    python = project / ".venv" / "bin" / "python"
    version, where = installed(python)
    assert version == dist.version
    assert where.is_relative_to((project / ".venv").resolve()), where  # the wheel, not this checkout
    lock = (project / "uv.lock").read_text()
    assert f'{{ path = "{index / dist.wheel.name}" }}' in lock  # the very file that was built:
    assert sha256(index / dist.wheel.name) == dist.sums()[dist.wheel.name]

    # The README's program, as the README writes it.
    (project / "Pulumi.yaml").write_text(readme_snippet("Write `Pulumi.yaml`", "yaml"))
    (project / "__main__.py").write_text(readme_snippet("Write the program", "python"))

    # The emulator that install starts (the emulator extra).
    emulator = subprocess.Popen(
        [str(python), "-m", "pulumi_together_rl.emulator", "--port", "0", "--timings", "all=0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    from pulumi_together_rl.emulator.control import EmulatorControl

    try:
        url = emulator.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        control = EmulatorControl(url)
        pulumi(["stack", "init", "dev", "--secrets-provider", "passphrase"], project, env)
        pulumi(["config", "set", "together:baseUrl", url], project, env)
        pulumi(["config", "set", "--secret", "together:apiKey", KEY], project, env)
        # The executable policy pack of that install reports the version.
        pack = project / ".venv" / "bin" / "together-rl-policy-pack"
        preview = pulumi(["preview", "--policy-pack", str(pack)], project, env)
        assert f"together-rl@v{dist.version}" in preview.stdout, preview.stdout
        pulumi(["up", "--yes", "--skip-preview"], project, env)
        outputs = json.loads(pulumi(["stack", "output", "--json"], project, env).stdout)
        state = control.state()
        assert [(o["id"], o["status"].rsplit("_", 1)[-1]) for o in state["model_resources"]] == [
            (outputs["model_resource_id"], "READY")
        ]
        assert [o["id"] for o in state["training_sessions"]] == [outputs["training_session_id"]]
        pulumi(["destroy", "--yes", "--skip-preview"], project, env)
        assert active(SimpleNamespace(control=control)) == {"model_resources": [], "training_sessions": []}
        control.close()
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


# ------------------------------------------------------------------------------------------------ the plugin


def test_plugin_install_from_the_archive_makes_the_plugins_own_venv(dist, index, pulumi_bin, tmp_path):
    env = user_env(tmp_path, index, bin_dirs=(pulumi_bin,))
    pulumi(
        ["plugin", "install", "resource", "together-rl", dist.version, "-f", str(dist.host_archive())],
        tmp_path,
        env,
    )

    folder = plugin_folder(env, dist.version)
    assert_installed_in_its_own_venv(folder, dist.version)
    listed = json.loads(pulumi(["plugin", "ls", "--json"], tmp_path, env).stdout)
    assert [(p["name"], p["kind"], p["version"]) for p in listed] == [
        ("together-rl", "resource", dist.version)
    ]


YAML_PROGRAM = {
    "name": "together-rl-yaml",
    "runtime": "yaml",
    "resources": {
        "gpu": {
            "type": "together-rl:ModelResource",
            "properties": {"baseModel": SMALL, "computeConfig": {"numGeneratorReplicas": 1}},
        },
        "rank8": {
            "type": "together-rl:TrainingSession",
            "properties": {"modelResourcesId": "${gpu.id}", "loraConfig": {"rank": 8}},
        },
    },
    "outputs": {"gpuId": "${gpu.id}", "pricePerHour": "${gpu.pricePerHour}"},
}


def test_a_yaml_program_runs_with_the_plugin_installed_as_the_readme_says(
    dist, index, server, emulator, pulumi_bin, yaml_bin, tmp_path
):
    env = user_env(tmp_path, index, bin_dirs=(pulumi_bin, yaml_bin), server=server)
    sh(readme_commands("plugin"), cwd=tmp_path, env=env)
    assert f"/releases/{dist.host_archive().name}" in server.requests, server.requests
    folder = plugin_folder(env, dist.version)
    assert_installed_in_its_own_venv(folder, dist.version)
    before = site_packages(folder)

    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(YAML_PROGRAM))  # no `plugins:`: the installed one
    stack = CLIStack(project, tmp_path, emulator, bin_dir=pulumi_bin, face=PLUGIN, **env, VIRTUAL_ENV=None)
    try:
        stack.init()
        writes(emulator)
        preview = stack.preview()
        assert "together-rl:index:ModelResource" in preview.stdout, preview.stdout
        assert writes(emulator) == []  # a preview changes nothing
        stack.up()
        outputs = stack.outputs()
        assert [o["id"] for o in active(emulator)["model_resources"]] == [outputs["gpuId"]]
        assert outputs["pricePerHour"] > 0

        # pulumi import of an object made elsewhere, read by the installed plugin.
        from pulumi_together_rl.client import TogetherRL
        from pulumi_together_rl.client.models import ModelResourceCreateRequest

        with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
            elsewhere = client.create_model_resource(ModelResourceCreateRequest(base_model=SMALL))
        writes(emulator)
        stack.run(
            "import",
            "together-rl:index:ModelResource",
            "elsewhere",
            elsewhere.id,
            "--yes",
            "--out",
            str(tmp_path / "elsewhere.yaml"),
        )
        assert writes(emulator) == []  # an import only reads
        assert stack.resources()["elsewhere"]["id"] == elsewhere.id
        stack.run("state", "unprotect", "--all", "--yes")

        stack.destroy()
        assert active(emulator) == {"model_resources": [], "training_sessions": []}
        # Nothing was installed after `pulumi plugin install`: no pip during preview, up or destroy.
        assert site_packages(folder) == before
    finally:
        stack.destroy_and_remove()


# ------------------------------------------------------------------------------------------------- the SDKs

SDK_PROGRAM = """\
import pulumi
import pulumi_together_rl_sdk as together_rl

gpu = together_rl.ModelResource("gpu", base_model="Qwen/Qwen3.5-4B", compute_config={"num_generator_replicas": 1})
session = together_rl.TrainingSession("rank8", model_resources_id=gpu.id, lora_config={"rank": 8})
pulumi.export("gpu_id", gpu.id)
pulumi.export("session_id", session.id)
"""


def test_a_python_sdk_program_gets_the_plugin_from_its_server_on_first_use(
    dist, index, server, emulator, pulumi_bin, tmp_path
):
    env = user_env(tmp_path, index, bin_dirs=(pulumi_bin,), server=server)
    project = tmp_path / "sdk-project"
    project.mkdir()
    uv_add = [c for c in readme_commands("sdk") if c.startswith("uv ")]
    assert uv_add == ["uv add pulumi-together-rl-sdk"], uv_add
    sh(["uv init --bare", *uv_add], cwd=project, env=env)
    (project / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": "sdk-project", "runtime": {"name": "python", "options": {"toolchain": "uv"}}})
    )
    (project / "__main__.py").write_text(SDK_PROGRAM)
    folder = plugin_folder(env, dist.version)
    assert not folder.exists()

    stack = CLIStack(project, tmp_path, emulator, bin_dir=pulumi_bin, face=PLUGIN, **env, VIRTUAL_ENV=None)
    try:
        stack.init()
        stack.up()
        # The engine took the plugin from the SDK's server (the release's archive for this machine) and had its
        # dependencies installed into the plugin's own venv.
        assert f"/releases/{dist.host_archive().name}" in server.requests, server.requests
        assert_installed_in_its_own_venv(folder, dist.version)
        outputs = stack.outputs()
        assert [o["id"] for o in active(emulator)["training_sessions"]] == [outputs["session_id"]]
        stack.destroy()
    finally:
        stack.destroy_and_remove()


TS_PROGRAM = """\
import * as pulumi from "@pulumi/pulumi";
import * as togetherRl from "@pulumi-together-rl/sdk";

const gpu = new togetherRl.ModelResource("gpu", {
    baseModel: "Qwen/Qwen3.5-4B",
    computeConfig: { numGeneratorReplicas: 1 },
});
const session = new togetherRl.TrainingSession("rank8", { modelResourcesId: gpu.id, loraConfig: { rank: 8 } });
export const sessionId: pulumi.Output<string> = session.id;
"""


def test_the_typescript_sdk_tarball_installs_from_the_registry_and_type_checks(dist, server, tmp_path):
    npm, npx, node = shutil.which("npm"), shutil.which("npx"), shutil.which("node")
    if not (npm and npx and node):
        unavailable(
            "Node.js and npm are not on PATH: the TypeScript SDK is installed and type-checked with them"
        )
    project = tmp_path / "ts-project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    (project / "package.json").write_text(
        json.dumps({"name": "ts-project", "private": True, "version": "0.0.0"})
    )
    # The index swapped: the SDK's scope from the loopback registry, everything else from npm's own.
    (project / ".npmrc").write_text(f"@pulumi-together-rl:registry={server.url}/\n")
    npm_install = [c for c in readme_commands("sdk") if c.startswith("npm ")]
    assert npm_install == ["npm install @pulumi-together-rl/sdk"], npm_install
    result = subprocess.run(
        ["bash", "-c", f"{npm_install[0]} --no-audit --no-fund --prefer-offline"], cwd=project, env=env,
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if result.returncode != 0 and any(code in result.stderr for code in NETWORK_ERRORS):
        unavailable(f"npm cannot reach the registry: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, f"npm install failed:\n{result.stdout}\n{result.stderr}"
    # Resolved through the loopback registry, to the very tarball that was built (npm may take its bytes from its
    # cache, where `npm pack` left them: the integrity says which).
    assert "/@pulumi-together-rl/sdk" in server.requests, server.requests
    lock = json.loads((project / "package-lock.json").read_text())
    entry = lock["packages"]["node_modules/@pulumi-together-rl/sdk"]
    assert entry["integrity"] == server.packument()["versions"][dist.version]["dist"]["integrity"]
    installed_package = json.loads(
        (project / "node_modules" / "@pulumi-together-rl" / "sdk" / "package.json").read_text()
    )
    assert installed_package["version"] == dist.version

    (project / "index.ts").write_text(TS_PROGRAM)
    (project / "tsconfig.json").write_text(
        json.dumps(
            {
                "compilerOptions": {"strict": True, "target": "es2020", "module": "commonjs", "noEmit": True},
                "files": ["index.ts"],
            }
        )
    )
    result = subprocess.run(
        [npx, "tsc"], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, (
        f"the program does not type-check against the SDK:\n{result.stdout}\n{result.stderr}"
    )
    load = "const sdk = require('@pulumi-together-rl/sdk'); if (typeof sdk.ModelResource !== 'function') throw new Error('no ModelResource');"
    result = subprocess.run(
        [node, "-e", load], cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (
        f"the installed SDK (built by its postinstall) does not load:\n{result.stderr}"
    )
