"""Holding an entry under its lease: the only code that writes the create journal.

A process writes an entry only while it holds the entry's lease (:class:`Holding`): it wrote the entry
(:meth:`Holding.begin`, create-if-absent) or took it over once its lease ran out (:meth:`Holding.take`, a
compare-and-swap of the version it read). Every later write is a compare-and-swap of the version it last wrote,
so a holder whose lease was taken over meanwhile (paused past it, cut off from the store) finds out at its next
write: it is *lost* (:class:`LeaseLost`), and writes, records, marks done and stops nothing from then on. A
renewal (:func:`renew_every` seconds, a thread per process) is such a write with nothing else changed; one that
cannot reach the store keeps the lease and tries again at the next beat.

Claims (:meth:`Holding.bind`) are written by the holder of the entry that records the id, after the id is in
the entry: see the write order in :mod:`pulumi_together_rl.ownership`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from .journal import Journal, Seen, Unreachable, lease_seconds, renew_every
from .records import Claim, Entry, Lease, Process, State, dump, engine_process, parse_claim
from .stores import Hold, StoreError


class LeaseLost(Exception):
    """This process's lease on an entry was taken over (its compare-and-swap failed): it may act no more."""


class Taken(Exception):
    """An id's claim names another entry that records it: another declaration recorded it first."""

    def __init__(self, ident: str, claim: Claim) -> None:
        self.ident = ident
        self.claim = claim
        super().__init__(f"{ident} is claimed by {claim.owner or 'another create'}")


_engine: list[Process] = []
_engine_lock = threading.Lock()


def _this_engine() -> Process:
    with _engine_lock:
        if not _engine:
            _engine.append(engine_process())
        return _engine[0]


def _new_lease(beat: int = 0) -> Lease:
    return Lease(holder=uuid.uuid4().hex, seconds=lease_seconds(), beat=beat)


