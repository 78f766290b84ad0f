"""The create journal in a store shared by machines (a bucket beside the stack's state, or a ``file://`` folder
on a shared mount): the same entries as the local folder, with a lease for liveness and a claim per id.

**Leases.** Across machines there is no ``flock`` and no process to look at. An entry held by a running create
carries a lease (``lease: {holder, seconds, beat}``): the create rewrites it every :func:`renew_every` seconds
by compare-and-swap (``beat`` changes every time, so that the version does). It is live while the store's clock
of its last write (``Last-Modified``, a folder's ``mtime``) is less than ``seconds`` (+ :data:`CLOCK_MARGIN`) in
the past, measured on the store's clock as this process estimates it from its own write at first use (no
machine's clock is compared with another's). An entry released on purpose (its create ended, or its engine was
gone) has no holder.

* **Taking an entry over** is a compare-and-swap of the version read when its lease was seen expired: of two
  takers one wins; a holder that renews meanwhile makes every taker fail.
* **A straggler** (a create paused by SIGSTOP, a partitioned runner) whose compare-and-swap fails has lost the
  entry: every write of it fails from then on (:class:`LeaseLost`), so it never marks done, never records an
  id in the entry, and (:meth:`SharedJournal.still_held`) never stops an object. An id it learns after losing
  is written to an entry of its own, so that it is never lost.
* **A claim** (``claims/<API>/<id>``) binds an id to one entry, created if absent when the id is recorded: two
  declarations on two machines can never record one id. It goes with the entry.

Keys: ``entries/<request>/<name>.json`` (``request``: 16 hex of the request key, so that a create lists only
the entries of its own request), ``claims/<api>/<id>`` and ``probes/`` (the first-use check of the store).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from . import stores
from .stores import Store, StoreError

if TYPE_CHECKING:
    from .journal import Entry

LEASE_SECONDS = 30.0
"""How long a lease lives without renewal. A runner killed mid-create (SIGKILL, a deleted VM) blocks the next
create of its declaration for at most this long; a create paused for longer loses its entry. The writer's value
is recorded in the entry, and that is what every reader judges it by."""

ENV_LEASE = "TOGETHER_RL_LEASE_SECONDS"
"""Overrides :data:`LEASE_SECONDS` (tests use a few seconds; a store far away may want more)."""


def lease_seconds() -> float:
    try:
        value = float(os.environ.get(ENV_LEASE) or LEASE_SECONDS)
    except ValueError:
        return LEASE_SECONDS
    return value if value >= 1.0 else LEASE_SECONDS


def renew_every() -> float:
    """Seconds between two renewals: six chances per lease, so a slow or failed request does not lose it."""
    return lease_seconds() / 6


CLOCK_MARGIN = 2.0
"""Seconds added to a lease before it counts as expired: the store's ``Last-Modified`` has one-second resolution
on S3, and this process's estimate of the store's clock is as good as one request's round trip."""

UNPROBED_SKEW = 120.0
"""Without a probe of the store's clock (a reader that writes nothing: ``journal list``, the orphan finder), a
lease is judged on this machine's clock with this much more margin: only ever longer live, never shorter."""


class LeaseLost(Exception):
    """This process's lease on an entry was taken over (its compare-and-swap failed): it may act no more."""


