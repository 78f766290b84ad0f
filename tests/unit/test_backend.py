"""Finding the stack's backend the way the Pulumi CLI finds it, and telling backends apart by location."""

from __future__ import annotations

import json
import os

import pytest
from harness import journals

from pulumi_together_rl import backend
from pulumi_together_rl.ownership import journal
from pulumi_together_rl.ownership.records import Declaration


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


@pytest.mark.parametrize(
    "spellings",
    [
        pytest.param(["s3://b/p", "s3://b/p/", "s3://b//p", "s3://b?prefix=p/", "s3://b/%70"], id="prefix"),
        pytest.param(["s3://b", "s3://b/", "s3://b//"], id="no-prefix"),
        pytest.param(
            [
                "s3://b/p?endpoint=minio:9000&disableSSL=true&region=us-east-1&s3ForcePathStyle=true",
                "s3://b/p/?s3ForcePathStyle=true&region=eu-west-1&disableSSL=true&endpoint=minio:9000",
                "s3://b/p?endpoint=minio:9000&disable_https=true",
                "s3://b/p?endpoint=minio:9000&disableSSL=1",
                "s3://b/p?endpoint=minio:9000&disableSSL=false&disableSSL=True",
                "s3://b/p?endpoint=http://minio:9000",
                "s3://b/p?endpoint=HTTP://MinIO:9000/",
            ],
            id="http-endpoint",
        ),
        pytest.param(
            [
                "s3://b/p?endpoint=s3.example.com",
                "s3://b/p?endpoint=https://s3.example.com",
                "s3://b/p?endpoint=https://s3.example.com:443/",
                "s3://b/p?endpoint=s3.example.com&disableSSL=false",
                "s3://b/p?endpoint=s3.example.com&disableSSL=true&disableSSL=false",
            ],
            id="https-endpoint",
        ),
        pytest.param(["gs://b/p", "gs://b/p/", "gs://b?prefix=p/"], id="gcs"),
        pytest.param(["azblob://c/p", "azblob://c/p/?protocol=https", "azblob://c//p"], id="azure"),
    ],
)
def test_one_bucket_backend_spelled_the_ways_the_cli_reads_as_one_is_one_identity(spellings):
    """What the CLI reads as one store (its key prefix: gocloud.dev's ``prefix`` parameter, then the path without
    leading slashes and with one trailing slash; the endpoint a bare one becomes) is one identity, or a create
    journal entry is not recognised as the same declaration's and a second GPU is made."""
    locations = {backend.canonical(url) for url in spellings}
    assert len(locations) == 1, locations
    identities = {
        backend.Backend(url=url, source="", location=backend.canonical(url)).identity for url in spellings
    }
    assert len(identities) == 1


def test_what_the_cli_reads_as_two_bucket_backends_stays_two():
    distinct = [
        "s3://b/p",
        "s3://b/p//",  # the CLI's prefix is p// (it adds no slash to one that ends in one): other keys
        "s3://b?prefix=p",  # keys p.pulumi/...: no slash after the prefix
        "s3://b/q",
        "s3://b",
        "s3://c/p",
        "gs://b/p",
        "s3://b/p?endpoint=minio:9000",  # https://minio:9000
        "s3://b/p?endpoint=minio:9000&disableSSL=true",  # http://minio:9000
        "s3://b/p?endpoint=minio:9001&disableSSL=true",
    ]
    assert len({backend.canonical(url) for url in distinct}) == len(distinct)


def test_an_entry_written_under_one_spelling_of_a_bucket_backend_is_found_under_another(bucket, monkeypatch):
    """A create killed mid-way under one spelling of the stack's backend (a runner's PULUMI_BACKEND_URL), taken
    over by the next run under another (a laptop's ``pulumi login``): the journal beside the state is the same one,
    and the entry is the same declaration's."""
    body, owner = {"base_model": "Qwen/Qwen3.5-4B"}, "organization/sweep/dev/gpu"
    written = f"s3://{bucket.name}/team/?endpoint={bucket.endpoint}&disableSSL=true&s3ForcePathStyle=true"
    read = f"s3://{bucket.name}//team?s3ForcePathStyle=true&disable_https=1&endpoint=http://{bucket.endpoint}"
    monkeypatch.setenv("PULUMI_BACKEND_URL", written)
    entry = journals.begun("model resource", "https://api.test", body, owner, ident="mr-1")
    entry.release()  # the run is gone; its entry keeps the id
    assert any(key.startswith("team/.together-rl/journal/") for key in bucket.keys())  # beside the state

    monkeypatch.setenv("PULUMI_BACKEND_URL", read)
    here = backend.locate()
    found = journal.interrupted(
        journal.for_stack(here),
        Declaration.of("model resource", "https://api.test", body, owner, here.identity),
    )

    assert [e.entry.id for e in found] == ["mr-1"]
    assert here.identity == entry.entry.backend
