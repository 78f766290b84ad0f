"""The create journal, as read: its entries and claims in one store, and their leases judged on the store's clock.

One journal is one :class:`~.stores.Store` (this machine's folder, a ``file://`` folder, a bucket: peers behind
one interface) laid out as

* ``entries/<request>/<name>.json``: one :class:`~.records.Entry` per create (``<request>``: 16 hex of its
  request key, so that a create lists only the entries of its own request);
* ``claims/<api>/<id>``: a :class:`~.records.Claim` binding an id to the one entry that recorded it;
* ``probes/``: the first-use check (:meth:`~.stores.Store.verify`), which also tells the store's clock.

This module only reads; every write is :mod:`.leases`' (the holder of an entry's lease is the only one who
writes it). Where the journal is: :func:`for_stack` (:mod:`.location`).

**Leases, judged here.** Where the store has its own proof of a live writer (a folder's ``flock``:
:meth:`~.stores.Store.holder_alive`), that decides. Elsewhere, an entry held by a running create carries a lease
``{holder, seconds, beat}`` that its holder renews every sixth of ``seconds``. A reader judges it by the store's clock of the entry's last write
(``Last-Modified``, a file's ``mtime``) against the store's now as this process learnt it from its probe
(:meth:`Journal.probe`): live while less than ``seconds`` + :data:`CLOCK_MARGIN` have passed. A reader that never
probed (``journal list``, the orphan finder) judges on its own clock with :data:`UNPROBED_SKEW` more: a lease is
only ever judged longer live, never shorter. And where the reader can prove its holder's process gone (the
same kernel and pid namespace, its pid ended: :meth:`.records.Process.running`), the lease is over at once.
A lease's length is validated (at most :data:`~.records.MAX_LEASE_SECONDS`), and nobody waits for one longer than
:data:`WAIT_LEASES` of their own lease: a lease still live then is a run at work, and is refused, not taken.

**Ages** are the store's too: an entry's age is the store's now minus the store's clock of its last write (a
runner whose clock is a month fast ages nothing). An entry whose store time is in the future (a planted
``mtime``) is malformed.

**Claims, judged here** (:meth:`Journal.judge`). A claim proves an id another declaration's only when the entry
it names exists and records that id; a claim naming this create's own entry proves the id this create's; a claim
naming an entry that is gone or records something else proves nothing either way: an object under it is never
excluded from a match and never taken by one (the match is ambiguous).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .. import backend
from ..backend import Backend
from ..messages import UserError, progress_line
from . import location
from .records import ENDED, Claim, Declaration, Entry, Malformed, State, parse_claim, parse_entry, stamp
from .stores import Store, StoreError, Unreadable, open_store
from .stores.folder import FolderStore

MAX_AGE = timedelta(hours=24)
"""Entries whose last write is older than this are never taken over; only the orphan finder reports them. 24 h is
the longest ``inactive_timeout``: a READY model resource an interrupted run left has stopped itself by then."""

FORGET_AFTER = timedelta(days=30)
"""Entries whose last write is older than this, and that no lease holds, are removed (their objects, if any, are
long reported)."""

LEASE_SECONDS = 30.0
"""How long a lease lives without renewal. A runner killed mid-create (SIGKILL, a deleted VM) blocks the next
create of its declaration for at most this long; a create paused for longer loses its entry. The writer's value
is recorded in the entry, and that is what every reader judges it by."""

ENV_LEASE = "TOGETHER_RL_LEASE_SECONDS"
"""Overrides :data:`LEASE_SECONDS` (tests use a few seconds; a store far away may want more)."""

CLOCK_MARGIN = 2.0
"""Seconds added to a lease before it counts as expired: the store's ``Last-Modified`` has one-second resolution
on S3, and this process's estimate of the store's clock is as good as one request's round trip."""

UNPROBED_SKEW = 120.0
"""Without a probe of the store's clock (a reader that writes nothing), a lease is judged on this machine's clock
with this much more margin: only ever longer live, never shorter."""

WAIT_LEASES = 3.0
"""The longest a create or ``recover`` waits for a live lease to run out, in its own lease lengths."""

FUTURE_TOLERANCE = 5.0
"""Seconds past the store's now (as probed) that an entry's store time may show: more is no write of now."""