class Holding:
    """An entry this process holds the lease of, and the version it last wrote."""

    def __init__(self, journal: Journal, key: str, entry: Entry, version: str, hold: Hold) -> None:
        self.journal = journal
        self.key = key
        self.entry = entry
        self.version = version
        self._hold = hold  # the store's proof that this process is alive and holds it, where it has one
        self.lost = False
        """Its lease was taken over: it may act on the entry no more."""
        self.unrecorded: str | None = None
        """An id this process learnt that the entry could not record (its store failed)."""
        self._writing = threading.Lock()

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1].removesuffix(".json")

    @property
    def where(self) -> str:
        return self.journal.store.where(self.key)

    # ------------------------------------------------------------------------------------ taking it

    @classmethod
    def begin(cls, journal: Journal, entry: Entry) -> Holding:
        """Write a new entry, held by this process (create-if-absent). Raises :class:`Unreachable`."""
        entry = entry.model_copy(
            update={"lease": _new_lease(), "process": Process.this(), "engine": _this_engine()}
        )
        key = journal.entry_key(entry.request_key, uuid.uuid4().hex)
        try:
            hold = journal.store.hold(key)  # first: a reader never sees the entry without its holder's proof
            if hold is None:
                raise StoreError(journal.store.location, f"the new entry {key} was held already")
            try:
                version = journal.store.create(key, dump(entry))
            except BaseException:
                hold.release()
                raise
        except StoreError as exc:
            raise Unreachable(exc) from exc
        if version is None:
            hold.release()
            raise Unreachable(StoreError(journal.store.location, f"the new entry {key} already existed"))
        held = cls(journal, key, entry, version, hold)
        _hold(held)
        return held

    @classmethod
    def take(cls, seen: Seen) -> Holding | None:
        """Take over the entry ``seen`` once its lease ran out (or was released), by compare-and-swap of the
        version read: None when it is live, changed since it was read, or another taker won. Raises
        :class:`Unreachable`."""
        with _held_lock:
            mine = _held.get(seen.key)
        if mine is not None:
            return None  # this process holds it already (another of its creates)
        store = seen.journal.store
        if seen.live():  # judged before this process holds anything of it (its own hold would count)
            return None
        try:
            hold = store.hold(
                seen.key
            )  # of two takers, one gets it (a folder's flock); a bucket's proves nothing
        except StoreError as exc:
            raise Unreachable(exc) from exc
        if hold is None:
            return None
        beat = seen.entry.lease.beat + 1 if seen.entry.lease is not None else 0
        entry = seen.entry.model_copy(
            update={"lease": _new_lease(beat), "process": Process.this(), "engine": _this_engine()}
        )
        try:
            version = store.swap(seen.key, dump(entry), seen.version)
        except StoreError as exc:
            hold.release()
            raise Unreachable(exc) from exc
        except BaseException:
            hold.release()
            raise
        if version is None:
            hold.release()
            return None
        held = cls(seen.journal, seen.key, entry, version, hold)
        _hold(held)
        return held

    # ------------------------------------------------------------------------------------ writing it

    def write(self, release: bool = False, **changes: Any) -> None:
        """Write ``changes`` to the entry (and a new beat of the lease; ``release``: no holder any more) by
        compare-and-swap of the version last written. Raises :class:`LeaseLost` when it was taken over,
        :class:`Unreachable` when the store cannot be reached (the lease is kept: it runs out by itself if
        nothing reaches the store again)."""
        with self._writing:
            if self.lost:
                raise LeaseLost(self.key)
            lease = self.entry.lease or _new_lease()
            lease = lease.model_copy(
                update={"beat": lease.beat + 1, "holder": None if release else lease.holder}
            )
            entry = self.entry.model_copy(update={**changes, "lease": lease})
            try:
                version = self.journal.store.swap(self.key, dump(entry), self.version)
            except StoreError as exc:
                raise Unreachable(exc) from exc
            if version is None:
                self.lost = True
                _unhold(self)
                raise LeaseLost(self.key)
            self.entry, self.version = entry, version
        if release:
            _unhold(self)

    def renew(self) -> None:
        """The renewal thread's write: a store that cannot be reached now is tried again at the next beat."""
        with contextlib.suppress(Unreachable, LeaseLost):
            self.write()

    def still_held(self) -> bool:
        """Renew now and say whether the lease is still this process's: asked right before an act only its
        holder may do (stopping the object it made). Raises :class:`Unreachable` when the store cannot tell."""
        if self.lost:
            return False
        try:
            self.write()
        except LeaseLost:
            return False
        return True

    def release(self, note: str | None = None, **changes: Any) -> None:
        """The last write: what ``changes`` say, and no holder any more (the entry stays for whoever reads it
        next). Nothing when it was released already; :class:`LeaseLost` when it was lost (a renewal's swap failed
        meanwhile): whatever the release was to say is not this process's to say any more."""
        if self.lost:
            raise LeaseLost(self.key)
        if not self.held:
            return
        if note:
            changes["note"] = note
        self.write(release=True, **changes)

    def remove(self) -> None:
        """Remove the entry, and its id's claim when the claim names it: only once nothing it records can be
        billing (its object stopped, or nothing sent). Raises :class:`Unreachable`."""
        if self.lost:
            return
        store = self.journal.store
        try:
            ident = self.entry.id
            if ident:
                key = self.journal.claim_key(self.entry.base_url, ident)
                stored = store.read(key)
                if stored is not None and _names(stored.data, self.key):
                    store.remove(key)
            store.remove(self.key)
        except StoreError as exc:
            raise Unreachable(exc) from exc
        finally:
            _unhold(self)

    @property
    def held(self) -> bool:
        with _held_lock:
            return _held.get(self.key) is self

    # ------------------------------------------------------------------------------------ claims

    def bind(self, ident: str) -> None:
        """Claim ``ident`` for this entry, which records it already: created if absent; kept when it names this
        entry; taken (compare-and-swap) when it proves nothing (it names an entry that is gone or records another
        id: see :meth:`.journal.Journal.judge`). Raises :class:`Taken` when another entry that records the id
        claimed it first, :class:`Unreachable` when the store cannot be reached."""
        claim = Claim(entry=self.key, owner=self.entry.owner, kind=self.entry.kind)
        key = self.journal.claim_key(self.entry.base_url, ident)
        store = self.journal.store
        try:
            for _ in range(3):  # a claim removed or rewritten meanwhile: look again
                if store.create(key, dump(claim)) is not None:
                    return
                found = self.journal.claim(self.entry.base_url, ident)
                if found is None:
                    continue
                held, version = found
                if held is not None and held.entry == self.key:
                    return
                if held is not None:
                    named = self.journal.read(held.entry, warn=None)
                    if named is not None and named.entry.id == ident:
                        raise Taken(ident, held)
                if store.swap(key, dump(claim), version) is not None:
                    return
        except StoreError as exc:
            raise Unreachable(exc) from exc
        raise Unreachable(StoreError(store.location, f"the claim {key} kept changing while it was written"))


