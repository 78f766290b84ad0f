"""Where the create journal is (docs/journal.md's table): TOGETHER_RL_JOURNAL_URL, then the provider's
journalUrl setting, then beside a bucket backend's state, else this machine's folder."""

from __future__ import annotations

import pytest

from pulumi_together_rl import backend, config
from pulumi_together_rl.ownership import location

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
