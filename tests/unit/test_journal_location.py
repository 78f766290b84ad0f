"""Where the create journal is (docs/journal.md's table): TOGETHER_RL_JOURNAL_URL, then the provider's
journalUrl setting, then beside a bucket backend's state, else this machine's folder."""

from __future__ import annotations

import json

import pytest

from pulumi_together_rl import backend, config
from pulumi_together_rl.ownership import journal, location
from pulumi_together_rl.ownership.stores.bucket import BucketStore

BUCKET = "s3://team-state/training?endpoint=127.0.0.1:9000&disableSSL=true&region=eu-west-1"


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    monkeypatch.delenv(location.ENV_URL, raising=False)
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    config.reset()
    yield
    config.reset()


def test_a_bucket_backend_puts_the_journal_beside_its_state_with_its_query(monkeypatch):
    monkeypatch.setenv("PULUMI_BACKEND_URL", BUCKET)

    where = location.locate()

    assert where.url == (
        "s3://team-state/training/.together-rl/journal?endpoint=127.0.0.1:9000&disableSSL=true&region=eu-west-1"
    )
    assert where.source.startswith("beside the stack's state in s3://team-state/training")


def test_the_setting_wins_over_the_backend_and_the_variable_over_both(monkeypatch):
    monkeypatch.setenv("PULUMI_BACKEND_URL", BUCKET)
    config.configure({"together:journalUrl": "s3://journal/from-setting"})
    assert location.locate() == location.Location("s3://journal/from-setting", "together:journalUrl")

    monkeypatch.setenv(location.ENV_URL, "file:///srv/journal")
    assert location.locate() == location.Location("file:///srv/journal", "TOGETHER_RL_JOURNAL_URL")


@pytest.mark.parametrize(
    ("backend_url", "why"),
    [
        ("file:///tmp/state", "the stack's backend is a folder of this machine"),
        ("https://api.pulumi.com", "the stack's backend is Pulumi Cloud"),
    ],
)
def test_a_folder_or_pulumi_cloud_backend_keeps_the_journal_in_this_machines_folder(
    monkeypatch, backend_url, why
):
    monkeypatch.setenv("PULUMI_BACKEND_URL", backend_url)
    assert location.locate() == location.Location(None, why)
    assert location.locate(backend.locate()).shared is False


BUCKET_BACKENDS = {
    "s3": (
        "s3://team-state/training?region=eu-west-1",
        "s3://team-state/training/.together-rl/journal?region=eu-west-1",
    ),
    "gs": ("gs://team-state/training/", "gs://team-state/training/.together-rl/journal"),
    "azblob": (
        "azblob://team-state/training?storage_account=teamacct",
        "azblob://team-state/training/.together-rl/journal?storage_account=teamacct",
    ),
}


def _backend_from(source: str, url: str, folder, monkeypatch) -> None:
    """Make ``url`` the stack's backend the way ``source`` names it, for a command run in ``folder``."""
    monkeypatch.chdir(folder)
    if source == "PULUMI_BACKEND_URL":
        monkeypatch.setenv("PULUMI_BACKEND_URL", url)
    elif source == "Pulumi.yaml":
        (folder / "Pulumi.yaml").write_text(f"name: p\nruntime: python\nbackend:\n  url: {url}\n")
    else:  # what `pulumi login <url>` leaves
        home = folder / "pulumi-home"
        home.mkdir()
        (home / "credentials.json").write_text(json.dumps({"current": url, "accessTokens": {url: ""}}))
        monkeypatch.setenv("PULUMI_HOME", str(home))


@pytest.mark.parametrize("source", ["PULUMI_BACKEND_URL", "Pulumi.yaml", "credentials.json current"])
@pytest.mark.parametrize("scheme", sorted(BUCKET_BACKENDS))
def test_every_bucket_scheme_puts_the_journal_beside_its_state_whichever_way_the_backend_is_named(
    tmp_path, monkeypatch, scheme, source
):
    """A GCS or Azure Blob backend is a bucket as S3 is: a runner thrown away must not take the journal with it."""
    url, beside = BUCKET_BACKENDS[scheme]
    _backend_from(source, url, tmp_path, monkeypatch)

    where = location.locate()

    assert where.url == beside
    assert where.shared
    assert where.source == f"beside the stack's state in {location.printable(backend.locate().url)}"
    assert backend.locate().location.startswith(f"{scheme}://team-state/training")


@pytest.mark.parametrize("scheme", sorted(BUCKET_BACKENDS))
def test_the_journal_beside_any_bucket_backends_state_is_that_buckets_store(tmp_path, monkeypatch, scheme):
    """Found beside the state, the journal is opened as a store in that bucket (building one makes no request)."""
    url, _ = BUCKET_BACKENDS[scheme]
    _backend_from("PULUMI_BACKEND_URL", url, tmp_path, monkeypatch)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "teamacct")  # obstore builds no Azure client without one

    store = journal.at(location.locate().url).store

    assert isinstance(store, BucketStore)
    assert store.location.split("?", 1)[0] == f"{scheme}://team-state/training/.together-rl/journal"
    assert store.location == location.printable(location.locate().url)  # what lines name it by


def test_a_backend_named_with_gocloud_prefix_keeps_its_journal_beside_the_state_under_that_prefix(
    bucket, monkeypatch
):
    """`s3://b?prefix=team/` is the CLI's `s3://b/team`: the state under `team/.pulumi/`, so the journal goes under
    `team/.together-rl/journal/`, written there by the store (which reads gocloud's `prefix` as the CLI does)."""
    query = bucket.url.split("?", 1)[1]
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"s3://{bucket.name}?prefix=team/&{query}")
    store = journal.at(location.locate().url).store

    assert store.create("probes/here", b"x") is not None
    assert bucket.keys("team/") == ["team/.together-rl/journal/probes/here"]
