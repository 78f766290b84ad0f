"""A release as its users get it today: the files of ``make dist`` (nothing is published), installed the ways the
README says, in a folder outside the repository that holds ``dist/`` and nothing else, with every dependency from
the public index (PyPI; npm's registry), no local index, no ``PIP_FIND_LINKS``, no index of ours
(harness/artifacts.py).

* ``dist/`` holds every artifact of the version, listed in ``SHA256SUMS``: the wheel and sdist, five identical
  plugin archives (``PulumiPlugin.yaml``, the launcher, the package's wheel and a ``requirements.txt`` that
  installs that wheel and the locked dependencies with their hashes), the Python SDK's wheel and the TypeScript
  SDK's tarball, both SDKs naming the release's GitHub repository as ``server``, the Go module zip and the Java
  and .NET SDKs' source tarballs (the checked-in SDKs, byte for byte). The archives are rebuilt here
  from the wheel and uv.lock, byte for byte.
* The README's install commands, read from the README (and docs/journal.md's ``bucket`` extra) and run as
  written (harness/install_docs.py; tests/unit/test_doc_installs.py holds every other install command of the
  docs to these):
  - ``install:package`` and ``install:bucket``: the wheel in a new uv project, whose program runs preview (with
    the executable policy pack), up, a rename (an in-place update) and destroy against the emulator that install
    starts, the stack's state and create journal in a bucket (moto, on loopback);
  - ``install:plugin``: ``pulumi plugin install ... -f dist/<archive>`` installs the plugin from the archive
    itself, and a Pulumi YAML program (examples/yaml) with no plugin path runs preview, up, a rename and destroy,
    its state and journal in a bucket, installing nothing during the preview;
  - ``install:sdk``: the Python SDK's wheel in a uv project, whose program gets the same archive from the SDK's
    ``server`` on first use (GitHub's release downloads answered on loopback) and runs up and destroy; the
    TypeScript SDK's tarball installs, builds and type-checks under ``tsc``.

The artifacts are built once per run (or taken from ``TOGETHER_RL_DIST``); every test works in its own tmp_path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from harness.artifacts import ReleaseServer, dist_script, scratch, user_env
from harness.bucket import read_object
from harness.cli import ROOT, active, unavailable, writes
from harness.install_docs import install_commands

from pulumi_together_rl.plugin.package_schema import plugin_download_url, repository

pytestmark = [pytest.mark.release, pytest.mark.timeout(1800)]  # the release tier (make test-release)

README = (ROOT / "README.md").read_text()
PLATFORMS = {"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64", "windows-amd64"}
KEY = "tk-artifacts-0123456789abcdef-secret"
PYPI = "https://pypi.org/simple"
JOURNAL = ".together-rl/journal"
"""Where the create journal is in a bucket backend: beside the CLI's ``.pulumi/``."""


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


def locked_sources(project: Path) -> dict[str, dict[str, str]]:
    """{package: its source} as the uv project's uv.lock records them."""
    lock = (project / "uv.lock").read_text()  # read without tomllib (Python >= 3.11 only)
    entries = re.findall(
        r'^\[\[package\]\]\nname = "([^"]+)"\n(?:version = "[^"]*"\n)?source = \{ (\w+) = "([^"]*)" \}$',
        lock,
        re.M,
    )
    assert len(entries) == lock.count("[[package]]"), lock
    return {name: {kind: value} for name, kind, value in entries}


def assert_from_the_release_and_pypi(project: Path, name: str, file: Path) -> None:
    """The uv project has ``name`` from the release's ``file`` (by its path beside the project, with its hash),
    and every other package from PyPI: no other index, no other file."""
    sources = locked_sources(project)
    assert sources.pop(name) == {"path": f"../dist/{file.name}"}
    assert sources.pop(project.name) == {"virtual": "."}
    assert {package: source for package, source in sources.items() if source != {"registry": PYPI}} == {}
    lock = (project / "uv.lock").read_text()
    assert f'hash = "sha256:{hashlib.sha256(file.read_bytes()).hexdigest()}"' in lock


