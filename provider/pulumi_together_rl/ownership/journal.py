"""The create journal: what an interrupted ``pulumi up`` made is taken over by the same declaration, never made
twice, and never taken from anyone else.

**The ownership rule.** The provider takes over, PATCHes or stops an existing object only when it holds proof
that the object is the one this declaration made. Proof is an id from the stack's state, an id from the API's
answer to this declaration's own POST (recorded here), or a match that is unique under strict conditions
(:mod:`pulumi_together_rl.client.reconcile`). Where the proof is missing or ambiguous it touches nothing, says
what it found and what the user can do. A team shares one Together account: look-alike objects made by other
stacks, colleagues and CI runs are the normal case, not the exception.

A create is a transaction the engine records only when the provider answers. Anything that kills the answer on
the way (Ctrl-C twice, SIGTERM of a CI job, SIGKILL of the CLI or of the plugin, a machine going down) would
leave an object billing that no state knows about. So every create writes an entry, one JSON file per create in
a per-user folder, holding:

* whose it is: the declaration (``owner``: project, stack and resource name, from the program), the kind, the
  API base URL and the request body;
* which process made it, in a form that survives pid reuse and pid namespaces (pid, start time, boot id, pid
  namespace, host), and the engine (the ``pulumi`` CLI) it served;
* the API's view before the POST: the ids of the candidate objects that already existed (``snapshot``), and
  when each POST was sent (``sends``) and answered: the POST's own time window;
* the id, as soon as the POST answers.

States: ``intent`` (written, nothing sent) -> ``posting`` (snapshot taken, POST sent or about to be) ->
``created`` (the id is known) -> ``done`` (the create answered its engine). A ``done`` entry stays as the
record that its id is claimed until it ages out, and is never taken over; an entry whose object was stopped is
removed. ``dismissed``: the user said (``python -m pulumi_together_rl journal dismiss``) that none of the
objects an ambiguous take-over found is its declaration's: it is never taken over, and it stays what it was to
everyone else (a rival whose POST may have made one of them), so that no other create takes them either.

**Liveness is a lock, not a pid.** The process making a create holds an exclusive ``flock`` on the entry's
``.lock`` file for as long as the create runs. The kernel drops it when the process dies, whatever the signal,
in a container (where every run is pid 1) or after pid reuse. An entry whose lock is free was left by a process
that is gone (or that released it on purpose: a provider whose engine died, :mod:`.lifeline`). Taking an entry
over is taking that lock (:meth:`Entry.claim`): two takers never both win, and an entry being taken over stays
on disk, visible to the next run, until its object is recorded elsewhere.

**What the next create of the same declaration does** (:func:`left_by_interrupted`, then the create transaction
in ``resources``): entries of the same owner, kind, base URL and request whose lock is free, younger than
:data:`MAX_AGE`. With an id, the object is asked for by id and taken over when still active. Without one, it is
looked for by a strict unique match inside that entry's snapshot and window; several candidates mean the create
touches nothing and says what it found. Older entries are left to the orphan finder.

What it cannot do: in this machine's folder, a CI runner that is thrown away loses it (a journal in a bucket
beside the stack's state, :mod:`.location` and :mod:`.shared`, is shared by every machine; the orphan finder,
``python -m pulumi_together_rl orphans``, looks from outside); an entry is read only by a create of the same
declaration and request; and a match without an id is a match, not a proof (see the reconciliation rules).
The folder is ``$TOGETHER_RL_STATE_DIR/journal``, by default
``${XDG_STATE_HOME:-~/.local/state}/pulumi-together-rl/journal``. No secret is written: a create's body holds
no key. ``docs/journal.md`` is the user's page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import fcntl
import hashlib
import json
import os
import socket
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .. import backend
from ..backend import Backend
from ..messages import UserError, progress_line
from . import location, shared
from .shared import LeaseLost, SharedJournal, Taken, lease_seconds
from .stores import StoreError

__all__ = ["LeaseLost", "Taken", "lease_seconds"]

VERSION = 3

MAX_AGE = timedelta(hours=24)
"""Entries older than this are never taken over; only the orphan finder reports them. 24 h is the longest
``inactive_timeout``: a READY model resource an interrupted run left has stopped itself by then."""

FORGET_AFTER = timedelta(days=30)
"""Entries older than this whose lock is free are removed (their objects, if any, are long reported)."""

POST_BOUND = 60.0
"""Seconds after its last send within which a POST whose process died mid-request can still have made its
object (the client's default read timeout: no answer comes later)."""


class State(str, enum.Enum):
    """Where a create stands, as its entry records it (the JSON holds the value)."""

    INTENT = "intent"
    """Written, nothing sent: removed when the create ends; left behind, it made nothing."""
    POSTING = "posting"
    """The snapshot taken, a POST sent or about to be: an object may exist that no id names."""
    CREATED = "created"
    """The id is known: the object exists under it."""
    DONE = "done"
    """The create answered its engine: the record that its id is claimed, never taken over."""
    DISMISSED = "dismissed"
    """The user said none of what its take-over found is the declaration's: never taken over, still a rival."""


ENDED = (State.DONE, State.DISMISSED)
"""States of a create that is over: never taken over."""

_lock = threading.Lock()
_warned: set[str] = set()
_holding: dict[int, Entry] = {}  # the entries this process holds the lock of, for the lifeline


class Refused(UserError):
    """The journal cannot be used, so no create may start: its object could be neither recorded nor proven.
    ``cause`` and ``todo`` are the two halves of the user's sentence (a create says it in its own words)."""

    def __init__(self, path: Path | str, cause: str, todo: str) -> None:
        self.path = path
        super().__init__("using the create journal", "", None, cause, todo)


class Unreachable(Refused):
    """The shared journal's store cannot be used (unreachable, refused the credentials, not atomic)."""

    def __init__(self, exc: StoreError) -> None:
        self.reason = exc.cause
        """What the store answered (or that nothing did), in the store's words."""
        super().__init__(
            exc.location,
            f"the create journal at {location.printable(exc.location)} cannot be used: {exc.cause}",
            "Check that store and this machine's credentials for it (the ones the CLI uses for the stack's "
            f"state), or set {location.ENV_URL} to a store this machine can write (docs/journal.md)",
        )


class Unwritable(Refused):
    """The journal folder (or an entry's lock) cannot be written."""

    def __init__(self, folder: Path, exc: OSError) -> None:
        super().__init__(
            folder,
            f"the create journal folder {folder} cannot be written ({exc.strerror or exc})",
            "Make it writable, or point TOGETHER_RL_STATE_DIR at a writable folder",
        )


class Untrusted(Refused):
    """The journal folder is not this user's alone: whoever else can write it could plant an entry that hands a
    create someone else's object, or remove the record that protects one."""

    def __init__(self, folder: Path, why: str) -> None:
        super().__init__(
            folder,
            f"the create journal folder {folder} {why}, so its entries cannot be trusted",
            f"Make it yours alone (`chown $(id -u) {folder} && chmod 700 {folder}`), or point "
            "TOGETHER_RL_STATE_DIR at a folder of your own",
        )


MAX_ENTRY_BYTES = 1 << 20
"""The largest entry file read (1 MiB): what this provider writes is a few kilobytes (a request body, a snapshot
of ids); anything larger was not written by it, and every create would read it again."""

MAX_DEPTH = 32
"""The deepest nesting read in an entry: a request body is a few levels deep."""


def trusted_folder(create: bool = False) -> Path:
    """:func:`directory`, checked: a folder of this user's that nobody else can write (created ``0700`` with
    ``create``; None of it is read or written otherwise). Raises :class:`Untrusted` or :class:`Unwritable`."""
    folder = directory()
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise Unwritable(folder, exc) from exc
    try:
        seen = os.stat(folder)
    except FileNotFoundError:
        return folder
    except OSError as exc:
        raise Unwritable(folder, exc) from exc
    why = _untrusted(seen, "folder")
    if why:
        raise Untrusted(folder, why)
    return folder


def _untrusted(seen: os.stat_result, what: str) -> str | None:
    """Why a file or folder as ``os.stat`` saw it is not this user's alone; None when it is."""
    if what == "folder" and not stat.S_ISDIR(seen.st_mode):
        return "is not a folder"
    if what == "file" and not stat.S_ISREG(seen.st_mode):
        return "is not a regular file"
    if seen.st_uid != os.geteuid():
        return f"belongs to another user (uid {seen.st_uid})"
    if seen.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by others (mode {stat.S_IMODE(seen.st_mode):04o})"
    return None


def directory() -> Path:
    """Where entries live (created on first write)."""
    root = os.environ.get("TOGETHER_RL_STATE_DIR")
    if not root:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        root = os.path.join(base, "pulumi-together-rl")
    return Path(root) / "journal"


def request_key(kind: str, base_url: str, body: dict[str, Any]) -> str:
    """The same create to the same API, whoever declares it."""
    text = json.dumps({"kind": kind, "base_url": base_url.rstrip("/"), "body": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def declaration_key(
    kind: str, base_url: str, body: dict[str, Any], owner: str | None, backend: str | None = None
) -> str:
    """The same create of the same declaration: the same request, owner and stack backend (``backend``: its
    :attr:`~.backend.Backend.identity`; stacks of the same names in two backends are two declarations)."""
    text = f"{request_key(kind, base_url, body)}\0{owner or ''}\0{backend or ''}"
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------------------ processes


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks since boot) of ``pid`` from /proc, or None when
    there is no such process or it has ended.

    A process that has ended but that its parent has not reaped yet (state ``Z``, a zombie; ``X``, dead) keeps
    its pid and start time until it is reaped: a ``pulumi`` killed by SIGKILL under a parent that never waits
    for it (a CI runner's supervisor, a shell script) would look alive for as long as that parent lives. It runs
    nothing and will answer nothing, so it counts as gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    name, rest = raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2 :].split()
    try:
        if rest[0] in ("Z", "X", "x"):
            return None
        return name, int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


@dataclasses.dataclass(frozen=True)
class Process:
    """A process, named so that pid reuse and pid namespaces cannot make another one look like it."""

    pid: int
    start: int | None
    """Start time in clock ticks since boot (``/proc/<pid>/stat``): a reused pid has another."""
    boot: str | None
    """The kernel's boot id: another boot, another process."""
    namespace: str | None
    """The pid namespace it was seen in (``pid:[4026531836]``): pid 1 of one container is not pid 1 of the next."""
    host: str

    @classmethod
    def of(cls, pid: int) -> Process:
        """``pid`` as this process sees it (in its own pid namespace)."""
        proc = _stat(pid)
        return cls(
            pid=pid,
            start=proc[2] if proc else None,
            boot=_read("/proc/sys/kernel/random/boot_id"),
            namespace=_pid_namespace(),
            host=socket.gethostname(),
        )

    @classmethod
    def this(cls) -> Process:
        return cls.of(os.getpid())

    def running(self) -> bool | None:
        """Whether it still runs: True, False, or None when this process cannot tell (another host, another
        pid namespace, no /proc)."""
        here = Process.of(os.getpid())
        if self.host != here.host:
            return None
        if self.boot and here.boot and self.boot != here.boot:
            return False  # the machine rebooted since
        if self.namespace != here.namespace or self.start is None or here.start is None:
            return None
        proc = _stat(self.pid)
        return proc is not None and proc[2] == self.start

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    @classmethod
    def from_json(cls, data: Any) -> Process:
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
            raise ValueError("process: expected an object with an integer pid")
        start = data.get("start")
        return cls(
            pid=data["pid"],
            start=start if isinstance(start, int) else None,
            boot=_str_or_none(data.get("boot")),
            namespace=_str_or_none(data.get("namespace")),
            host=str(data.get("host") or ""),
        )


def engine_process() -> Process:
    """The engine this provider serves: the nearest ancestor that is the ``pulumi`` CLI, else the parent.

    The CLI starts the plugin through a shell script that does not ``exec`` python, so the direct parent is
    that script, which outlives a killed CLI."""
    pid, seen = os.getppid(), 0
    while pid > 1 and seen < 16:
        proc = _stat(pid)
        if proc is None:
            break
        if proc[0] == "pulumi":
            return Process.of(pid)
        pid, seen = proc[1], seen + 1
    return Process.of(os.getppid())


# ------------------------------------------------------------------------------------------ entries


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def now_iso() -> str:
    """Now, as an entry's notes say it."""
    return _now().strftime("%Y-%m-%d %H:%M:%S UTC")


def _number_or_none(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 10**9
    return float(value) if ok else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _moment(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected an RFC 3339 time")
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class _NotALock(OSError):
    """A lock path that is not a regular file of this user's (a planted symbolic link, a FIFO, ...)."""


def _open_lock(path: Path, create: bool = True) -> int:
    """Open an entry's lock file without following a symbolic link (whoever planted one would have this user
    create or lock a file elsewhere), and only if it is a regular file of this user's that nobody else can
    write. Raises :class:`_NotALock` otherwise, ``FileNotFoundError`` when it is gone (``create`` false)."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _NotALock(errno.ELOOP, "a symbolic link") from exc
        raise
    why = _untrusted(os.fstat(fd), "file")
    if why:
        os.close(fd)
        raise _NotALock(errno.EPERM, why)
    return fd


@dataclasses.dataclass
class Entry:
    """One create in flight, interrupted, or done (a record that its id is claimed)."""

    path: Path
    kind: str
    base_url: str
    body: dict[str, Any]
    owner: str | None
    """The declaration: ``org/project/stack/name`` (None for entries of releases before 0.2, or direct calls)."""
    backend: str | None
    """The identity of the stack's backend (:mod:`.backend`), None for entries of releases that did not record
    it: part of the declaration, since stacks of the same names in two backends are two stacks."""
    backend_location: str | None
    """That backend's canonical location, for the people who read the entry (never a credential)."""
    started_at: datetime
    process: Process | None
    engine: Process | None
    state: State = State.INTENT
    snapshot: list[str] | None = None
    """Ids of the candidate objects that existed before the POST (None: not taken yet)."""
    sends: list[datetime] = dataclasses.field(default_factory=list)
    answered_at: datetime | None = None
    """When the last POST answered or failed (None while in flight, or when killed during it)."""
    clock_offset: float | None = None
    """Seconds the API's clock was ahead of the writer's when it posted (None: not measured): what maps its
    window onto the API's ``created_at``."""
    refused: bool = False
    """The API itself answered that the last POST failed: a look-alike is then never taken on a match alone."""
    id: str | None = None
    note: str | None = None
    """Why it was left (``the engine was gone``), for the next run and the orphan finder."""
    version: int = VERSION
    unrecorded: bool = dataclasses.field(default=False, repr=False, compare=False)
    """This process knows an id the file could not record (a full disk after the POST)."""
    _fd: int | None = dataclasses.field(default=None, repr=False, compare=False)
    shared: SharedJournal | None = dataclasses.field(default=None, repr=False, compare=False)
    """The shared journal the entry is in (:mod:`.shared`); None: the local folder."""
    lease: dict[str, Any] | None = dataclasses.field(default=None, repr=False, compare=False)
    """In a shared journal: ``{holder, seconds, beat}`` as last read or written (``holder`` None: released)."""
    version_seen: str | None = dataclasses.field(default=None, repr=False, compare=False)
    """In a shared journal: the store's version of the entry as this process last read or wrote it."""
    modified: datetime | None = dataclasses.field(default=None, repr=False, compare=False)
    """In a shared journal: the store's clock of its last write, as listed."""
    lost: bool = dataclasses.field(default=False, repr=False, compare=False)
    """In a shared journal: this process's lease was taken over; it may act on the entry no more."""
    writing: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    # -------------------------------------------------------------------------------- what it says

    @property
    def lock_path(self) -> Path:
        return self.path.with_suffix(".lock")

    @property
    def name(self) -> str:
        """What the user names it by (``journal dismiss NAME``)."""
        return self.path.stem

    @property
    def where(self) -> str:
        """Where it is, for a sentence: its file, or its URL in a shared journal."""
        return self.shared.where(self) if self.shared is not None else str(self.path)

    @property
    def request_key(self) -> str:
        return request_key(self.kind, self.base_url, self.body)

    @property
    def key(self) -> str:
        return declaration_key(self.kind, self.base_url, self.body, self.owner, self.backend)

    @property
    def started(self) -> datetime:
        return self.started_at

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or _now()) - self.started_at

    def window(self, post_bound: float = POST_BOUND) -> tuple[datetime, datetime] | None:
        """When its POSTs could have made an object: from the first send to the last answer (or, if it was
        killed during a POST, the last send plus ``post_bound`` seconds). None: nothing was sent."""
        if not self.sends:
            return None
        end = self.answered_at or (max(self.sends) + timedelta(seconds=post_bound))
        return min(self.sends), end

    def describe(self) -> str:
        who = self.owner or "an unknown declaration"
        if self.backend_location:
            who += f" in backend {self.backend_location}"
        by = f" by {self.process.describe()}" if self.process else ""
        return f"{who} ({self.started_at.strftime('%Y-%m-%d %H:%M:%S UTC')}{by})"

    # -------------------------------------------------------------------------------- what it records

    def posting(self, snapshot: Iterable[str], clock_offset: float | None = None) -> None:
        """Before the first POST: the ids the API already showed (none of them can be what it makes), and how
        far the API's clock is ahead of this machine's."""
        self.snapshot = sorted(set(snapshot))
        self.clock_offset = clock_offset
        self.state = State.POSTING
        self._write()

    def sending(self) -> None:
        """Just before each POST: the start of its window."""
        self.sends.append(_now())
        self.answered_at = None
        self._write()

    def answered(self, refused: bool = False) -> None:
        """The POST (and any reconciliation after it) ended without an id: its window is closed; ``refused``: the
        API itself answered that it failed. Never raises:
        an entry that cannot record it keeps the wider window (its last send plus :data:`POST_BOUND`), which
        only makes later lookups more careful, and the create's own error is what the user must read."""
        self.answered_at = _now()
        self.refused = refused
        with contextlib.suppress(Refused):
            self._write()

    def record(self, ident: str, taken_from: Entry | None = None) -> None:
        """The POST answered (or the object was taken over from ``taken_from``): the object exists under
        ``ident``. In a shared journal the id's claim is created first (:class:`Taken` when another entry holds
        it); an id learned after losing the lease goes to an entry of its own (then :class:`LeaseLost`)."""
        if self.shared is not None:
            if self.lost:
                self._keep_lost(ident)
            try:
                self.shared.bind(self, ident, taken_from)
            except StoreError as exc:
                raise Unreachable(exc) from exc
        self.id = ident
        self.state = State.CREATED
        if self.answered_at is None:
            self.answered_at = _now()
        try:
            self._write()
        except LeaseLost:
            self._keep_lost(ident)

    def _keep_lost(self, ident: str) -> None:
        """An id this process learned after its lease was taken over: recorded in an entry of its own (released:
        the next run, or the orphan finder, sees it), never in the entry it lost."""
        assert self.shared is not None
        kept = dataclasses.replace(
            self,
            path=Path(self.shared.key(self.request_key, uuid.uuid4().hex)),
            id=ident,
            state=State.CREATED,
            note=f"made by a create that lost its lease on entry {self.name} (paused past it) at {now_iso()}",
            lost=False,
            writing=threading.Lock(),
        )
        with contextlib.suppress(StoreError, LeaseLost, Taken):
            self.shared.create(kept)
            self.shared.bind(kept, ident)
            self.shared.write(kept, release=True)
        raise LeaseLost(self.path.as_posix())

    def claimed(self) -> set[str]:
        """Ids that other entries hold: another declaration's proof (for the create's own lookups)."""
        return claimed_ids(exclude=self)

    def rivals(self) -> list[tuple[tuple[datetime, datetime], float | None]]:
        """Windows of the other unanswered creates of the same request (for the create's own lookups)."""
        return rival_windows(self)

    def done(self) -> None:
        """The engine has the answer: keep the entry as the record that its id is claimed, and release it."""
        self.state = State.DONE
        self._finish()

    def dismiss(self) -> None:
        """The user's word: nothing this create may have made is the declaration's. Kept (a rival to others)."""
        self.state = State.DISMISSED
        self.note = f"dismissed at {now_iso()}: none of the objects its take-over found is this declaration's"
        self._finish()

    def leave(self, note: str | None = None) -> None:
        """Keep it for the next run (an object may be left) and release it: one write (a cancel's first act)."""
        if note:
            self.note = note
        if note or self.shared is not None:
            self._finish()
        else:
            self.release()

    def _finish(self) -> None:
        """Write what it says and release it, in one write in a shared journal (its lease goes with it)."""
        if self.shared is not None:
            try:
                self.shared.write(self, release=True)
            except StoreError as exc:
                shared._unhold(self)  # the lease runs out by itself
                raise Unreachable(exc) from exc
            return
        self._write()
        self.release()

    def still_held(self) -> bool:
        """Whether this process still holds it, asked right before an act only its holder may do (stopping
        the object it made): renewed now in a shared journal; a local lock cannot be lost. Raises
        :class:`Unreachable` when the shared journal cannot be reached to tell."""
        if self.shared is not None:
            try:
                return self.shared.still_held(self)
            except StoreError as exc:
                raise Unreachable(exc) from exc
        return True

    def drop(self) -> None:
        """The user's word (``journal prune``): remove the entry, whatever it records. Raises
        :class:`Unwritable` when it cannot be removed."""
        if self.shared is not None:
            try:
                self.shared.remove(self)
            except StoreError as exc:
                raise Unreachable(exc) from exc
            return
        try:
            for path in (self.path, self.lock_path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        except OSError as exc:
            raise Unwritable(self.path.parent, exc) from exc
        finally:
            self.release()

    def discard(self) -> None:
        """Nothing is left billing: remove the entry (only its holder does)."""
        if self.shared is not None:
            if self.held() and not self.lost:
                with contextlib.suppress(StoreError):
                    self.shared.remove(self)  # else its lease runs out and the next run finds nothing made
            shared._unhold(self)
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.lock_path.unlink()
        self.release()

    # -------------------------------------------------------------------------------- the lock

    def held(self) -> bool:
        if self.shared is not None:
            return shared.held(self)
        return self._fd is not None

    def claim(self) -> bool:
        """Take the entry's lock (its lease, in a shared journal) for this process, once: False when another
        process or thread holds it, or the entry is gone or changed. Whoever holds it is the only one who acts on
        the entry."""
        if self.shared is not None:
            try:
                return self.shared.claim(self)
            except StoreError as exc:
                raise Unreachable(exc) from exc
        if self._fd is not None:
            return True
        try:
            fd = _open_lock(self.lock_path)
        except FileNotFoundError:
            return False  # the entry (and its folder) went meanwhile
        except _NotALock:
            return False  # not a lock this provider made: the entry is not to be acted on
        except OSError as exc:
            raise Unwritable(self.path.parent, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            # No flock on this file system (some network mounts): fall back on the writer's process.
            return self.process is not None and self.process.running() is False
        fresh = load(self.path)  # what it says now that we hold it (its holder may have just finished)
        if not isinstance(fresh, Entry) or fresh.state != self.state or fresh.id != self.id:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return False
        self._hold(fd)
        return True

    def _hold(self, fd: int) -> None:
        self._fd = fd
        with _lock:
            _holding[id(self)] = self

    def in_flight(self) -> bool:
        """Whether a running process holds it (a create in progress, or one being taken over; in a shared
        journal: its lease is live, on any machine)."""
        if self.shared is not None:
            return self.shared.live(self)
        if self._fd is not None:
            return True
        try:
            fd = _open_lock(self.lock_path, create=False)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # cannot tell (or not a lock of this provider's): never taken for over
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            return self.process is None or self.process.running() is not False
        finally:
            os.close(fd)  # closing drops a lock we just took
        return False

    def release(self) -> None:
        if self.shared is not None:
            if self.held() and not self.lost:
                with contextlib.suppress(StoreError, LeaseLost):
                    self.shared.write(self, release=True)
            shared._unhold(self)
            return
        with _lock:
            _holding.pop(id(self), None)
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -------------------------------------------------------------------------------- the file

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kind": self.kind,
            "base_url": self.base_url,
            "body": self.body,
            "owner": self.owner,
            "backend": self.backend,
            "backend_location": self.backend_location,
            "request_key": self.request_key,
            "started_at": _iso(self.started_at),
            "process": dataclasses.asdict(self.process) if self.process else None,
            "engine": dataclasses.asdict(self.engine) if self.engine else None,
            "state": self.state.value,
            "snapshot": self.snapshot,
            "sends": [_iso(s) for s in self.sends],
            "answered_at": _iso(self.answered_at) if self.answered_at else None,
            "clock_offset": self.clock_offset,
            "refused": self.refused,
            "id": self.id,
            "note": self.note,
        }

    def _write(self) -> None:
        if self.shared is not None:
            try:
                self.shared.write(self)
            except StoreError as exc:
                raise Unreachable(exc) from exc
            return
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Atomic: a reader (or a crash) never sees half an entry.
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as out:
                    json.dump(self.to_json(), out)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise Unwritable(folder, exc) from exc


def _parse(path: Path, data: Any) -> Entry:
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    version = data.get("version", 1)
    kind, base_url, body = data.get("kind"), data.get("base_url"), data.get("body")
    if not isinstance(kind, str) or not isinstance(base_url, str) or not isinstance(body, dict):
        raise ValueError("kind, base_url and body are required")
    ident = _str_or_none(data.get("id"))
    if version == 1:
        # An entry of a release before the ownership rule: it names no declaration, so it is never taken
        # over (only the orphan finder labels its object).
        pid = data.get("pid")
        if not isinstance(pid, int):
            raise ValueError("pid: expected an integer")
        return Entry(
            path=path,
            kind=kind,
            base_url=base_url,
            body=body,
            owner=None,
            backend=None,
            backend_location=None,
            started_at=_moment(data.get("started_at"), "started_at"),
            process=Process(pid=pid, start=None, boot=None, namespace=None, host=""),
            engine=None,
            state=State.CREATED if ident else State.POSTING,
            id=ident,
            version=1,
        )
    state = data.get("state")
    if state not in {s.value for s in State}:
        raise ValueError(f"state: expected one of {', '.join(s.value for s in State)}")
    snapshot = data.get("snapshot")
    if snapshot is not None and not (
        isinstance(snapshot, list) and all(isinstance(i, str) for i in snapshot)
    ):
        raise ValueError("snapshot: expected a list of ids")
    sends = data.get("sends") or []
    if not isinstance(sends, list):
        raise ValueError("sends: expected a list of times")
    answered = data.get("answered_at")
    return Entry(
        path=path,
        kind=kind,
        base_url=base_url,
        body=body,
        owner=_str_or_none(data.get("owner")),
        backend=_str_or_none(data.get("backend")),
        backend_location=_str_or_none(data.get("backend_location")),
        started_at=_moment(data.get("started_at"), "started_at"),
        process=Process.from_json(data["process"]) if data.get("process") is not None else None,
        engine=Process.from_json(data["engine"]) if data.get("engine") is not None else None,
        state=State(state),
        snapshot=snapshot,
        sends=[_moment(s, "sends") for s in sends],
        answered_at=_moment(answered, "answered_at") if answered is not None else None,
        clock_offset=_number_or_none(data.get("clock_offset")),
        refused=data.get("refused") is True,
        id=ident,
        note=_str_or_none(data.get("note")),
        version=int(version) if isinstance(version, int) else VERSION,
    )


# ``done`` records, by path, with the (inode, mtime, size) they were read at. They outnumber every other entry
# (each create that answered leaves one for 24 hours) and never change, and every create reads the whole
# folder: parsed once per process, a folder of hundreds of records costs a create a stat per record.
_done: dict[Path, tuple[tuple[int, int, int], Entry]] = {}


def load(path: Path) -> Entry | str | None:
    """The entry in ``path`` (a fresh object: its holder may claim it; a ``done`` record read before comes from
    memory); a string saying what is wrong with it when it cannot be read or trusted; None when the file is gone.

    Nothing is trusted that this user did not write: a symbolic link, a file that is not regular, one of another
    user's or that others can write, one larger than :data:`MAX_ENTRY_BYTES` or nested deeper than
    :data:`MAX_DEPTH` is refused (the string says which)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "it is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or type(exc).__name__)
    try:
        seen_stat = os.fstat(fd)
        why = _untrusted(seen_stat, "file")
        if why:
            return f"it {why}"
        if seen_stat.st_size > MAX_ENTRY_BYTES:
            return f"it is {seen_stat.st_size} bytes, more than any entry this provider writes ({MAX_ENTRY_BYTES})"
        seen = (seen_stat.st_ino, seen_stat.st_mtime_ns, seen_stat.st_size)
        with _lock:
            cached = _done.get(path)
        if cached is not None and cached[0] == seen:
            return dataclasses.replace(cached[1])
        with os.fdopen(os.dup(fd), "rb") as stream:
            raw = stream.read(MAX_ENTRY_BYTES + 1)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        os.close(fd)
    if len(raw) > MAX_ENTRY_BYTES:
        return f"it is more than {MAX_ENTRY_BYTES} bytes, more than any entry this provider writes"
    try:
        data = json.loads(raw)
        _within_depth(data, MAX_DEPTH)
        entry = _parse(path, data)
    except RecursionError:
        return f"it is nested deeper than any entry this provider writes ({MAX_DEPTH} levels)"
    except (ValueError, TypeError, KeyError) as exc:
        return str(exc) or type(exc).__name__
    if entry.state == State.DONE:
        with _lock:
            _done[path] = (seen, entry)
        return dataclasses.replace(entry)
    return entry


def _within_depth(value: Any, limit: int) -> None:
    """Raise ValueError when ``value`` (parsed JSON) nests deeper than ``limit`` (without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise ValueError(f"it is nested deeper than any entry this provider writes ({limit} levels)")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


def _warn_malformed(path: Path | str, problem: str, warn: Callable[[str], None] | None) -> None:
    if warn is None:
        return
    with _lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    warn(
        f"warning: skipped the create journal entry {path}: it cannot be read ({problem}). Remove the file if "
        "no create is running"
    )


def current() -> SharedJournal | None:
    """The shared journal this process's creates use (:mod:`.location`), None for the local folder."""
    where = location.locate()
    return shared.at(where.url) if where.url else None


def where() -> str:
    """Where the journal is, for a sentence: its folder, or its URL."""
    journal = current()
    return location.printable(journal.location) if journal is not None else str(directory())


def entries(warn: Callable[[str], None] | None = progress_line, request: str | None = None) -> list[Entry]:
    """Every readable entry (of the request ``request``, a :func:`request_key`, when given), oldest first; an
    unreadable one is skipped with one warning (per process) naming its file (``warn=None``: silently).
    Raises :class:`Unreachable` when a shared journal's store cannot be read."""
    return _entries_of(current(), warn, request)


def entries_at(url: str | None, warn: Callable[[str], None] | None = progress_line) -> list[Entry]:
    """Every readable entry of the journal at ``url`` (None: this machine's folder), whichever journal this
    process's own creates use: what the orphan finder reads for each stack. Raises :class:`Unreachable` when
    the store cannot be read."""
    if not url:
        return _entries_of(None, warn, None)
    try:
        journal = shared.at(url)
    except StoreError as exc:  # not a URL of any store
        raise Unreachable(exc) from exc
    return _entries_of(journal, warn, None)


def _entries_of(
    journal: SharedJournal | None, warn: Callable[[str], None] | None, request: str | None
) -> list[Entry]:
    if journal is not None:
        try:
            found = journal.entries(_parse_key, request, lambda key, why: _warn_malformed(key, why, warn))
        except StoreError as exc:
            raise Unreachable(exc) from exc
        return sorted(found, key=lambda e: (e.started_at, e.path.name))
    found = _local_entries(warn)
    return [e for e in found if request is None or e.request_key == request]


def _parse_key(key: str, data: Any) -> Entry:
    _within_depth(data, MAX_DEPTH)
    return _parse(Path(key), data)


def _local_entries(warn: Callable[[str], None] | None) -> list[Entry]:
    folder = trusted_folder()
    if not folder.is_dir():
        return []
    found: list[Entry] = []
    paths = list(folder.glob("*.json"))
    for path in paths:
        loaded = load(path)
        if isinstance(loaded, Entry):
            found.append(loaded)
        elif isinstance(loaded, str):
            _warn_malformed(path, loaded, warn)
    with _lock:
        for gone in _done.keys() - set(paths):
            if gone.parent == folder:
                del _done[gone]
    return sorted(found, key=lambda e: (e.started_at, e.path.name))


def unfinished(warn: Callable[[str], None] | None = progress_line) -> list[Entry]:
    """Entries whose create did not reach its engine's answer (in flight, or left: what may bill unrecorded)."""
    return [e for e in entries(warn) if e.state != State.DONE]


def begin(
    kind: str, base_url: str, body: dict[str, Any], owner: str | None, stack_backend: Backend | None = None
) -> Entry:
    """Write the intent of a create and hold its lock, before anything is sent. ``stack_backend``: the backend
    of the stack the create is for (default: the one this process's command uses, :func:`.backend.locate`).

    Raises :class:`Unwritable` (the folder) or :class:`Unreachable` (a shared journal's store) when the
    journal cannot be written: then nothing may be sent."""
    folder = directory()
    where = stack_backend or backend.locate()
    place = location.locate(where)
    location.announce(place)
    entry = Entry(
        path=folder / f"{uuid.uuid4().hex}.json",
        kind=kind,
        base_url=base_url.rstrip("/"),
        body=body,
        owner=owner,
        backend=where.identity,
        backend_location=where.location,
        started_at=_now(),
        process=Process.this(),
        engine=_engine(),
    )
    if place.url is not None:
        journal = shared.at(place.url)
        entry.path = Path(journal.key(entry.request_key, uuid.uuid4().hex))
        entry.shared = journal
        try:
            journal.verify()
            journal.create(entry)
        except StoreError as exc:
            shared.forget(place.url)
            raise Unreachable(exc) from exc
        _prune_shared(journal, entry)
        return entry
    trusted_folder(create=True)
    try:
        fd = _open_lock(entry.lock_path)
    except OSError as exc:
        raise Unwritable(folder, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # no flock here: liveness falls back on the process record
    entry._hold(fd)
    try:
        entry._write()
    except Unwritable:
        entry.discard()
        raise
    _prune(exclude=entry.path)
    return entry


_engine_cache: list[Process] = []


def _engine() -> Process:
    with _lock:
        if not _engine_cache:
            _engine_cache.append(engine_process())
        return _engine_cache[0]


def holding() -> list[Entry]:
    """The entries this process holds now (its creates in flight, in the folder or a shared journal)."""
    with _lock:
        local = list(_holding.values())
    return local + shared.holding()


def left_by_interrupted(entry: Entry, now: datetime | None = None) -> list[Entry]:
    """Entries of the same declaration, kind, API and request as ``entry`` that no running process holds,
    younger than :data:`MAX_AGE`, oldest first (what its create may take over)."""
    return interrupted(
        entry.kind, entry.base_url, entry.body, entry.owner, entry.backend, exclude=entry.path, now=now
    )


def interrupted(
    kind: str,
    base_url: str,
    body: dict[str, Any],
    owner: str | None,
    stack_backend: str | None = None,
    *,
    exclude: Path | None = None,
    now: datetime | None = None,
) -> list[Entry]:
    """Unfinished entries of this declaration (``owner``), kind, API and request that no running process
    holds, younger than :data:`MAX_AGE`, oldest first. None without a declaration: then nothing proves whose
    anything is.

    A ``done`` entry is never one: its create reached its engine (the state holds the object, or the user removed
    it from there on purpose), and a declaration name can recur in another backend's stack of the same
    organization, project and stack name. It stays a claim, and the orphan finder's label."""
    if not owner:
        return []
    key = declaration_key(kind, base_url.rstrip("/"), body, owner, stack_backend or backend.locate().identity)
    now = now or _now()
    return [
        e
        for e in entries(request=request_key(kind, base_url, body))
        if e.path != exclude
        and e.version >= VERSION
        and e.state not in ENDED
        and e.key == key
        and e.age(now) < MAX_AGE
        and not e.in_flight()
    ]


def live_leases(entry: Entry, now: datetime | None = None) -> list[Entry]:
    """Unfinished entries of ``entry``'s declaration in a shared journal whose lease is live and that this
    process does not hold: a create of it on another machine, at work or killed a moment ago."""
    if entry.shared is None or not entry.owner:
        return []
    now = now or _now()
    return [
        e
        for e in entries(request=entry.request_key)
        if e.path != entry.path
        and e.version >= VERSION
        and e.state not in ENDED
        and e.key == entry.key
        and e.age(now) < MAX_AGE
        and not e.held()
        and e.in_flight()
    ]


def lease_left(entry: Entry) -> float:
    """Seconds until the lease of a shared entry (as last read) runs out (0 for the local folder)."""
    return max(0.0, entry.shared.expires_in(entry)) if entry.shared is not None else 0.0


def outlast(live: Callable[[], list[Entry]], said: Callable[[float, list[Entry]], None]) -> list[Entry]:
    """Wait for the live leases ``live()`` gives (read again every few seconds) to end or run out, at most as
    long as the longest of them has left when first read (``said(seconds, entries)`` first, for the user): those still
    live then (their run renews them: it is at work), else []. A lease is a promise of at most its length, so a
    runner killed or thrown away a moment ago holds things up that long, never longer; a local entry's lock has
    no lease (a process holds it or not): one that is live is returned at once."""
    found = live()
    wait = max((lease_left(e) for e in found), default=0.0)
    if not found or wait <= 0:
        return found
    said(wait, found)
    deadline = time.monotonic() + wait + 1.0
    while found and time.monotonic() < deadline:
        time.sleep(min(2.0, max(0.2, deadline - time.monotonic())))
        found = live()
    return found


def unattributed(entry: Entry, now: datetime | None = None) -> list[Entry]:
    """Unfinished entries of ``entry``'s owner, kind, API and request written by a release that did not record
    the stack's backend (version 2), that no running process holds, younger than :data:`MAX_AGE`: they may be
    this declaration's or that of a stack of the same names in another backend, so only the user can say."""
    if not entry.owner:
        return []
    now = now or _now()
    return [
        e
        for e in entries(request=entry.request_key)
        if e.path != entry.path
        and e.version == 2
        and e.state not in ENDED
        and e.owner == entry.owner
        and e.request_key == entry.request_key
        and e.age(now) < MAX_AGE
        and not e.in_flight()
    ]


def claimed_ids(exclude: Entry | None = None) -> set[str]:
    """Every id an entry records (in flight, interrupted or done): another declaration's proof. In a shared
    journal: every id claimed at ``exclude``'s API, but its own."""
    if exclude is not None and exclude.shared is not None:
        try:
            return exclude.shared.claimed(exclude.base_url) - ({exclude.id} if exclude.id else set())
        except StoreError as exc:
            raise Unreachable(exc) from exc
    return {e.id for e in entries() if e.id and (exclude is None or e.path != exclude.path)}


def rival_windows(
    entry: Entry, post_bound: float = POST_BOUND
) -> list[tuple[tuple[datetime, datetime], float | None]]:
    """The windows of the other creates of the same request (any declaration) that have no id: what they
    POSTed could look exactly like what ``entry``'s POST made."""
    found = []
    mine = {e.path for e in holding()}  # this process's own creates are told apart by its claims and gate
    for other in entries(request=entry.request_key):
        if (
            other.path in mine
            or other.path == entry.path
            or other.id
            or other.request_key != entry.request_key
        ):
            continue
        window = other.window(post_bound)
        if window is not None:
            found.append((window, other.clock_offset))
    return found


PRUNE_EVERY = 60.0
"""Seconds between two prunings of the folder by one process (a create begins with one when it is due)."""

_pruned: dict[Path, float] = {}


def _prune(exclude: Path) -> None:
    """Remove ``done`` entries past :data:`MAX_AGE` and any entry past :data:`FORGET_AFTER` that no process
    holds; stray temporary files of crashed writes go too. At most once per :data:`PRUNE_EVERY` per folder:
    what expires meanwhile goes at the next one."""
    folder = directory()
    with _lock:
        last = _pruned.get(folder)
        if last is not None and time.monotonic() - last < PRUNE_EVERY:
            return
        _pruned[folder] = time.monotonic()
    now = _now()
    for old in entries(warn=None):
        if old.path == exclude:
            continue
        expired = old.age(now) > (MAX_AGE if old.state in ENDED else FORGET_AFTER)
        if expired and old.claim():
            old.discard()
    for tmp in folder.glob(".entry-*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - tmp.stat().st_mtime > 3600:
                tmp.unlink()


def _prune_shared(journal: SharedJournal, entry: Entry) -> None:
    """:func:`_prune` in a shared journal, over the entries of ``entry``'s request only (what its create reads
    anyway): the others are pruned by their own creates, or by ``journal prune``."""
    with _lock:
        last = _pruned.get(Path(journal.location))
        if last is not None and time.monotonic() - last < PRUNE_EVERY:
            return
        _pruned[Path(journal.location)] = time.monotonic()
    now = _now()
    with contextlib.suppress(Refused, StoreError):
        for old in entries(warn=None, request=entry.request_key):
            if old.path == entry.path:
                continue
            if old.age(now) > (MAX_AGE if old.state in ENDED else FORGET_AFTER) and old.claim():
                old.discard()