class Taken(Exception):
    """An id's claim names another entry: another declaration (on another machine, perhaps) recorded it first."""

    def __init__(self, ident: str, claim: dict[str, Any]) -> None:
        self.ident = ident
        self.claim = claim
        super().__init__(f"{ident} is claimed by {claim.get('owner') or 'another create'}")


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class SharedJournal:
    """The journal at ``url`` (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.store: Store = stores.open_store(url)
        self.location = self.store.location
        self._clock: tuple[datetime, float] | None = None  # the store's now at a monotonic time
        self._cache: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (version, parsed JSON)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ the store's clock

    def verify(self) -> None:
        """Refuse a store whose create-if-absent is not atomic (:class:`StoreError`), and learn its clock: once
        per process, before the first create writes."""
        with self._lock:
            if self._clock is not None:
                return
        seen = self.store.verify()
        with self._lock:
            self._clock = (seen, time.monotonic())

    def now(self) -> datetime:
        """The store's clock now, as estimated from the probe (this machine's clock before any probe)."""
        with self._lock:
            clock = self._clock
        if clock is None:
            return datetime.now(timezone.utc)
        return clock[0] + timedelta(seconds=time.monotonic() - clock[1])

    def expires_in(self, entry: Entry) -> float:
        """Seconds until the lease of ``entry`` (as last read) expires; <= 0: expired or released."""
        lease = entry.lease or {}
        if not lease.get("holder") or entry.modified is None:
            return 0.0
        seconds = float(lease.get("seconds") or LEASE_SECONDS)
        margin = CLOCK_MARGIN if self._clock is not None else UNPROBED_SKEW
        return (entry.modified + timedelta(seconds=seconds + margin) - self.now()).total_seconds()

    # ------------------------------------------------------------------------------------ entries

    def key(self, request_key: str, name: str) -> str:
        return f"entries/{request_key[:16]}/{name}.json"

    def where(self, entry: Entry) -> str:
        return f"{self.location.split('?', 1)[0]}/{entry.path.as_posix()}"

    def _body(self, entry: Entry) -> bytes:
        data = entry.to_json()
        data["lease"] = entry.lease
        return json.dumps(data).encode()

    def create(self, entry: Entry) -> None:
        """Write a new entry, held by this process (its intent)."""
        entry.lease = {"holder": uuid.uuid4().hex, "seconds": lease_seconds(), "beat": 0}
        version = self.store.create(entry.path.as_posix(), self._body(entry))
        if version is None:
            raise StoreError(self.location, f"the new entry {entry.path.as_posix()} already existed")
        entry.version_seen = version
        _hold(entry)

    def write(self, entry: Entry, release: bool = False) -> None:
        """Write what ``entry`` records, by compare-and-swap of the version this process last wrote; with
        ``release``, its lease goes with the write. Raises :class:`LeaseLost` when it was taken over."""
        with entry.writing:
            if entry.lost:
                raise LeaseLost(entry.path.as_posix())
            lease = dict(entry.lease or {})
            lease["beat"] = int(lease.get("beat") or 0) + 1
            if release:
                lease["holder"] = None
            if not self._swap(entry, lease):
                entry.lost = True
                raise LeaseLost(entry.path.as_posix())
        if release:
            _unhold(entry)

    def _swap(self, entry: Entry, lease: dict[str, Any]) -> bool:
        """Write ``entry`` with ``lease`` over the version last seen: False (and nothing changed in ``entry``)
        when the store holds another version; :class:`StoreError` when it cannot be reached."""
        before = entry.lease
        entry.lease = lease
        try:
            version = self.store.swap(entry.path.as_posix(), self._body(entry), entry.version_seen or "")
        except BaseException:
            entry.lease = before
            raise
        if version is None:
            entry.lease = before
            return False
        entry.version_seen = version
        return True

    def renew(self, entry: Entry) -> None:
        """Renew the lease (the renewal thread): a failure to reach the store is retried at the next beat."""
        with contextlib.suppress(StoreError, LeaseLost):
            self.write(entry)

    def still_held(self, entry: Entry) -> bool:
        """Renew now and say whether the lease is still this process's: asked right before an act that only
        the holder may do (stopping the object it made). :class:`StoreError` when the store cannot be reached to
        tell: the act waits for a run that can."""
        if entry.lost:
            return False
        try:
            self.write(entry)
        except LeaseLost:
            return False
        return True

    def claim(self, entry: Entry) -> bool:
        """Take over an entry whose lease expired or was released, by compare-and-swap: False when it is live,
        changed since it was read, or another taker won."""
        if entry.held():
            return True
        if self.expires_in(entry) > 0:
            return False
        lease = {
            "holder": uuid.uuid4().hex,
            "seconds": lease_seconds(),
            "beat": int((entry.lease or {}).get("beat") or 0) + 1,
        }
        if not self._swap(entry, lease):
            return False
        entry.lost = False
        _hold(entry)
        return True

    def live(self, entry: Entry) -> bool:
        return entry.held() or self.expires_in(entry) > 0

    def remove(self, entry: Entry) -> None:
        """Remove the entry (and its id's claim, when it is the entry's): only its holder, or the user's word."""
        if entry.id:
            claim = self.store.read(self._claim_key(entry.base_url, entry.id))
            if claim is not None and _parsed(claim.data).get("entry") == entry.path.as_posix():
                self.store.remove(self._claim_key(entry.base_url, entry.id))
        self.store.remove(entry.path.as_posix())
        _unhold(entry)

    def entries(
        self, parse: Callable[[str, dict[str, Any]], Entry], request_key: str | None = None,
        warn: Callable[[str, str], None] | None = None,
    ) -> list[Entry]:  # fmt: skip
        """Every entry (of ``request_key``'s request), read through a cache of the versions already parsed:
        a listing, and a read only of what changed since this process last read it."""
        prefix = f"entries/{request_key[:16]}/" if request_key else "entries/"
        found: list[Entry] = []
        for item in self.store.listing(prefix):
            if not item.key.endswith(".json"):
                continue
            with self._lock:
                cached = self._cache.get(item.key)
            if cached is not None and cached[0] == item.version:
                data, version = cached[1], item.version
            else:
                if item.size > MAX_ENTRY_BYTES:
                    if warn:
                        warn(item.key, f"it is {item.size} bytes, more than any entry this provider writes")
                    continue
                stored = self.store.read(item.key)
                if stored is None:
                    continue  # removed meanwhile
                try:
                    data = _parsed(stored.data)
                except ValueError as exc:
                    if warn:
                        warn(item.key, str(exc))
                    continue
                version = stored.version
                with self._lock:
                    self._cache[item.key] = (version, data)
            try:
                entry = parse(item.key, data)
            except (ValueError, TypeError, KeyError) as exc:
                if warn:
                    warn(item.key, str(exc) or type(exc).__name__)
                continue
            entry.shared = self
            entry.version_seen = version
            entry.modified = item.modified
            lease = data.get("lease")
            entry.lease = lease if isinstance(lease, dict) else None
            found.append(entry)
        return found

    # ------------------------------------------------------------------------------------ claims

    def _claim_key(self, base_url: str, ident: str) -> str:
        return f"claims/{_short(base_url.rstrip('/'))}/{ident}"

    def bind(self, entry: Entry, ident: str, taken_from: Entry | None = None) -> None:
        """Claim ``ident`` for ``entry``: created if absent; an existing claim of the same entry is kept, one of
        ``taken_from`` (an entry this process holds, whose object ``entry`` takes over) is moved to it by
        compare-and-swap. Raises :class:`Taken` when another entry claimed it first."""
        claim = json.dumps(
            {"entry": entry.path.as_posix(), "owner": entry.owner, "kind": entry.kind}
        ).encode()
        key = self._claim_key(entry.base_url, ident)
        if self.store.create(key, claim) is not None:
            return
        existing = self.store.read(key)
        held = _parsed(existing.data) if existing is not None else {}
        if held.get("entry") == entry.path.as_posix():
            return
        if (
            existing is not None
            and taken_from is not None
            and taken_from.held()
            and held.get("entry") == taken_from.path.as_posix()
            and self.store.swap(key, claim, existing.version) is not None
        ):
            return
        raise Taken(ident, held)

    def claimed(self, base_url: str) -> set[str]:
        """Every id some entry claims at this API."""
        prefix = f"claims/{_short(base_url.rstrip('/'))}/"
        return {item.key[len(prefix) :] for item in self.store.listing(prefix)}