def plugin_folder(env: dict[str, str], version: str) -> Path:
    return Path(env["PULUMI_HOME"]) / "plugins" / f"resource-together-rl-v{version}"


def assert_installed_from_the_archive(folder: Path, dist) -> None:
    """The plugin folder has its venv, made at install time, with this version of the package installed from the
    archive's own wheel (pip's record of where it came from), and the bucket extra."""
    python = folder / "venv" / "bin" / "python"
    assert python.exists(), (
        f"no venv in the installed plugin {folder}: {sorted(p.name for p in folder.iterdir())}"
    )
    found, where = installed(python)
    assert found == dist.version
    assert where.is_relative_to((folder / "venv").resolve()), where
    assert (folder / dist.wheel.name).read_bytes() == dist.wheel.read_bytes()
    [record] = (folder / "venv").glob(
        f"lib/python*/site-packages/pulumi_together_rl-{dist.version}.dist-info"
    )
    origin = json.loads((record / "direct_url.json").read_text())
    assert origin["url"] == (folder / dist.wheel.name).resolve().as_uri(), origin
    assert "obstore" in {p.name for p in (folder / "venv").glob("lib/python*/site-packages/*")}


def site_packages(folder: Path) -> set[str]:
    return {p.name for p in (folder / "venv").glob("lib/python*/site-packages/*")}


def journal_entries(bucket) -> list[dict]:
    """The create journal's entries in the bucket, beside the state (read with boto3, not the journal's code)."""
    found = []
    for key in bucket.keys(f"{bucket.prefix}/{JOURNAL}/entries/"):
        data = read_object(bucket, key)
        if data is not None:
            found.append(json.loads(data))
    return found


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
        f"pulumi-together-rl-sdk-go-{version}.zip",
        f"pulumi-together-rl-sdk-java-{version}.tar.gz",
        f"pulumi-together-rl-sdk-dotnet-{version}.tar.gz",
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


# ------------------------------------------------------------------------------ the package, from its wheel

RENAMED = """\
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

gpu = ModelResource("qwen", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B", compute_config={"num_generator_replicas": 1}))
run = TrainingSession("gsm8k", TrainingSessionArgs(model_resource=gpu, lora_config={"rank": 32}, display_name="gsm8k-renamed",
                      metadata={"wandb": {"project": "grpo-gsm8k"}}))
pulumi.export("model_resource_id", gpu.id)
pulumi.export("training_session_id", run.id)
"""
"""The README's program, as a user edits it: its session given a display name (a PATCH, in place)."""


