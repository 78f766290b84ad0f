"""What the journal holds to, between two writes, two processes or two clocks: leases and ages judged on the store's
clock (a store far behind the runner's clock, a runner a month fast), a reader that never probed given the
margin, a renewal that cannot reach the store keeping its lease, an entry's removal taking only its own claim, and
planted or corrupt entries (leases of strings, lists, NaN, Infinity or a century; a store time in the future)
skipped with one line naming them. Each behaviour here is one that a one-line change would break silently."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest
from harness.journals import begun, left, rewrite

from pulumi_together_rl.ownership import journal, leases
from pulumi_together_rl.ownership.journal import Journal
from pulumi_together_rl.ownership.records import Declaration, Entry, State, request_key
from pulumi_together_rl.ownership.stores import Listed, Store, Stored, StoreError

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B"}
OWNER = "organization/sweep/dev/gpu"


class Skewed(Store):
    """Another store seen through a clock ``by`` off (a bucket whose server runs behind): every time it tells
    (``modified``, the probe's now) is shifted. It has no holds of its own, as a bucket has none: leases decide."""

    def __init__(self, inner: Store, by: timedelta) -> None:
        self.inner, self.by = inner, by
        self.location = inner.location
        self.fail_swaps = 0

    def where(self, key: str) -> str:
        return self.inner.where(key)

    def create(self, key: str, data: bytes) -> str | None:
        return self.inner.create(key, data)

    def read(self, key: str, limit: int = 1 << 20) -> Stored | None:
        found = self.inner.read(key, limit)
        return None if found is None else Stored(found.data, found.version, found.modified + self.by)

    def swap(self, key: str, data: bytes, version: str) -> str | None:
        if self.fail_swaps:
            self.fail_swaps -= 1
            raise StoreError(self.location, "it could not be reached (connection reset)")
        return self.inner.swap(key, data, version)

    def remove(self, key: str) -> None:
        self.inner.remove(key)

    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        return [
            Listed(i.key, i.version, i.size, i.modified + self.by, i.refused, i.data)
            for i in self.inner.listing(prefix, recursive=recursive)
        ]


@pytest.fixture
def behind():
    """A store whose clock is ten minutes behind this machine's."""
    return Skewed(journal.current().store, timedelta(minutes=-10))


def written_by_a_live_run(store: Store) -> leases.Holding:
    where = Journal(store, "skewed://team")
    where.probe()
    return leases.Holding.begin(
        where,
        Entry(
            kind="model resource",
            base_url=BASE,
            body=BODY,
            owner=OWNER,
            started_at=datetime.now(timezone.utc),
        ),
    )


def test_a_live_lease_is_judged_on_the_stores_clock_not_the_readers(behind):
    """Written a moment ago on a store ten minutes behind: live, for a reader that probed that store."""
    held = written_by_a_live_run(behind)
    try:
        reader = Journal(behind, "skewed://team")
        reader.probe()
        [seen] = reader.entries()
        assert seen.live() and 0 < seen.left() <= journal.lease_seconds() + journal.CLOCK_MARGIN + 1
        assert seen.age() < timedelta(seconds=30)  # its age too: the store's
    finally:
        leases.forget(held)


def test_a_reader_that_never_probed_gives_a_lease_the_margin_of_an_unknown_clock(tmp_path):
    """A store a minute behind, read by a command that writes nothing (no probe, so its own clock): a lease written
    a moment ago is still live, because an unprobed judgement is only ever too long, never too short."""
    store = Skewed(journal.current().store, timedelta(minutes=-1))
    held = written_by_a_live_run(store)
    try:
        [seen] = Journal(store, "skewed://team").entries()
        assert seen.live()
    finally:
        leases.forget(held)


def test_one_renewal_that_cannot_reach_the_store_keeps_the_lease(behind):
    held = written_by_a_live_run(behind)
    try:
        behind.fail_swaps = 1
        held.renew()  # the store is away for this one
        assert not held.lost and held.held
        held.write()  # the next beat lands
        assert not held.lost
    finally:
        leases.forget(held)


def test_a_lost_lease_is_lost_for_good_and_its_last_write_says_so(behind):
    """Another run took the entry over meanwhile (its swap landed): this holder's next write fails, marks it lost,
    and every write after that fails too, releasing included (it must never mark done what it no longer holds)."""
    held = written_by_a_live_run(behind)
    reader = Journal(behind, "skewed://team")
    [seen] = reader.entries()
    assert behind.swap(seen.key, b"{}", seen.version) is not None  # the taker's write
    held.renew()  # the renewal thread's beat: its swap fails
    assert held.lost
    with pytest.raises(leases.LeaseLost):
        held.write()
    with pytest.raises(leases.LeaseLost):
        held.release(state=State.DONE)


def test_a_runner_whose_clock_is_a_month_fast_prunes_nothing_young(monkeypatch):
    """Ages are the store's: a runner whose own clock is 31 days fast (and probed the store) sees an interrupted
    entry of another declaration, written a moment ago, as a moment old, and keeps it."""
    other = left("model resource", BASE, BODY, "organization/sweep/prod/gpu", ident="mr-prod")

    class Fast(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return datetime.now(tz) + timedelta(days=31)

    monkeypatch.setattr(journal, "datetime", Fast)
    where = Journal(journal.current().store, journal.current().url)
    where.probe()
    monkeypatch.setattr(leases, "PRUNE_EVERY", 0.0)
    leases.prune(
        where, other.entry.request_key, ended_after=journal.MAX_AGE, forget_after=journal.FORGET_AFTER
    )
    assert other.key in {s.key for s in where.entries()}


def test_removing_an_entry_takes_its_own_claim_and_never_another_entrys_of_the_same_id():
    mine = left("model resource", BASE, BODY, OWNER, ident="mr-1")  # the claim of mr-1 names it
    stale = left("model resource", BASE, BODY, "organization/sweep/qa/gpu", ident=None)
    theirs = journal.current()
    # ``stale`` names mr-1 too (a planted or a reverted id), but the claim is mine's.
    stale = rewrite(stale, id="mr-1", state=State.CREATED)
    with leases.taken(stale) as held:
        assert held is not None
        held.remove()
    claim = theirs.claim(BASE, "mr-1")
    assert claim is not None and claim[0] is not None and claim[0].entry == mine.key


@pytest.mark.parametrize(
    ("lease", "why"),
    [
        ('{"holder": "x", "seconds": "30"}', "lease.seconds: input should be a valid number"),
        ('{"holder": "x", "seconds": [30]}', "lease.seconds: input should be a valid number"),
        ('{"holder": "x", "seconds": 1e12}', "lease.seconds: input should be less than or equal to 3600"),
        ('{"holder": "x", "seconds": 1e8}', "lease.seconds: input should be less than or equal to 3600"),
        ('{"holder": "x", "seconds": 30, "beat": "1"}', "lease.beat: input should be a valid integer"),
        ('{"holder": "x", "seconds": NaN}', "it is not JSON (NaN is not a JSON number)"),
        ('{"holder": "x", "seconds": Infinity}', "it is not JSON (Infinity is not a JSON number)"),
    ],
)
def test_a_planted_or_corrupt_lease_is_skipped_naming_the_entry_and_blocks_nothing(lease, why, capsys):
    good = left("model resource", BASE, BODY, OWNER, ident="mr-good")
    data = json.loads(good.journal.store.read(good.key).data)
    raw = json.dumps({**data, "id": "mr-planted", "lease": "LEASE"}).replace('"LEASE"', lease)
    key = journal.Journal.entry_key(request_key("model resource", BASE, BODY), "planted")
    good.journal.store.create(key, raw.encode())

    found = journal.interrupted(
        journal.current(), Declaration.of("model resource", BASE, BODY, OWNER, good.entry.backend)
    )

    assert [s.entry.id for s in found] == ["mr-good"]
    err = capsys.readouterr().err
    assert (
        f"skipped the create journal entry {good.journal.store.where(key)}: it cannot be read ({why}" in err
    )


def test_a_store_time_in_the_future_is_no_write_of_now(capsys):
    """An entry whose store time (a folder's mtime) is in 2099 would hold its declaration up for as long: it is
    skipped, named."""
    good = left("model resource", BASE, BODY, OWNER, ident="mr-good")
    path = journal.directory() / good.key
    moment = datetime(2099, 1, 1, tzinfo=timezone.utc).timestamp()
    os.utime(path, (moment, moment))
    where = Journal(journal.current().store, None, legacy=True)
    where.probe()
    assert where.entries() == []
    assert "which is in the future" in capsys.readouterr().err


def test_the_longest_wait_for_a_lease_is_a_few_of_the_readers_own(monkeypatch):
    """A lease of an hour (the most a writer may set) still live: a create waits three of its own leases for it,
    not an hour, and then refuses (what it still sees live is a run at work)."""
    monkeypatch.setenv(journal.ENV_LEASE, "1")
    held = begun("model resource", BASE, BODY, OWNER, ident="mr-1")
    held.entry = held.entry.model_copy(
        update={"lease": held.entry.lease.model_copy(update={"seconds": 3600.0})}
    )
    held.write()  # written with a lease of an hour
    said: list[float] = []
    try:
        still = journal.outlast(
            lambda: [s for s in journal.current().entries() if s.live()], lambda wait, seen: said.append(wait)
        )
    finally:
        held.release()
    assert still and said and said[0] <= journal.WAIT_LEASES * 1.0


@pytest.mark.parametrize("lease", ["1", "30", "600"])
def test_a_lease_is_renewed_often_enough_that_one_failed_renewal_never_loses_it(lease, monkeypatch):
    """Renewals come at least three times per lease: after one that could not reach the store, the next still lands
    well inside the lease (test_one_renewal_that_cannot_reach_the_store_keeps_the_lease: the holder keeps it)."""
    monkeypatch.setenv(journal.ENV_LEASE, lease)
    assert journal.renew_every() <= journal.lease_seconds() / 3