def _names(data: bytes, key: str) -> bool:
    try:
        return parse_claim(data).entry == key
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------- what this process holds

_held: dict[str, Holding] = {}
_held_lock = threading.Lock()
_renewer: list[threading.Thread] = []


def _hold(held: Holding) -> None:
    with _held_lock:
        _held[held.key] = held
        if not _renewer:
            thread = threading.Thread(target=_renew_forever, name="journal-lease", daemon=True)
            _renewer.append(thread)
            thread.start()


def _unregister(held: Holding) -> None:
    with _held_lock:
        if _held.get(held.key) is held:
            del _held[held.key]


def _unhold(held: Holding) -> None:
    _unregister(held)
    held._hold.release()


def holding() -> list[Holding]:
    """The entries this process holds now (its creates in flight)."""
    with _held_lock:
        return list(_held.values())


def forget(held: Holding) -> None:
    """Stop renewing ``held`` (its store cannot be written, and the process is about to exit): its lease runs out
    by itself, and the store's own proof of this process (a folder's flock) goes with the process."""
    _unregister(held)


def held_keys() -> frozenset[str]:
    """The keys of the entries this process holds."""
    with _held_lock:
        return frozenset(_held)


def _renew_forever() -> None:
    while True:
        time.sleep(renew_every())
        for held in holding():
            held.renew()


# ---------------------------------------------------------------------------------------- maintenance


PRUNE_EVERY = 60.0
"""Seconds between two prunings of one journal by one process (a create begins with one when it is due)."""

_pruned: dict[int, float] = {}


def prune(journal: Journal, request: str | None, *, ended_after: Any, forget_after: Any) -> None:
    """Remove the entries (of ``request``'s prefix: what its create reads anyway) whose last write is older, on
    the store's clock, than ``ended_after`` (done or dismissed) or ``forget_after`` (any other), and that no
    lease holds. Only a journal whose clock this process probed; at most once per :data:`PRUNE_EVERY`."""
    if not journal.probed:
        return
    now = time.monotonic()
    with _held_lock:
        last = _pruned.get(id(journal))
        if last is not None and now - last < PRUNE_EVERY:
            return
        _pruned[id(journal)] = now
    with contextlib.suppress(Unreachable):
        for seen in journal.entries(request=request, warn=None):
            limit = ended_after if seen.entry.state in (State.DONE, State.DISMISSED) else forget_after
            if seen.age() > limit:
                taken = Holding.take(seen)
                if taken is not None:
                    taken.remove()


@contextlib.contextmanager
def taken(seen: Seen) -> Iterator[Holding | None]:
    """``seen`` taken over for one act of the user's (``journal dismiss``, ``journal prune``, ``recover``),
    released afterwards if the act left it: None when a lease holds it."""
    held = Holding.take(seen)
    try:
        yield held
    finally:
        if held is not None and held.held:
            with contextlib.suppress(Unreachable, LeaseLost):
                held.release()