def lease_seconds() -> float:
    """This process's lease length (:data:`ENV_LEASE`, else :data:`LEASE_SECONDS`)."""
    try:
        value = float(os.environ.get(ENV_LEASE) or LEASE_SECONDS)
    except ValueError:
        return LEASE_SECONDS
    return value if 1.0 <= value <= 3600.0 else LEASE_SECONDS


def renew_every() -> float:
    """Seconds between two renewals: six chances per lease, so a slow or failed request does not lose it."""
    return lease_seconds() / 6


class Refused(UserError):
    """The journal cannot be used, so no create may start: its object could be neither recorded nor proven.
    ``cause`` and ``todo`` are the two halves of the user's sentence (a create says it in its own words)."""

    def __init__(self, where: str, cause: str, todo: str) -> None:
        self.where = where
        super().__init__("using the create journal", "", None, cause, todo)


class Unreachable(Refused):
    """The journal's store cannot be used: unreachable, refused the credentials, not atomic, not trusted."""

    def __init__(self, exc: StoreError) -> None:
        self.reason = exc.cause
        """What the store answered (or that nothing did), in the store's words."""
        super().__init__(
            exc.location,
            f"the create journal at {location.printable(exc.location)} cannot be used: {exc.cause}",
            exc.todo
            or "Check that store and this machine's credentials for it (the ones the CLI uses for the stack's "
            f"state), or set {location.ENV_URL} to a store this machine can write (docs/journal.md)",
        )


class Verdict(str, enum.Enum):
    """What the journal proves of an id a lookup found (:meth:`Journal.judge`)."""

    THEIRS = "theirs"
    """Another entry records it (or a claim naming such an entry binds it): another declaration's proof."""
    OURS = "ours"
    """The asking create's own entry records it, or a claim names that entry."""
    DOUBTFUL = "doubtful"
    """A claim binds it to an entry that is gone or records something else: it proves nothing either way."""


