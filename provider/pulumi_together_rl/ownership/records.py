"""What the create journal stores, as plain data with one validated parse, whatever the store.

* :class:`Entry`: one create (its declaration, request, snapshot, POST window, id) and the :class:`Lease` of the
  process that holds it;
* :class:`Claim`: an id bound to the one entry that recorded it;
* :class:`Process`: a process, named so that pid reuse and pid namespaces cannot make another one look like it.

A store holds bytes anyone who can write it may have written: every read goes through :func:`parse_entry` or
:func:`parse_claim`, which check the size before anything is read (:data:`MAX_BYTES`, the store's ``read`` is
given it), the nesting depth before the JSON parser sees it (:data:`MAX_DEPTH`), and then every field's type and
bounds (finite numbers, no ``NaN`` or ``Infinity``, a lease of at most :data:`MAX_LEASE_SECONDS`) with pydantic.
What fails is :class:`Malformed`, whose message says which field and why: the entry is skipped with one line
naming it, never a traceback.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, ValidationError

VERSION = 4
"""The entry format written now. 2 and 3 (releases 0.2 to 0.4, in this machine's folder) are still read."""

MAX_BYTES = 1 << 20
"""The largest entry or claim read (1 MiB): what this provider writes is a few kilobytes (a request body, a
snapshot of ids); anything larger was not written by it, and every create would read it again."""

MAX_DEPTH = 32
"""The deepest nesting read: a request body is a few levels deep."""

MAX_LEASE_SECONDS = 3600.0
"""The longest lease an entry may carry: a lease is renewed every sixth of it, so an hour is already a store
answering once in ten minutes. A longer one (a typo, a planted entry) would hold every create of its
declaration up for as long: the entry is malformed."""

POST_BOUND = 60.0
"""Seconds after its last send within which a POST whose process died mid-request can still have made its
object (the client's default read timeout: no answer comes later)."""


# Strict: a number is a JSON number and a string a JSON string (``"30"`` is no lease length); times are RFC 3339
# strings, which is why the models themselves validate in lax mode.
def _rfc3339(value: Any) -> datetime:
    """A time as the journal writes it: an RFC 3339 string, read as UTC when it names no zone."""
    if isinstance(value, datetime):  # a record built in this process
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError("expected an RFC 3339 time string")
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


_Time = Annotated[datetime, BeforeValidator(_rfc3339)]
_Number = Annotated[float, Strict(), Field(allow_inf_nan=False, ge=-1e9, le=1e9)]
_Int = Annotated[int, Strict()]
_Text = Annotated[str, Strict(), Field(max_length=4096)]


class Malformed(ValueError):
    """Bytes that are not an entry (or a claim) this provider writes: the message says why, for the user."""


class State(str, enum.Enum):
    """Where a create stands, as its entry records it (the JSON holds the value)."""

    INTENT = "intent"
    """Written, nothing sent: removed when the create ends; left behind, it made nothing."""
    POSTING = "posting"
    """The snapshot taken and a POST about to be sent (or sent): an object may exist that no id names."""
    CREATED = "created"
    """The id is known: the object exists under it."""
    DONE = "done"
    """The create answered its engine: the record that its id is claimed, never taken over by a create."""
    DISMISSED = "dismissed"
    """The user said none of what its take-over found is the declaration's: never taken over, still a rival."""


ENDED = (State.DONE, State.DISMISSED)
"""States of a create that is over: never taken over."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


# ------------------------------------------------------------------------------------------ processes


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks since boot) of ``pid`` from /proc, or None when
    there is no such process or it has ended.

    A process that has ended but that its parent has not reaped yet (state ``Z``, a zombie; ``X``, dead) keeps
    its pid and start time until it is reaped: a ``pulumi`` killed by SIGKILL under a parent that never waits
    for it would look alive for as long as that parent lives. It runs nothing and will answer nothing, so it
    counts as gone."""
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


def _first_line(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


class Process(_Record):
    """A process, named so that pid reuse and pid namespaces cannot make another one look like it."""

    pid: Annotated[int, Strict(), Field(ge=0, le=1 << 31)]
    start: Annotated[int, Strict(), Field(ge=0)] | None = None
    """Start time in clock ticks since boot (``/proc/<pid>/stat``): a reused pid has another."""
    boot: _Text | None = None
    """The kernel's boot id: another boot, another machine or another life of it."""
    namespace: _Text | None = None
    """The pid namespace it was seen in (``pid:[4026531836]``): pid 1 of one container is not pid 1 of the next."""
    host: _Text = ""

    @classmethod
    def of(cls, pid: int) -> Process:
        """``pid`` as this process sees it (in its own pid namespace)."""
        proc = _stat(pid)
        return cls(
            pid=pid,
            start=proc[2] if proc else None,
            boot=_first_line("/proc/sys/kernel/random/boot_id"),
            namespace=_pid_namespace(),
            host=socket.gethostname(),
        )

    @classmethod
    def this(cls) -> Process:
        return cls.of(os.getpid())

    def running(self) -> bool | None:
        """Whether it still runs: True, False, or None when this process cannot tell.

        False only on proof: the same kernel (boot id: two machines of one host name are told apart by it, and
        a machine that rebooted cannot tell what ran before) and the same pid namespace, where its pid is gone or
        belongs to a process started at another time."""
        here = Process.of(os.getpid())
        if not self.boot or self.boot != here.boot:
            return None
        if self.namespace != here.namespace or self.start is None or here.start is None:
            return None
        proc = _stat(self.pid)
        return proc is not None and proc[2] == self.start

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


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


class Lease(_Record):
    """Who may write an entry, and for how long without renewing (see :mod:`.journal` for how it is judged)."""

    holder: _Text | None
    """A random token of the holding process; None: released (its create ended or was left on purpose)."""
    seconds: Annotated[float, Strict(), Field(allow_inf_nan=False, ge=1.0, le=MAX_LEASE_SECONDS)]
    """How long it lives past the store's clock of the entry's last write."""
    beat: Annotated[int, Strict(), Field(ge=0, le=1 << 53)] = 0
    """Changed by every write, so that every write changes the entry's version."""


def request_key(kind: str, base_url: str, body: dict[str, Any]) -> str:
    """The same create to the same API, whoever declares it."""
    text = json.dumps({"kind": kind, "base_url": base_url.rstrip("/"), "body": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def declaration_key(
    kind: str, base_url: str, body: dict[str, Any], owner: str | None, backend: str | None = None
) -> str:
    """The same create of the same declaration: the same request, owner and stack backend (``backend``: its
    :attr:`~..backend.Backend.identity`; stacks of the same names in two backends are two declarations)."""
    text = f"{request_key(kind, base_url, body)}\0{owner or ''}\0{backend or ''}"
    return hashlib.sha256(text.encode()).hexdigest()


class Declaration(_Record):
    """What a create is of: one declaration's request to one API, in one stack backend. Its ``request`` (any
    declaration's same create) and ``key`` (this declaration's) are computed once, when it is made."""

    kind: _Text
    base_url: _Text
    body: dict[str, Any]
    owner: _Text | None
    backend: _Text | None
    """The stack backend's identity (:attr:`~..backend.Backend.identity`)."""
    backend_location: _Text | None = None
    request: str = ""
    key: str = ""

    @classmethod
    def of(
        cls,
        kind: str,
        base_url: str,
        body: dict[str, Any],
        owner: str | None,
        backend: str | None,
        backend_location: str | None = None,
    ) -> Declaration:
        base = base_url.rstrip("/")
        return cls(
            kind=kind,
            base_url=base,
            body=body,
            owner=owner,
            backend=backend,
            backend_location=backend_location,
            request=request_key(kind, base, body),
            key=declaration_key(kind, base, body, owner, backend),
        )


class Entry(_Record):
    """One create: in flight, interrupted, or over (a record that its id is claimed). Immutable: a write is a new
    entry (``entry.model_copy(update=...)``) swapped in for the version its writer read."""

    version: Annotated[int, Strict(), Field(ge=2, le=VERSION)] = VERSION
    kind: _Text
    base_url: _Text
    body: dict[str, Any]
    owner: _Text | None = None
    """The declaration: ``org/project/stack/name`` (None: a direct call, which nothing takes over)."""
    backend: _Text | None = None
    """The identity of the stack's backend (:mod:`..backend`), None for entries of a release that did not record
    it: part of the declaration, since stacks of the same names in two backends are two stacks."""
    backend_location: _Text | None = None
    """That backend's canonical location, for the people who read the entry (never a credential)."""
    started_at: _Time
    """When the create began, on its writer's clock: for people, never for ages (those are the store's)."""
    process: Process | None = None
    """The process that wrote it last (its holder while the lease is held)."""
    engine: Process | None = None
    state: State = State.INTENT
    snapshot: Annotated[list[_Text], Field(max_length=100_000)] | None = None
    """Ids of the candidate objects that existed before the POST (None: not taken yet)."""
    sends: Annotated[list[_Time], Field(max_length=1000)] = []
    """When each POST was sent, on the writer's clock."""
    answered_at: _Time | None = None
    """When the last POST answered or failed (None while in flight, or when killed during it)."""
    clock_offset: _Number | None = None
    """Seconds the API's clock was ahead of the writer's when it posted (None: not measured): what maps the
    window onto the API's ``created_at``."""
    refused: Annotated[bool, Strict()] = False
    """The API itself answered that the last POST failed."""
    id: _Text | None = None
    note: _Text | None = None
    """Why it was left (``the engine was gone``), for the next run and the orphan finder."""
    lease: Lease | None = None
    """None in entries of releases 0.2 to 0.4 (this machine's folder, whose liveness was a lock file): such an
    entry is judged by its process alone."""

    @property
    def request_key(self) -> str:
        return request_key(self.kind, self.base_url, self.body)

    @property
    def key(self) -> str:
        """Its declaration (:func:`declaration_key`)."""
        return declaration_key(self.kind, self.base_url, self.body, self.owner, self.backend)

    def window(self, post_bound: float = POST_BOUND) -> tuple[datetime, datetime] | None:
        """When its POSTs could have made an object (its writer's clock): from the first send to the last answer
        (or, if it was killed during a POST, the last send plus ``post_bound`` seconds). None: nothing sent."""
        if not self.sends:
            return None
        end = self.answered_at or (max(self.sends) + timedelta(seconds=post_bound))
        return min(self.sends), end

    def describe(self) -> str:
        who = self.owner or "an unknown declaration"
        if self.backend_location:
            who += f" in backend {self.backend_location}"
        by = f" by {self.process.describe()}" if self.process else ""
        return f"{who} ({stamp(self.started_at)}{by})"


class Claim(_Record):
    """``claims/<api>/<id>``: the id bound to the one entry (its key) that recorded it."""

    entry: _Text
    owner: _Text | None = None
    kind: _Text | None = None


# ------------------------------------------------------------------------------------------ the bytes


def dump(record: Entry | Claim) -> bytes:
    return record.model_dump_json(exclude_none=False).encode()


def parse_entry(data: bytes) -> Entry:
    """The entry in ``data``; :class:`Malformed` saying why when it is not one this provider writes."""
    raw = _loaded(data)
    if isinstance(raw, dict) and "version" not in raw:
        raise Malformed(
            "it names no format version (a release before 0.2 wrote it; this one does not read it)"
        )
    entry: Entry = _validated(Entry, raw)
    return entry


def parse_claim(data: bytes) -> Claim:
    """The claim in ``data``; :class:`Malformed` saying why when it is not one this provider writes."""
    claim: Claim = _validated(Claim, _loaded(data))
    return claim


def _loaded(data: bytes) -> Any:
    if len(data) > MAX_BYTES:
        raise Malformed(f"it is {len(data)} bytes, more than any entry this provider writes ({MAX_BYTES})")
    _within_depth(data)
    try:
        # Non-finite numbers are not JSON; Python's parser would take them.
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise Malformed(
            f"it is nested deeper than any entry this provider writes ({MAX_DEPTH} levels)"
        ) from None
    except ValueError as exc:
        raise Malformed(f"it is not JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _within_depth(data: bytes) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH`, by a scan of the bytes: the parser would recurse into
    it (a planted ``[[[[...`` costs every reader a ``RecursionError``)."""
    depth, in_string, escaped = 0, False, False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_DEPTH:
                raise Malformed(
                    f"it is nested deeper than any entry this provider writes ({MAX_DEPTH} levels)"
                )
        elif byte in (0x5D, 0x7D):
            depth -= 1


def _validated(model: type[Any], raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise Malformed("it is not a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "it"
        raise Malformed(f"{where}: {first['msg'].lower()}") from None


def now() -> datetime:
    return datetime.now(timezone.utc)


def stamp(moment: datetime) -> str:
    """A moment as a sentence says it."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
