"""Reading and pruning the create journal's folder: a ``done`` record is parsed once per process (every create
reads the whole folder, and done records pile up for 24 hours), yet a record that changes or goes is seen as it is
on disk; the folder is pruned when a create begins, at most once per ``PRUNE_EVERY``."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from pulumi_together_rl.ownership import journal

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B"}


@pytest.fixture
def loads(monkeypatch):
    """How many times each file was parsed."""
    counted: dict[str, int] = {}
    real = journal._parse

    def parse(path, data):
        counted[path.name] = counted.get(path.name, 0) + 1
        return real(path, data)

    monkeypatch.setattr(journal, "_parse", parse)
    return counted


def done_record(owner: str) -> journal.Entry:
    entry = journal.begin("model resource", BASE, BODY, owner)
    entry.posting([])
    entry.sending()
    entry.record(f"mr_{owner}")
    entry.done()
    return entry


def test_a_done_record_is_parsed_once_however_many_creates_read_the_folder(loads):
    records = [done_record(f"o/p/s/gpu{i}") for i in range(5)]
    loads.clear()

    for _ in range(4):
        assert {e.id for e in journal.entries()} >= {r.id for r in records}

    assert all(loads.get(r.path.name, 0) <= 1 for r in records), loads


def test_each_read_hands_out_a_fresh_copy_that_its_holder_may_claim(loads):
    record = done_record("o/p/s/gpu")
    first = next(e for e in journal.entries() if e.path == record.path)
    second = next(e for e in journal.entries() if e.path == record.path)
    assert first is not second
    assert first.claim()
    assert not second.claim()  # one holder at a time, as across processes
    first.release()


def test_a_record_changed_or_removed_on_disk_is_read_as_it_is_now():
    record = done_record("o/p/s/gpu")
    assert record.path in {e.path for e in journal.entries()}

    data = json.loads(record.path.read_text())
    data["state"] = "created"  # rewritten (a new file renamed over it, as every write does)
    replacement = record.path.with_name(".rewrite.tmp")
    replacement.write_text(json.dumps(data))
    os.replace(replacement, record.path)
    [seen] = [e for e in journal.entries() if e.path == record.path]
    assert seen.state == "created"

    record.path.unlink()
    assert record.path not in {e.path for e in journal.entries()}


def test_the_folder_is_pruned_when_a_create_begins_at_most_once_per_interval(monkeypatch):
    old = done_record("o/p/s/old")
    aged = datetime.now(timezone.utc) - journal.MAX_AGE - timedelta(minutes=1)

    def age(entry: journal.Entry) -> None:
        data = json.loads(entry.path.read_text())
        data["started_at"] = aged.isoformat()
        entry.path.write_text(json.dumps(data))

    age(old)
    monkeypatch.setattr(journal, "PRUNE_EVERY", 3600.0)
    journal._pruned.clear()
    journal.begin("model resource", BASE, BODY, "o/p/s/a").discard()
    assert not old.path.exists()  # the first create of the process prunes

    later = done_record("o/p/s/later")
    age(later)
    journal.begin("model resource", BASE, BODY, "o/p/s/b").discard()
    assert later.path.exists()  # not due yet

    monkeypatch.setattr(journal, "PRUNE_EVERY", 0.0)
    journal.begin("model resource", BASE, BODY, "o/p/s/c").discard()
    assert not later.path.exists()