@dataclasses.dataclass(frozen=True)
class Seen:
    """An entry as read: the record, its key, and the store's version and clock of its last write."""

    entry: Entry
    key: str
    version: str
    modified: datetime
    journal: Journal = dataclasses.field(compare=False, repr=False)

    @property
    def name(self) -> str:
        """What the user names it by (``journal dismiss NAME``)."""
        return Path(self.key).stem

    @property
    def where(self) -> str:
        """Where it is, for a sentence: its file, or its URL."""
        return self.journal.store.where(self.key)

    def age(self) -> timedelta:
        """Since its last write, on the store's clock."""
        return self.journal.now() - self.modified

    def left(self) -> float:
        """Seconds its lease has left (<= 0: not live)."""
        return self.journal.left(self)

    def live(self) -> bool:
        """Whether a running process (a create, a take-over; on any machine) holds it."""
        return self.journal.left(self) > 0


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    """The create journal in ``store`` (see the module docstring). One per store per process (:func:`at`):
    its clock and its cache of parsed entries are shared by every create."""

    def __init__(self, store: Store, url: str | None, *, legacy: bool = False) -> None:
        self.store = store
        self.url = url
        """Its URL; None: this machine's folder."""
        self._legacy = legacy  # entries of releases 0.2 to 0.4 lie at the folder's top level
        self._clock: tuple[datetime, float] | None = None  # the store's now at a monotonic time
        self._cache: dict[str, tuple[str, Entry]] = {}  # key -> (version, entry)
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        """Where it is, printable: its URL as the user wrote it (credentials left out), or its folder."""
        return location.printable(self.url) if self.url else self.store.location

    @property
    def shared(self) -> bool:
        """Named by a URL (a bucket or a ``file://`` folder that other machines may share)."""
        return self.url is not None

    # ------------------------------------------------------------------------------------ the store's clock

    def probe(self) -> None:
        """The store's first-use check (:meth:`~.stores.Store.verify`) and its clock, once per process: before
        the first write, and before any judgement that must not be two minutes too long (``recover``).
        Raises :class:`Unreachable`."""
        with self._lock:
            if self._clock is not None:
                return
        try:
            seen = self.store.verify()
        except StoreError as exc:
            raise Unreachable(exc) from exc
        with self._lock:
            self._clock = (seen, time.monotonic())

    @property
    def probed(self) -> bool:
        with self._lock:
            return self._clock is not None

    def now(self) -> datetime:
        """The store's clock now, as estimated from the probe (this machine's clock before any probe)."""
        with self._lock:
            clock = self._clock
        if clock is None:
            return datetime.now(timezone.utc)
        return clock[0] + timedelta(seconds=time.monotonic() - clock[1])

    def left(self, seen: Seen) -> float:
        """Seconds the lease of ``seen`` (as read) has left; <= 0: expired, released, or its process gone."""
        entry = seen.entry
        lease = entry.lease
        if lease is not None and lease.holder is None:
            return 0.0
        try:
            alive = self.store.holder_alive(seen.key)
        except StoreError:
            alive = None
        if alive is not None:  # the store's own proof (a folder's flock), in any pid namespace
            return (lease.seconds if lease is not None else LEASE_SECONDS) if alive else 0.0
        if entry.process is not None:
            running = entry.process.running()
            if running is False:
                return 0.0
            if running is True and lease is None:
                return LEASE_SECONDS  # an entry of 0.2-0.4 whose process still runs: it holds it
        seconds = lease.seconds if lease is not None else LEASE_SECONDS
        margin = CLOCK_MARGIN if self.probed else UNPROBED_SKEW
        return (seen.modified + timedelta(seconds=seconds + margin) - self.now()).total_seconds()

    # ------------------------------------------------------------------------------------ keys

    @staticmethod
    def entry_key(request: str, name: str) -> str:
        return f"entries/{request[:16]}/{name}.json"

    @staticmethod
    def claim_key(base_url: str, ident: str) -> str:
        return f"claims/{_short(base_url.rstrip('/'))}/{ident}"

    # ------------------------------------------------------------------------------------ entries

    def entries(
        self, request: str | None = None, warn: Callable[[str], None] | None = progress_line
    ) -> list[Seen]:
        """Every readable entry (of ``request``, a :func:`~.records.request_key`), oldest first (the store's
        clock). One that cannot be read is skipped with one line per process naming it (``warn``; None:
        silently). Raises :class:`Unreachable` when the store cannot be read."""
        prefix = f"entries/{request[:16]}/" if request else "entries/"
        try:
            listed = self.store.listing(prefix)
            if self._legacy:
                listed += [i for i in self.store.listing("", recursive=False) if i.key.endswith(".json")]
        except StoreError as exc:
            raise Unreachable(exc) from exc
        found: list[Seen] = []
        for item in listed:
            if not item.key.endswith(".json"):
                continue
            if item.refused:
                self._malformed(item.key, item.refused, warn)
                continue
            try:
                seen = self._seen(item.key, item.version, item.modified, item.data)
            except Malformed as exc:
                self._malformed(item.key, str(exc), warn)
                continue
            if seen is not None and (request is None or seen.entry.request_key == request):
                found.append(seen)
        return sorted(found, key=lambda s: (s.modified, s.key))

    def read(self, key: str, warn: Callable[[str], None] | None = progress_line) -> Seen | None:
        """The entry at ``key`` now; None when it is gone or cannot be read (said once, as :meth:`entries`)."""
        try:
            stored = self.store.read(key)
        except Unreadable as exc:
            self._malformed(key, exc.why, warn)
            return None
        except StoreError as exc:
            raise Unreachable(exc) from exc
        if stored is None:
            return None
        try:
            return self._seen(key, stored.version, stored.modified, stored.data)
        except Malformed as exc:
            self._malformed(key, str(exc), warn)
            return None

    def _seen(self, key: str, version: str, modified: datetime, data: bytes | None) -> Seen | None:
        """The entry at ``key`` of ``version``: from the cache when this process read that version before (a
        listing names it; nothing else is fetched), else read and parsed. Raises :class:`Malformed`."""
        tolerance = FUTURE_TOLERANCE if self.probed else UNPROBED_SKEW
        if (modified - self.now()).total_seconds() > tolerance:
            raise Malformed(
                f"the store says it was last written at {stamp(modified)}, which is in the future"
            )
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] == version:
            return Seen(cached[1], key, version, modified, self)
        if data is None:
            try:
                stored = self.store.read(key)
            except Unreadable as exc:
                raise Malformed(exc.why) from None
            except StoreError as exc:
                raise Unreachable(exc) from exc
            if stored is None:
                return None  # removed meanwhile
            data, version, modified = stored.data, stored.version, stored.modified
        entry = parse_entry(data)
        with self._lock:
            self._cache[key] = (version, entry)
        return Seen(entry, key, version, modified, self)

    def _malformed(self, key: str, why: str, warn: Callable[[str], None] | None) -> None:
        if warn is None:
            return
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        warn(
            f"warning: skipped the create journal entry {self.store.where(key)}: it cannot be read ({why}). "
            "Remove it if no create is running"
        )

    # ------------------------------------------------------------------------------------ claims

    def claim(self, base_url: str, ident: str) -> tuple[Claim | None, str] | None:
        """The claim of ``ident`` at ``base_url`` and its version (the claim None when it cannot be read: it
        proves nothing); None when there is none."""
        key = self.claim_key(base_url, ident)
        try:
            stored = self.store.read(key)
        except Unreadable:
            return None, ""
        except StoreError as exc:
            raise Unreachable(exc) from exc
        if stored is None:
            return None
        try:
            return parse_claim(stored.data), stored.version
        except Malformed:
            return None, stored.version

    def judge(
        self, base_url: str, ids: Iterable[str], among: Sequence[Seen], mine: str | None
    ) -> dict[str, Verdict]:
        """What the journal proves of each of ``ids`` (ids it proves nothing of are left out). ``among``: the
        entries already read (those of the asking create's request); ``mine``: the key of the asking create's
        own entry, if any. See the module docstring for the rules."""
        recorded = {s.entry.id: s.key for s in among if s.entry.id}
        verdicts: dict[str, Verdict] = {}
        for ident in ids:
            if ident in recorded:
                verdicts[ident] = Verdict.OURS if recorded[ident] == mine else Verdict.THEIRS
                continue
            found = self.claim(base_url, ident)
            if found is None:
                continue
            claim = found[0]
            if claim is None:
                verdicts[ident] = Verdict.DOUBTFUL
            elif claim.entry == mine:
                verdicts[ident] = Verdict.OURS
            else:
                named = self.read(claim.entry, warn=None)
                proven = named is not None and named.entry.id == ident
                verdicts[ident] = Verdict.THEIRS if proven else Verdict.DOUBTFUL
        return verdicts


