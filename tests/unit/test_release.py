"""One version and one repository, wherever a release writes them, and the release's own check
(scripts/release_notes.py): the version is set once (``__version__``), the repository once (pyproject.toml's
``[project.urls] Repository``); everything else is made from them or held to them here (docs/releasing.md)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pulumi_together_rl import __version__
from pulumi_together_rl.plugin.package_schema import package_schema, plugin_download_url, repository

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "scripts" / "release_notes.py"


def _read(relative: str) -> str:
    return (ROOT / relative).read_text()


def test_the_version_is_the_same_everywhere_a_release_writes_it():
    setup = _read("sdk/python/setup.py")
    node = json.loads(_read("sdk/nodejs/package.json"))
    found = {
        "the installed metadata": importlib.metadata.version("pulumi-together-rl"),
        "the plugin's schema": package_schema()["version"],
        "sdk/python/setup.py": re.search(r'^VERSION = "([^"]+)"$', setup, re.M).group(1),
        "sdk/python pulumi-plugin.json": json.loads(
            _read("sdk/python/pulumi_together_rl_sdk/pulumi-plugin.json")
        )["version"],
        "sdk/nodejs/package.json": node["version"],
        "sdk/nodejs/package.json pulumi": node["pulumi"]["version"],
        "sdk/go pulumi-plugin.json": json.loads(_read("sdk/go/togetherrl/pulumi-plugin.json"))["version"],
        "sdk/java/build.gradle": re.findall(r'^\s*\? "([^"]+)"$', _read("sdk/java/build.gradle"), re.M)[0],
        "sdk/dotnet pulumi-plugin.json": json.loads(_read("sdk/dotnet/pulumi-plugin.json"))["version"],
        "sdk/dotnet csproj": re.search(
            r"<Version>([^<]+)</Version>", _read("sdk/dotnet/PulumiTogetherRl.TogetherRl.csproj")
        ).group(1),
        "the gitops example's policy pack": yaml.safe_load(_read("examples/gitops/policy/PulumiPolicy.yaml"))[
            "version"
        ],
        "the README's pulumi plugin install": re.search(
            r"^pulumi plugin install resource together-rl (\S+) ", _read("README.md"), re.M
        ).group(1),
        "CHANGELOG.md's newest release": re.search(
            r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", _read("CHANGELOG.md"), re.M
        ).group(1),
    }
    assert {where: v for where, v in found.items() if v != __version__} == {}, f"not {__version__}"


def test_the_repository_is_the_same_everywhere_and_no_placeholder_is_left():
    owner_and_name = repository()
    assert owner_and_name == "pulumi-together-rl/pulumi-together-rl"
    assert plugin_download_url() == f"github://api.github.com/{owner_and_name}"
    assert package_schema()["pluginDownloadURL"] == plugin_download_url()
    assert (
        json.loads(_read("sdk/python/pulumi_together_rl_sdk/pulumi-plugin.json"))["server"]
        == plugin_download_url()
    )
    assert json.loads(_read("sdk/nodejs/package.json"))["pulumi"]["server"] == plugin_download_url()
    for sdk in ("sdk/go/togetherrl", "sdk/dotnet"):
        assert json.loads(_read(f"{sdk}/pulumi-plugin.json"))["server"] == plugin_download_url(), sdk
    pages = [
        "README.md",
        "CHANGELOG.md",
        *(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
    ]
    for page in pages:
        text = _read(page)
        assert "<owner>" not in text, page
        named = set(re.findall(r"(?:github\.com|api\.github\.com)/([\w.-]+/pulumi-together-rl)\b", text))
        assert named <= {owner_and_name}, (page, named)
    assert owner_and_name in _read("README.md")


def _notes(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(NOTES), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_release_notes_are_the_changelog_section_of_the_version():
    result = _notes("--tag", f"v{__version__}", "--repository", repository())
    assert result.returncode == 0, result.stderr
    changelog = _read("CHANGELOG.md")
    section = changelog.split(f"## [{__version__}] - ", 1)[1].split("\n## [", 1)[0]
    assert result.stdout.strip() == section.split("\n", 1)[1].strip()
    assert "### Upgrading from" in result.stdout  # what a user must do on upgrade


def test_a_release_from_another_tag_or_repository_is_refused():
    result = _notes("--tag", "v9.9.9", "--repository", "someone/else")
    assert result.returncode == 1 and result.stdout == ""
    assert f"the tag v9.9.9 is not v{__version__}" in result.stderr
    assert f"this runs in someone/else, but pyproject.toml names {repository()}" in result.stderr


def _dist():
    """scripts/dist.py as a module (a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("dist_script", ROOT / "scripts" / "dist.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sdk_tree(root: Path) -> Path:
    """A copy of the files of the checked-in SDKs that carry the version."""
    for relative in {relative for relative, _ in _dist().SDK_VERSIONS}:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(_read(relative))
    return root


def _set_json(path: Path, field: str, value: str) -> None:
    data = json.loads(path.read_text())
    *parents, last = field.split(".")
    place = data
    for part in parents:
        place = place[part]
    place[last] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("relative", "field"),
    [
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
    ],
)
def test_dist_refuses_sdks_of_another_version_in_one_sentence(tmp_path, relative, field):
    dist = _dist()
    root = _sdk_tree(tmp_path)
    dist.check_versions(__version__, root)  # as checked in: this version everywhere

    path = root / relative
    if relative.endswith(".py"):
        text = path.read_text()
        assert text.count(f'VERSION = "{__version__}"') == 1
        path.write_text(text.replace(f'VERSION = "{__version__}"', 'VERSION = "0.0.9"'))
    elif relative.endswith(".json"):
        _set_json(path, field, "0.0.9")
    else:  # the version is the only one these files say (the Go SDK's twice: for resources and invokes)
        text = path.read_text()
        assert __version__ in text
        path.write_text(text.replace(__version__, "0.0.9"))
    with pytest.raises(SystemExit) as refused:
        dist.check_versions(__version__, root)

    sentence = str(refused.value.code)
    assert sentence == (
        f"building the release artifacts (version {__version__}): the checked-in SDKs carry another version "
        f"({relative} {field} is 0.0.9). Run `make sdk` and commit the result."
    )


def test_dist_refuses_sdks_that_carry_no_version(tmp_path):
    root = _sdk_tree(tmp_path)
    (root / "sdk/python/pulumi_together_rl_sdk/pulumi-plugin.json").write_text("{}")
    with pytest.raises(SystemExit) as refused:
        _dist().check_versions(__version__, root)
    assert "sdk/python/pulumi_together_rl_sdk/pulumi-plugin.json version is missing" in str(
        refused.value.code
    )


def test_the_release_workflow_carries_every_sdk_after_the_github_release():
    """Each SDK's artifact is published by a job of its own, after the GitHub release its `server` names (which
    uploads every file of dist/), and the release is marked latest only after every publishing job; the channels
    that need credentials the repository may not have (Maven Central, NuGet) are opt-in, never failed."""
    workflow = yaml.safe_load(_read(".github/workflows/release.yml"))
    jobs = workflow["jobs"]
    scripts = {
        name: "\n".join(step.get("run", "") for step in job.get("steps", [])) for name, job in jobs.items()
    }
    assert "dist/*" in scripts["github-release"]
    carried = {
        "pypi-sdk": "dist/pulumi_together_rl_sdk-",
        "npm": "dist/pulumi-together-rl-sdk-",
        "go-tag": "refs/tags/sdk/go/",
        "maven": "dist/pulumi-together-rl-sdk-java-",
        "nuget": "dist/pulumi-together-rl-sdk-dotnet-",
    }
    for job, artifact in carried.items():
        assert artifact in scripts[job], job
        assert jobs[job]["needs"] == "github-release", job
    assert jobs["maven"]["if"] == "vars.PUBLISH_JAVA == 'true'"
    assert jobs["nuget"]["if"] == "vars.PUBLISH_DOTNET == 'true'"
    assert set(jobs["latest"]["needs"]) == set(carried)
    assert jobs["latest"]["if"] == "${{ !failure() && !cancelled() }}"
