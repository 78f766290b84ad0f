"""Reading the create journal: an entry is parsed once per version however many creates read it (done records
pile up for a day, and every create reads its request's entries), yet one that changes or goes is seen as it is
now; and pruning, on the store's clock, at most once per ``PRUNE_EVERY`` per process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from harness.journals import left, rewrite

from pulumi_together_rl.ownership import journal, leases
from pulumi_together_rl.ownership.journal import Journal
from pulumi_together_rl.ownership.records import State, request_key

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B"}
REQUEST = request_key("model resource", BASE, BODY)


@pytest.fixture
def parses(monkeypatch):
    """How many times an entry's bytes were parsed."""
    counted = [0]
    real = journal.parse_entry

    def parse(data):
        counted[0] += 1
        return real(data)

    monkeypatch.setattr(journal, "parse_entry", parse)
    return counted


def test_an_entry_is_parsed_once_per_version_however_many_creates_read_it(parses):
    made = [
        left("model resource", BASE, BODY, f"o/p/s/gpu{i}", ident=f"mr-{i}", state=State.DONE)
        for i in range(5)
    ]
    journal.current().entries()
    parses[0] = 0
    for _ in range(4):
        assert {s.entry.id for s in journal.current().entries(request=REQUEST)} == {s.entry.id for s in made}
    assert parses[0] == 0


def test_an_entry_changed_or_removed_is_read_as_it_is_now(parses):
    seen = left("model resource", BASE, BODY, "o/p/s/gpu", ident="mr-1", state=State.DONE)
    assert [s.entry.state for s in journal.current().entries()] == [State.DONE]
    rewrite(seen, state=State.CREATED)
    assert [s.entry.state for s in journal.current().entries()] == [State.CREATED]
    journal.current().store.remove(seen.key)
    assert journal.current().entries() == []


def test_the_journal_is_pruned_on_the_stores_clock_at_most_once_per_interval(monkeypatch):
    """Done records a day old (on the store's clock, whatever their writer's clock said) go, at most once per
    interval per process; an unfinished entry of that age stays (the orphan finder reports it)."""
    where = journal.current()
    where.probe()
    old = left("model resource", BASE, BODY, "o/p/s/old", ident="mr-old", state=State.DONE)
    interrupted = left("model resource", BASE, BODY, "o/p/s/left", ident="mr-left")
    store_now = Journal.now
    monkeypatch.setattr(Journal, "now", lambda self: store_now(self) + journal.MAX_AGE + timedelta(minutes=1))
    monkeypatch.setattr(leases, "PRUNE_EVERY", 3600.0)
    leases._pruned.clear()

    def prune() -> None:
        leases.prune(where, REQUEST, ended_after=journal.MAX_AGE, forget_after=journal.FORGET_AFTER)

    prune()
    keys = {s.key for s in where.entries()}
    assert old.key not in keys and interrupted.key in keys  # the first of the process prunes
    assert where.claim(BASE, "mr-old") is None and where.claim(BASE, "mr-left") is not None

    later = left("model resource", BASE, BODY, "o/p/s/later", ident="mr-later", state=State.DONE)
    monkeypatch.setattr(Journal, "now", lambda self: store_now(self) + 2 * journal.MAX_AGE)
    prune()
    assert later.key in {s.key for s in where.entries()}  # not due yet

    monkeypatch.setattr(leases, "PRUNE_EVERY", 0.0)
    prune()
    assert later.key not in {s.key for s in where.entries()}


def test_a_journal_never_probed_prunes_nothing(monkeypatch):
    """A reader that never learnt the store's clock ages nothing: a runner whose clock is a month fast would
    otherwise prune another declaration's interrupted entry."""
    where = Journal(journal.current().store, journal.current().url)
    seen = left("model resource", BASE, BODY, "o/p/s/left", ident="mr-left")
    monkeypatch.setattr(leases, "PRUNE_EVERY", 0.0)
    leases.prune(where, REQUEST, ended_after=timedelta(0), forget_after=timedelta(0))
    assert seen.key in {s.key for s in where.entries()}