# ---------------------------------------------------------------------------------------- where it is


_journals: dict[str, Journal] = {}
_journals_lock = threading.Lock()


def directory() -> Path:
    """This machine's journal folder: ``$TOGETHER_RL_STATE_DIR/journal``, by default
    ``${XDG_STATE_HOME:-~/.local/state}/pulumi-together-rl/journal``."""
    root = os.environ.get("TOGETHER_RL_STATE_DIR")
    if not root:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        root = os.path.join(base, "pulumi-together-rl")
    return Path(root) / "journal"


def at(url: str | None) -> Journal:
    """The journal at ``url`` (None: this machine's folder), one per process. Raises :class:`Unreachable` for a
    URL that names no store."""
    folder = directory()
    name = url or f"folder:{folder}"
    with _journals_lock:
        journal = _journals.get(name)
        if journal is not None:
            return journal
    if url is None:
        store: Store = FolderStore(folder, instead="or point TOGETHER_RL_STATE_DIR at a folder of your own")
    else:
        try:
            store = open_store(url)
        except StoreError as exc:
            raise Unreachable(exc) from exc
        except ImportError as exc:  # the bucket extra is not installed
            raise Unreachable(
                StoreError(
                    location.printable(url),
                    f"reaching it needs the `obstore` package, which is not installed ({exc})",
                    "Install the provider with its bucket extra (`pulumi-together-rl[bucket]`), or set "
                    f"{location.ENV_URL} to a folder (docs/journal.md)",
                )
            ) from exc
    journal = Journal(store, url, legacy=url is None)
    with _journals_lock:
        return _journals.setdefault(name, journal)


def forget(journal: Journal) -> None:
    """Drop ``journal`` (its store could not be used): the next create builds it again, with the credentials
    and settings of then."""
    with _journals_lock:
        for name, known in list(_journals.items()):
            if known is journal:
                del _journals[name]


def for_stack(stack_backend: Backend | None = None) -> Journal:
    """The journal a create of a stack in ``stack_backend`` (default: this command's) uses (:mod:`.location`),
    said once per process."""
    place = location.locate(stack_backend or backend.locate())
    location.announce(place)
    return at(place.url)