def test_the_readme_install_of_the_wheel_runs_preview_up_rename_and_destroy(
    dist, bucket, pulumi_bin, tmp_path
):
    folder = scratch(dist, tmp_path / "user")
    env = user_env(tmp_path, bin_dirs=(pulumi_bin,), PULUMI_BACKEND_URL=bucket.url, **bucket.env)
    sh(install_commands("README.md", "package"), cwd=folder, env=env)
    project = folder / "my-training"
    # A journal in a bucket needs the bucket extra (docs/journal.md).
    sh(install_commands("docs/journal.md", "bucket"), cwd=project, env=env)
    python = project / ".venv" / "bin" / "python"
    version, where = installed(python)
    assert version == dist.version
    assert where.is_relative_to((project / ".venv").resolve()), where  # the wheel, not this checkout
    assert_from_the_release_and_pypi(project, "pulumi-together-rl", dist.wheel)
    extras = subprocess.run(
        [str(python), "-c", "import fastapi, obstore, pulumi_policy"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert extras.returncode == 0, extras.stderr  # emulator, bucket and policy

    # The README's Pulumi.yaml and program.
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
        up = pulumi(["up", "--yes", "--skip-preview"], project, env)
        # The create journal beside the state in the bucket, with the two creates' entries.
        assert f"create journal: s3://{bucket.name}/{bucket.prefix}/{JOURNAL}?" in up.stdout, up.stdout
        outputs = json.loads(pulumi(["stack", "output", "--json"], project, env).stdout)
        entries = {(e["kind"], e.get("id")) for e in journal_entries(bucket)}
        assert {
            ("model resource", outputs["model_resource_id"]),
            ("training session", outputs["training_session_id"]),
        } <= entries, entries
        state = control.state()
        assert [(o["id"], o["status"].rsplit("_", 1)[-1]) for o in state["model_resources"]] == [
            (outputs["model_resource_id"], "READY")
        ]
        assert [o["id"] for o in state["training_sessions"]] == [outputs["training_session_id"]]

        # A rename: the session's display name changes in place (same id, one update).
        (project / "__main__.py").write_text(RENAMED)
        renamed = pulumi(["up", "--yes", "--skip-preview"], project, env)
        assert "1 updated" in renamed.stdout, renamed.stdout
        assert json.loads(pulumi(["stack", "output", "--json"], project, env).stdout) == outputs
        [session] = control.state()["training_sessions"]
        assert (session["id"], session.get("display_name")) == (
            outputs["training_session_id"],
            "gsm8k-renamed",
        )

        pulumi(["destroy", "--yes", "--skip-preview"], project, env)
        assert active(SimpleNamespace(control=control)) == {"model_resources": [], "training_sessions": []}
        control.close()
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


# ------------------------------------------------------------------------------------------------ the plugin


def test_the_plugin_archive_installs_from_itself_and_runs_a_yaml_program(
    dist, bucket, emulator, pulumi_bin, yaml_bin, tmp_path
):
    folder = scratch(dist, tmp_path / "user")
    env = user_env(tmp_path, bin_dirs=(pulumi_bin, yaml_bin), **bucket.env)
    del env["PULUMI_BACKEND_URL"]  # `pulumi login` below, as a user logs in to a bucket
    started = time.monotonic()
    sh(install_commands("README.md", "plugin"), cwd=folder, env=env)
    print(f"pulumi plugin install -f took {time.monotonic() - started:.0f} s")
    plugin = plugin_folder(env, dist.version)
    assert_installed_from_the_archive(plugin, dist)
    listed = json.loads(pulumi(["plugin", "ls", "--json"], folder, env).stdout)
    assert [(p["name"], p["kind"], p["version"]) for p in listed] == [
        ("together-rl", "resource", dist.version)
    ]
    before = site_packages(plugin)

    # examples/yaml with no `plugins:` entry: the engine takes the installed plugin.
    project = folder / "yaml"
    project.mkdir()
    program = yaml.safe_load((ROOT / "examples" / "yaml" / "Pulumi.yaml").read_text())
    del program["plugins"]
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    pulumi(["login", bucket.url], project, env)
    pulumi(["stack", "init", "dev", "--secrets-provider", "passphrase"], project, env)
    pulumi(["config", "set", "together-rl:baseUrl", emulator.base_url], project, env)
    pulumi(["config", "set", "--secret", "together-rl:apiKey", emulator.api_key], project, env)
    try:
        writes(emulator)
        preview = pulumi(["preview"], project, env)
        assert "together-rl:index:ModelResource" in preview.stdout, preview.stdout
        assert writes(emulator) == []  # a preview changes nothing
        pulumi(["up", "--yes", "--skip-preview"], project, env)
        outputs = json.loads(pulumi(["stack", "output", "--json"], project, env).stdout)
        now = active(emulator)
        assert [o["id"] for o in now["model_resources"]] == [outputs["modelResourceId"]]
        assert sorted(o["id"] for o in now["training_sessions"]) == sorted(outputs["sessionIds"])
        assert outputs["pricePerHour"] > 0
        # The installed plugin (the archive's bucket extra) wrote the create journal beside the state.
        entries = {(e["kind"], e.get("id")) for e in journal_entries(bucket)}
        expected = {("model resource", outputs["modelResourceId"])}
        expected |= {("training session", session) for session in outputs["sessionIds"]}
        assert expected <= entries, entries

        # A rename: every session's display name changes in place.
        pulumi(["config", "set", "namePrefix", "renamed"], project, env)
        renamed = pulumi(["up", "--yes", "--skip-preview"], project, env)
        assert "3 updated" in renamed.stdout, renamed.stdout
        assert json.loads(pulumi(["stack", "output", "--json"], project, env).stdout) == outputs
        sessions = {o["id"]: o.get("display_name") for o in active(emulator)["training_sessions"]}
        assert sessions == dict(
            zip(outputs["sessionIds"], ["renamed-0", "renamed-1", "renamed-2"], strict=True)
        )

        pulumi(["destroy", "--yes", "--skip-preview"], project, env)
        assert active(emulator) == {"model_resources": [], "training_sessions": []}
        # Nothing was installed after `pulumi plugin install`: no pip during preview, up or destroy.
        assert site_packages(plugin) == before
    finally:
        if active(emulator) != {"model_resources": [], "training_sessions": []}:
            subprocess.run(
                ["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"],
                cwd=project, env=env, capture_output=True, timeout=600, check=False,
            )  # fmt: skip


# ------------------------------------------------------------------------------------------------- the SDKs

SDK_PROGRAM = """\
import pulumi
import pulumi_together_rl_sdk as together_rl

gpu = together_rl.ModelResource("gpu", base_model="Qwen/Qwen3.5-4B", compute_config={"num_generator_replicas": 1})
session = together_rl.TrainingSession("rank8", model_resources_id=gpu.id, lora_config={"rank": 8})
pulumi.export("gpu_id", gpu.id)
pulumi.export("session_id", session.id)
"""


def test_a_python_sdk_program_gets_the_same_archive_from_its_server(
    dist, server, emulator, pulumi_bin, tmp_path
):
    folder = scratch(dist, tmp_path / "user")
    env = user_env(tmp_path, bin_dirs=(pulumi_bin,), server=server)
    project = folder / "sdk-project"
    project.mkdir()
    uv_add = [c for c in install_commands("README.md", "sdk") if c.startswith("uv ")]
    assert uv_add == [f"uv add ../dist/{dist.sdk_wheel.name}"], uv_add
    sh(["uv init --bare", *uv_add], cwd=project, env=env)
    assert_from_the_release_and_pypi(project, "pulumi-together-rl-sdk", dist.sdk_wheel)
    (project / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": "sdk-project", "runtime": {"name": "python", "options": {"toolchain": "uv"}}})
    )
    (project / "__main__.py").write_text(SDK_PROGRAM)
    plugin = plugin_folder(env, dist.version)
    assert not plugin.exists()

    pulumi(["stack", "init", "dev", "--secrets-provider", "passphrase"], project, env)
    pulumi(["config", "set", "together-rl:baseUrl", emulator.base_url], project, env)
    pulumi(["config", "set", "--secret", "together-rl:apiKey", emulator.api_key], project, env)
    try:
        pulumi(["up", "--yes", "--skip-preview"], project, env)
        # The engine took the plugin from the SDK's server (the release's archive for this machine, on the loopback
        # stand-in for GitHub) and installed it from the archive itself, dependencies from PyPI.
        assert f"/releases/{dist.host_archive().name}" in server.requests, server.requests
        assert_installed_from_the_archive(plugin, dist)
        outputs = json.loads(pulumi(["stack", "output", "--json"], project, env).stdout)
        assert [o["id"] for o in active(emulator)["training_sessions"]] == [outputs["session_id"]]
        pulumi(["destroy", "--yes", "--skip-preview"], project, env)
        assert active(emulator) == {"model_resources": [], "training_sessions": []}
    finally:
        if active(emulator) != {"model_resources": [], "training_sessions": []}:
            subprocess.run(
                ["pulumi", "destroy", "--yes", "--skip-preview", "--non-interactive"],
                cwd=project, env=env, capture_output=True, timeout=600, check=False,
            )  # fmt: skip


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


def test_the_go_java_and_dotnet_sdk_artifacts_are_the_checked_in_sdks(dist, tmp_path):
    """The Go module zip holds sdk/go under ``<module>@v<V>/`` (the Go module proxy's layout), the Java and .NET
    tarballs sdk/java and sdk/dotnet under one folder each: every file, as checked in, with fixed times; rebuilt,
    the same bytes. (What builds them is tested on the checked-in SDKs: tests/e2e/test_generated_sdks.py.)"""
    script = dist_script()
    version = dist.version
    module = script.go_module()
    assert module == "github.com/pulumi-together-rl/pulumi-together-rl/sdk/go"
    with zipfile.ZipFile(dist.path(f"pulumi-together-rl-sdk-go-{version}.zip")) as archive:
        infos = archive.infolist()
        found = {info.filename: archive.read(info) for info in infos}
    assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos)
    assert found == {f"{module}@v{version}/{name}": data for name, data in script.sdk_files("go").items()}
    assert f"{module}@v{version}/go.mod" in found and f"{module}@v{version}/go.sum" in found
    again = tmp_path / "again.zip"
    script.write_go_module_zip(again, version)
    assert again.read_bytes() == dist.path(f"pulumi-together-rl-sdk-go-{version}.zip").read_bytes()

    for language, build_file in (("java", "build.gradle"), ("dotnet", "PulumiTogetherRl.TogetherRl.csproj")):
        folder = f"pulumi-together-rl-sdk-{language}-{version}"
        with tarfile.open(dist.path(f"{folder}.tar.gz")) as tar:
            members = tar.getmembers()
            assert all(m.isfile() and m.mode == 0o644 and m.mtime == script.EPOCH for m in members)
            found = {m.name: tar.extractfile(m).read() for m in members}
        assert found == {f"{folder}/{name}": data for name, data in script.sdk_files(language).items()}
        assert f"{folder}/{build_file}" in found, language


def test_the_typescript_sdk_tarball_installs_and_type_checks(dist, tmp_path):
    npm, npx, node = shutil.which("npm"), shutil.which("npx"), shutil.which("node")
    if not (npm and npx and node):
        unavailable(
            "Node.js and npm are not on PATH: the TypeScript SDK is installed and type-checked with them"
        )
    folder = scratch(dist, tmp_path / "user")
    project = folder / "ts-project"
    project.mkdir()
    env = user_env(tmp_path)
    (project / "package.json").write_text(
        json.dumps({"name": "ts-project", "private": True, "version": "0.0.0"})
    )
    npm_install = [c for c in install_commands("README.md", "sdk") if c.startswith("npm ")]
    assert npm_install == [f"npm install ../dist/{dist.npm_tarball.name}"], npm_install
    sh(npm_install, cwd=project, env=env)
    # The very tarball that was built, by its path; its dependencies from npm's registry.
    package = json.loads((project / "package.json").read_text())
    assert package["dependencies"] == {"@pulumi-together-rl/sdk": f"file:../dist/{dist.npm_tarball.name}"}
    lock = json.loads((project / "package-lock.json").read_text())
    entry = lock["packages"]["node_modules/@pulumi-together-rl/sdk"]
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(dist.npm_tarball.read_bytes()).digest()).decode()
    assert entry["integrity"] == integrity, entry
    installed_package = json.loads(
        (project / "node_modules" / "@pulumi-together-rl" / "sdk" / "package.json").read_text()
    )
    assert installed_package["version"] == dist.version

    (project / "index.ts").write_text(TS_PROGRAM)
    (project / "tsconfig.json").write_text(
        json.dumps(
            {
                # skipLibCheck: the program is checked against the SDK's declarations, which the SDK's own build
                # (its postinstall, strict) made from checked sources; checking every .d.ts under node_modules
                # again (@pulumi/pulumi's, grpc's) took three times the CPU and proves nothing of this release.
                "compilerOptions": {
                    "strict": True,
                    "target": "es2020",
                    "module": "commonjs",
                    "noEmit": True,
                    "skipLibCheck": True,
                },
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
