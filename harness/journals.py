"""The create journal as tests see it: what it holds now, and what a create that is gone left in it.

A run that is gone left its entry exactly as its last write made it: the record, its lease released (a create
that ended on purpose, or whose engine was gone) or held by a process that is dead. :func:`left` writes such an
entry into the store the journal uses (the same bytes :mod:`pulumi_together_rl.ownership.leases` writes), so a
test starts from the state a real interrupted run leaves; :func:`hold` is a real process holding an entry's lease,
renewing it, until it is killed.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from pulumi_together_rl import backend
from pulumi_together_rl.ownership import journal
from pulumi_together_rl.ownership.journal import Journal, Seen
from pulumi_together_rl.ownership.leases import Holding
from pulumi_together_rl.ownership.records import Claim, Entry, Lease, Process, State, dump


def opened(url: str | None = None) -> Journal:
    """The journal at ``url`` (None: the one this process's creates use)."""
    return journal.at(url) if url else journal.current()


def entries(url: str | None = None) -> list[Seen]:
    """Every entry now (silently skipping what cannot be read)."""
    return opened(url).entries(warn=None)


def unfinished(url: str | None = None) -> list[Seen]:
    """The entries whose create did not reach its engine's answer."""
    return [s for s in entries(url) if s.entry.state != State.DONE]


def left(
    kind: str,
    base_url: str,
    body: dict[str, Any],
    owner: str | None,
    *,
    snapshot: Iterable[str] = (),
    sent: bool = True,
    ident: str | None = None,
    state: State | None = None,
    note: str | None = None,
    refused: bool = False,
    answered: bool = False,
    started_at: datetime | None = None,
    clock_offset: float | None = 0.0,
    version: int = 4,
    stack_backend: str | None = "this",
    process: Process | None = None,
    url: str | None = None,
    claimed: bool = True,
) -> Seen:
    """The entry a create that is gone left: its snapshot and one send (``sent``), its id if its POST answered,
    its lease released (``process``: the process that wrote it last; None by default, never a live holder), and
    the id's claim (``claimed`` false: killed between the id's write and the claim's)."""
    where = opened(url)
    here = backend.locate()
    started = started_at or datetime.now(timezone.utc)
    sends = [started + timedelta(milliseconds=1)] if sent else []
    entry = Entry(
        version=version,
        kind=kind,
        base_url=base_url.rstrip("/"),
        body=body,
        owner=owner,
        backend=here.identity if stack_backend == "this" else stack_backend,
        backend_location=here.location if stack_backend == "this" else None,
        started_at=started,
        process=process,
        state=state or (State.CREATED if ident else State.POSTING if sent else State.INTENT),
        snapshot=sorted(snapshot) if sent else None,
        sends=sends,
        answered_at=(sends[-1] + timedelta(milliseconds=5)) if (answered or ident) and sends else None,
        clock_offset=clock_offset if sent else None,
        refused=refused,
        id=ident,
        note=note,
        lease=Lease(holder=None, seconds=journal.lease_seconds(), beat=1),
    )
    key = where.entry_key(entry.request_key, uuid.uuid4().hex)
    assert where.store.create(key, dump(entry)) is not None
    if ident and claimed:
        claim = Claim(entry=key, owner=owner, kind=kind)
        where.store.create(where.claim_key(entry.base_url, ident), dump(claim))
    seen = where.read(key, warn=None)
    assert seen is not None
    return seen


def rewrite(seen: Seen, **changes: Any) -> Seen:
    """``seen`` with ``changes``, written over it (as its writer would have, by compare-and-swap)."""
    entry = seen.entry.model_copy(update=changes)
    assert seen.journal.store.swap(seen.key, dump(entry), seen.version) is not None
    fresh = seen.journal.read(seen.key, warn=None)
    assert fresh is not None
    return fresh


HOLD = """\
import sys, time
from pulumi_together_rl.ownership import journal, leases
seen = (journal.at(sys.argv[1]) if sys.argv[1] else journal.current()).read(sys.argv[2], warn=None)
held = leases.Holding.take(seen)
print("held" if held is not None else "refused", flush=True)
time.sleep(600)
"""


def hold(seen: Seen, url: str | None = None) -> subprocess.Popen[str]:
    """A live process holding ``seen``'s lease (a create in flight, or a take-over elsewhere), renewing it until
    it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, url or "", seen.key], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    answer = holder.stdout.readline().strip()
    assert answer == "held", f"the holder could not take the entry ({answer!r})"
    return holder


def begun(
    kind: str,
    base_url: str,
    body: dict[str, Any],
    owner: str | None,
    *,
    ident: str | None = None,
    stack_backend: backend.Backend | None = None,
    url: str | None = None,
) -> Holding:
    """An entry this process holds, as a running create holds it (its lease renewed): its POST sent, its id
    recorded when ``ident`` is given. Release it (``.release()``) when the test is done with it."""
    here = stack_backend or backend.locate()
    where = journal.at(url) if url else journal.for_stack(here)
    where.probe()
    sent = datetime.now(timezone.utc)
    held = Holding.begin(
        where,
        Entry(
            kind=kind,
            base_url=base_url.rstrip("/"),
            body=body,
            owner=owner,
            backend=here.identity,
            backend_location=here.location,
            started_at=sent,
            state=State.POSTING,
            snapshot=[],
            sends=[sent],
        ),
    )
    if ident:
        held.write(id=ident, state=State.CREATED)
        held.bind(ident)
    return held