def current() -> Journal:
    """The journal this process's creates use."""
    return at(location.locate().url)


# ---------------------------------------------------------------------------------------- what a create reads


def interrupted(journal: Journal, declared: Declaration, *, held: frozenset[str] = frozenset()) -> list[Seen]:
    """Unfinished entries of the declaration ``declared`` that no lease holds (but the ``held`` keys this process
    holds), younger than :data:`MAX_AGE`, oldest first: what its create may take over. None without an owner:
    then nothing proves whose anything is.

    A ``done`` entry is never one: its create reached its engine (the state holds the object, or the user removed
    it from there on purpose). It stays a claim, and the orphan finder's label."""
    return [s for s in _of_declaration(journal, declared) if s.key not in held and not s.live()]


def live_leases(journal: Journal, declared: Declaration, *, held: frozenset[str] = frozenset()) -> list[Seen]:
    """Unfinished entries of the declaration ``declared`` whose lease is live and that this process does not
    hold: a create of it on another machine (or another process), at work or killed a moment ago."""
    return [s for s in _of_declaration(journal, declared) if s.key not in held and s.live()]


def _of_declaration(journal: Journal, declared: Declaration) -> list[Seen]:
    if not declared.owner:
        return []
    return [
        s
        for s in journal.entries(request=declared.request)
        if s.entry.version >= 3  # 2 did not record the stack's backend: :func:`unattributed`
        and s.entry.state not in ENDED
        and s.entry.key == declared.key
        and s.age() < MAX_AGE
    ]


def unattributed(journal: Journal, declared: Declaration) -> list[Seen]:
    """Unfinished entries of the declaration's owner, kind, API and request written by a release that did not
    record the stack's backend (version 2), that no lease holds, younger than :data:`MAX_AGE`: they may be this
    declaration's or that of a stack of the same names in another backend, so only the user can say."""
    if not declared.owner:
        return []
    return [
        s
        for s in journal.entries(request=declared.request)
        if s.entry.version == 2
        and s.entry.state not in ENDED
        and s.entry.owner == declared.owner
        and s.age() < MAX_AGE
        and not s.live()
    ]


def rivals(
    among: Sequence[Seen], exclude: AbstractSet[str], post_bound: float | None = None
) -> list[tuple[tuple[datetime, datetime], float | None]]:
    """The windows of the other creates of the same request (any declaration) that have no id, among the entries
    read (``exclude``: keys this process holds: its own creates are told apart by its claims and gate). What they
    POSTed could look exactly like what the asking create's POST made."""
    found = []
    for seen in among:
        if seen.key in exclude or seen.entry.id:
            continue
        window = seen.entry.window() if post_bound is None else seen.entry.window(post_bound)
        if window is not None:
            found.append((window, seen.entry.clock_offset))
    return found


def outlast(live: Callable[[], list[Seen]], said: Callable[[float, list[Seen]], None]) -> list[Seen]:
    """Wait for the live leases ``live()`` gives (read again every few seconds) to end or run out: at most as long
    as the longest of them has left when first read, and never more than :data:`WAIT_LEASES` of this process's
    own lease (``said(seconds, seen)`` first, for the user). Those still live then (their run renews them: it is
    at work, or its lease is longer than anyone should wait) are returned, else []."""
    found = live()
    wait = min(max((s.left() for s in found), default=0.0), WAIT_LEASES * lease_seconds())
    if not found or wait <= 0:
        return found
    said(wait, found)
    deadline = time.monotonic() + wait + 1.0
    while found and time.monotonic() < deadline:
        time.sleep(min(2.0, max(0.2, deadline - time.monotonic())))
        found = live()
    return found


def printable_state(seen: Seen) -> str:
    """One line for people: name, kind, state, id, who."""
    entry = seen.entry
    return f"{seen.name}: {entry.kind} {entry.state.value}, id {entry.id or '-'}, {entry.describe()}"


__all__ = [
    "ENDED",
    "FORGET_AFTER",
    "MAX_AGE",
    "Journal",
    "Refused",
    "Seen",
    "State",
    "Unreachable",
    "Verdict",
    "at",
    "current",
    "directory",
    "for_stack",
    "interrupted",
    "lease_seconds",
    "live_leases",
    "outlast",
    "rivals",
]
