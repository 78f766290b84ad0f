"""Finding the stack's backend the way the Pulumi CLI finds it, and telling backends apart by location."""

from __future__ import annotations

import json
import os

from pulumi_together_rl import backend


def env(tmp_path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "PULUMI_HOME": str(tmp_path / "pulumi-home"), **extra}


def login(tmp_path, url: str) -> None:
    folder = tmp_path / "pulumi-home"
    folder.mkdir(exist_ok=True)
    (folder / "credentials.json").write_text(json.dumps({"current": url, "accessTokens": {url: "secret"}}))


def test_the_environment_wins_then_the_project_file_then_the_login_then_pulumi_cloud(tmp_path):
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    given = env(tmp_path)

    assert backend.locate(project, given).location == "https://api.pulumi.com"
    assert backend.locate(project, given).source == "the default"

    login(tmp_path, "file://~/.pulumi-state")
    found = backend.locate(project, given)
    assert found.location == f"file://{os.path.realpath(tmp_path / 'home' / '.pulumi-state')}"
    assert found.source == f"current in {tmp_path / 'pulumi-home' / 'credentials.json'}"

    (project / "Pulumi.yaml").write_text("name: p\nruntime: python\nbackend:\n  url: file://./state\n")
    found = backend.locate(project / "sub", given)  # found from a folder below, relative to the project file
    assert found.location == f"file://{os.path.realpath(project / 'state')}"
    assert found.source == f"backend.url in {project / 'Pulumi.yaml'}"

    url = "s3://team-state/pulumi?endpoint=127.0.0.1:9000&disableSSL=true&s3ForcePathStyle=true&region=us-east-1"
    found = backend.locate(project, {**given, "PULUMI_BACKEND_URL": url})
    assert found.location == "s3://team-state/pulumi?endpoint=http://127.0.0.1:9000"
    assert (found.source, found.scheme, found.self_managed) == ("PULUMI_BACKEND_URL", "s3", True)


def test_one_location_is_one_identity_and_two_are_two(tmp_path):
    real = tmp_path / "state"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    same = [
        backend.canonical(f"file://{real}"),
        backend.canonical(f"file://{tmp_path / 'link'}/"),
        backend.canonical("file://state", base=tmp_path),
    ]
    assert len(set(same)) == 1
    other = backend.canonical(f"file://{tmp_path / 'elsewhere'}")
    buckets = {
        backend.canonical("s3://state?region=us-east-1&endpoint=a.example:9000"),
        backend.canonical("s3://state?region=eu-west-1&endpoint=https://a.example:9000/"),
    }
    assert len(buckets) == 1  # the region is how it is reached, not which store it is
    assert backend.canonical("s3://state?endpoint=b.example:9000") not in buckets  # another server's bucket
    assert other != same[0]
    ids = {
        backend.Backend(url="", source="", location=where).identity
        for where in (same[0], other, *buckets, "https://api.pulumi.com")
    }
    assert len(ids) == 4


def test_a_location_never_holds_a_credential():
    found = backend.canonical("https://user:token@pulumi.example.com:8443/api/")
    assert found == "https://pulumi.example.com:8443/api"
    assert "token" not in backend.canonical("azblob://state?storage_account=acct&sas_token=secret-sig")


def test_an_unreadable_project_file_or_login_falls_through(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: [unclosed\n")
    login_folder = tmp_path / "pulumi-home"
    login_folder.mkdir()
    (login_folder / "credentials.json").write_text("{not json")
    assert backend.locate(project, env(tmp_path)).location == backend.CLOUD