MAX_ENTRY_BYTES = 1 << 20


def _parsed(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_ENTRY_BYTES:
        raise ValueError(f"it is more than {MAX_ENTRY_BYTES} bytes, more than any entry this provider writes")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"it is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


# ---------------------------------------------------------------------------------------- renewal

_held: dict[int, Entry] = {}
_held_lock = threading.Lock()
_renewer: list[threading.Thread] = []


def _hold(entry: Entry) -> None:
    with _held_lock:
        _held[id(entry)] = entry
        if not _renewer:
            thread = threading.Thread(target=_renew_forever, name="journal-lease", daemon=True)
            _renewer.append(thread)
            thread.start()


def _unhold(entry: Entry) -> None:
    with _held_lock:
        _held.pop(id(entry), None)


def held(entry: Entry) -> bool:
    with _held_lock:
        return id(entry) in _held


def holding() -> list[Entry]:
    """The shared entries this process holds (its creates in flight)."""
    with _held_lock:
        return list(_held.values())


def _renew_forever() -> None:
    while True:
        time.sleep(renew_every())
        with _held_lock:
            holding = list(_held.values())
        for entry in holding:
            if entry.shared is not None and not entry.lost:
                entry.shared.renew(entry)


_journals: dict[str, SharedJournal] = {}
_journals_lock = threading.Lock()


def at(url: str) -> SharedJournal:
    """The journal at ``url``, one per process (its cache and its clock are shared by every create)."""
    with _journals_lock:
        journal = _journals.get(url)
        if journal is None:
            journal = _journals[url] = SharedJournal(url)
        return journal


def forget(url: str) -> None:
    """Drop the journal at ``url`` (its store could not be used): the next create builds it again, with the
    credentials and settings of then."""
    with _journals_lock:
        _journals.pop(url, None)
