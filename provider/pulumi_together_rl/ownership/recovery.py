"""``python -m pulumi_together_rl recover --stack STACK [--report] [--force]``: what a killed ``pulumi up`` left,
cleared.

A ``pulumi`` CLI that is killed (SIGKILL, a CI runner's hard cancel or GitHub's cancel sequence, a runner thrown
away) leaves two things in its stack's backend that only a person clears by hand: the stack's **lock**, and a
**pending create** (``deployment.pending_operations`` of type ``creating``: the URN, type and inputs the engine
wrote before it called the provider's Create; never the id, which the engine never got). The create journal
holds what the engine lost: the id the API answered, or the POST's window (:mod:`.journal`).

**Which journal.** Exactly the ones the orphan finder reads for the stack (:func:`..orphans.sources.stack_journals`):
this machine's folder, ``TOGETHER_RL_JOURNAL_URL``, the stack's own ``journalUrl`` (read from its config), the
journal beside a bucket backend; the one the stack's ``pulumi up`` writes to (resolved as a create resolves it)
is named as such. Each is probed first (its clock: leases judged on it). One that cannot be read refuses the
command: nothing is changed.

Then, unless ``--report``:

* **a create of the stack is live** (its entry's lease, on any machine): waited for, at most as long as it has
  left (:func:`.journal.outlast`); one still live then is refused, in one sentence naming whose it is.
* **the stack's lock** (self-managed backends: ``.pulumi/locks/...``) is read before it is removed: one younger
  than :data:`LOCK_YOUNG` (on the store's clock), or whose process runs on this host, is refused unless
  ``--force``: its run may be at work without creating a Together object at this moment, which no journal
  shows.
* otherwise the lock goes (``pulumi cancel --yes``), and each pending create is decided from the **newest** entry
  of its declaration (the one its killed run wrote last; :func:`plan`):

  - it records an id the state does not hold: ``--import-pending-creates URN ID`` (the pinned CLI v3.274.1 drops
    the pending create without recording the object; the next ``pulumi up`` takes it over by that id). An entry
    marked done whose answer never reached the engine (killed right after) is reopened first, so that the next
    ``pulumi up`` takes it over;
  - it records an id the state holds, or no id (the journal keeps the POST's window: the next ``pulumi up`` takes
    over the one object that matches, creates anew when none does, names them when several do), or the user
    dismissed it, or it sent nothing: the pending create is dropped;
  - no entry at all: dropped when the stack's own journal is shared and was read (a create writes its entry before
    its POST: none means nothing was sent); left, saying so, when that journal is this machine's folder (the run
    may have been another machine's).

  All of it in one ``pulumi refresh`` (``--import-pending-creates`` for the ids, ``--clear-pending-creates``
  unless one must be left).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .. import backend, messages, ours
from ..messages import SECRET, UserError, format_elapsed, printable
from . import journal, leases, location
from .journal import Seen
from .records import ENDED, State, now, stamp
from .stores import StoreError, open_store
from .stores.folder import FolderStore

if TYPE_CHECKING:  # the orphan finder's CLI plumbing is imported by the command only, not by a provider
    from ..orphans.sources import StackJournals
    from ..orphans.states import StackState


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 4
"""A create of the stack is live, or its lock is young or its process runs here: nothing was changed."""

LOCK_YOUNG = timedelta(minutes=2)
"""A stack lock younger than this is taken to be a run at work: its ``pulumi up`` may not have begun creating a
Together object yet (its preview, its other resources), and no journal would show it. ``--force`` overrides."""

SECRET_SIG = "4dabf18193072939515e22adb298388d"
"""The key Pulumi marks a secret value with in a state (``stack export`` shows it encrypted)."""


class Action(str, enum.Enum):
    """What happens to one pending create."""

    IMPORT = "import"
    """The journal holds an id the state does not: handed to ``--import-pending-creates``."""
    CLEAR = "clear"
    """The journal accounts for it (or it made nothing, or the state holds its object): dropped."""
    LEAVE = "leave"
    """No entry, and the journal read may not be the one its run used: left."""


@dataclasses.dataclass(frozen=True)
class PendingCreate:
    """A pending create of a Together object in a stack's state."""

    urn: str
    type: str
    kind: str
    inputs: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]

    def shown_inputs(self) -> str:
        """Its inputs as one line: the engine's own (``__provider``, ...) left out, secrets as ``[secret]``."""
        shown = {k: _hide_secrets(v) for k, v in self.inputs.items() if not k.startswith("__")}
        return printable(json.dumps(shown, sort_keys=True), 400)


@dataclasses.dataclass
class Decision:
    """One pending create, the journal entries of its declaration, and what is done with it."""

    pending: PendingCreate
    entries: list[Seen]
    action: Action
    id: str | None
    why: str
    """The evidence, and what the next ``pulumi up`` does."""
    reopen: Seen | None = None
    """An entry marked done whose answer never reached the engine: reopened so the next ``pulumi up`` takes it."""
    mark: Seen | None = None
    """The unfinished entry the next ``pulumi up`` takes over: noted as recovered (its take-over then asks for no
    recovery)."""


@dataclasses.dataclass
class Plan:
    """What the state and the journal hold for one stack, and what recovery does about it."""

    stack: str
    decisions: list[Decision]
    others: list[Seen]
    """Unfinished entries of the stack's declarations that no pending create names (the next ``pulumi up`` takes
    them over, or the orphan finder reports them)."""
    live: list[Seen]
    """Entries of the stack a running create holds: recovery refuses while there is one."""

    @property
    def imports(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == Action.IMPORT]

    @property
    def clears(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == Action.CLEAR]

    @property
    def left(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == Action.LEAVE]

    def refresh_args(self) -> list[str]:
        """The flags of the one ``pulumi refresh`` that rewrites the pending creates (empty: none to run)."""
        # The flag takes one value per use: the URN and the id each behind their own (`URN ID` after one flag
        # would hand the id to `refresh` as its positional argument).
        args = [
            arg
            for d in self.imports
            for arg in ("--import-pending-creates", d.pending.urn, "--import-pending-creates", d.id or "")
        ]
        if self.clears and not self.left:
            args.append("--clear-pending-creates")
        return args


def pending_creates(state: StackState) -> list[PendingCreate]:
    """The state's pending creates of Together objects (``deployment.pending_operations``)."""
    found = []
    for operation in state.pending_operations:
        resource = operation.get("resource")
        if operation.get("type") != "creating" or not isinstance(resource, Mapping):
            continue
        kind = ours.kind_of(str(resource.get("type") or ""))
        if kind is None:
            continue
        inputs = resource.get("inputs")
        found.append(
            PendingCreate(
                urn=str(resource.get("urn") or ""),
                type=str(resource.get("type")),
                kind=kind,
                inputs=inputs if isinstance(inputs, Mapping) else {},
            )
        )
    return found


def plan(state: StackState, entries: Sequence[Seen], authoritative: str | None) -> Plan:
    """Decide, from a stack's export and the journals' entries, what recovery does (see the module docstring).
    ``authoritative``: where the stack's own journal is when it is shared and was read (then a pending create
    with no entry sent nothing); None otherwise."""
    mine = [s for s in entries if _of_stack(state, s)]
    live = [s for s in mine if s.entry.state not in ENDED and s.live()]
    held_ids = {str(r.get("id")) for r in state.resources if r.get("id")}
    recorded = {str(r.get("urn")) for r in state.resources if r.get("urn")}
    decisions: list[Decision] = []
    named: set[str] = set()
    for pending in pending_creates(state):
        of = sorted((s for s in mine if _declares(s, pending)), key=lambda s: (s.modified, s.key))
        named.update(s.key for s in of)
        decisions.append(_decide(pending, of, held_ids, pending.urn in recorded, authoritative))
    others = [s for s in mine if s.key not in named and s.entry.state not in ENDED]
    return Plan(state.label, decisions, others, live)


def _decide(
    pending: PendingCreate, entries: list[Seen], held_ids: set[str], urn_held: bool, authoritative: str | None
) -> Decision:
    def decision(action: Action, why: str, ident: str | None = None, reopen: Seen | None = None) -> Decision:
        newest = entries[-1] if entries else None
        unfinished = newest is not None and newest.entry.state not in ENDED
        return Decision(pending, entries, action, ident, why, reopen, newest if unfinished else None)

    if not entries:
        if authoritative:
            return decision(
                Action.CLEAR,
                f"the stack's create journal ({authoritative}) has no entry of it: a create writes its entry before "
                "its POST, so it sent none and made nothing",
            )
        return decision(
            Action.LEAVE,
            "this machine's create journal has no entry of it (the run may have used another machine's journal): "
            "the next `pulumi up` creates it anew, and the orphan finder reports anything that run made",
        )
    newest = entries[-1]
    entry = newest.entry
    if entry.id and entry.id in held_ids:
        return decision(Action.CLEAR, f"the state already holds {entry.id}: the pending create is stale")
    if entry.id and entry.state != State.DISMISSED:
        reopen = newest if entry.state == State.DONE else None
        how = (
            "its create marked it done, but the engine was killed before the answer reached the state; reopened "
            "so that "
            if reopen
            else ""
        )
        why = (
            f"the create journal holds its id, {entry.id}: {how}the next `pulumi up` takes it over by that id"
        )
        if urn_held:  # a replacement: the state holds the old object under the URN
            return decision(Action.CLEAR, why, entry.id, reopen)
        return decision(Action.IMPORT, why, entry.id, reopen)
    if entry.state == State.DISMISSED:
        return decision(Action.CLEAR, "its entry was dismissed: the next `pulumi up` creates a new one")
    if entry.sends:
        return decision(
            Action.CLEAR,
            "its POST got no answer and the create journal keeps its window: the next `pulumi up` takes over what "
            "it made if it is the one object that matches within that window, creates a new one if none does, and "
            "names them if several do",
        )
    return decision(Action.CLEAR, "its create was stopped before its POST was sent: it made nothing")


def _of_stack(state: StackState, seen: Seen) -> bool:
    owner = ours.parse_owner(seen.entry.owner)
    return owner is not None and state.holds_declarations_of(owner, seen.entry.backend)


def _declares(seen: Seen, pending: PendingCreate) -> bool:
    owner = ours.parse_owner(seen.entry.owner)
    return owner is not None and owner.name == pending.name and seen.entry.kind == pending.kind


def _hide_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        if SECRET_SIG in value:
            return SECRET
        return {k: _hide_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide_secrets(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------ the stack's lock


@dataclasses.dataclass(frozen=True)
class Lock:
    """A self-managed backend's lock of the stack, as read before it is removed."""

    key: str
    age: timedelta
    """On the store's clock (its ``Last-Modified``, a file's ``mtime``)."""
    pid: int | None
    host: str
    user: str

    @property
    def here(self) -> bool:
        """Its process runs on this host (the CLI that wrote it is this machine's, and its pid is alive)."""
        if self.pid is None or self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self) -> str:
        by = f"{self.user}@{self.host}" if self.user else self.host or "an unknown host"
        pid = f", pid {self.pid}" if self.pid is not None else ""
        return f"taken {format_elapsed(max(0.0, self.age.total_seconds()))} ago by {by}{pid}"


def stack_locks(state: StackState, cwd: str | None) -> list[Lock]:
    """The locks of the stack in its self-managed backend (``.pulumi/locks/...``; none for Pulumi Cloud, which
    refuses a second update itself). Raises :class:`UserError` when the backend cannot be read."""
    where = backend.locate(cwd)
    identity = state.project_and_stack
    if not where.self_managed or identity is None:
        return []
    project, stack = identity
    try:
        if where.scheme == "file":
            store: Any = FolderStore(Path(where.location[len("file://") :]))
            now = datetime.now(timezone.utc)
        else:
            store = open_store(where.url)
            clock = journal.at(location.sibling(where.url))  # the same bucket: its clock is the backend's
            clock.probe()
            now = clock.now()
        listed = store.listing(".pulumi/locks/")
    except (StoreError, journal.Refused, OSError, ImportError) as exc:
        cause = getattr(exc, "cause", None) or str(exc)
        raise UserError(
            "recovering",
            "stack",
            state.label,
            f"its lock in {where.location} could not be read ({cause}), so whether a run holds it is not known",
            "Check that backend's credentials, or pass --force if no run of the stack is at work",
        ) from exc
    found = []
    for item in listed:
        parts = item.key.split("/")
        if len(parts) < 4 or parts[-2] != stack or (len(parts) >= 5 and parts[-3] != project):
            continue
        data: Mapping[str, Any] = {}
        try:
            stored = store.read(item.key) if item.data is None else None
            raw = item.data if item.data is not None else (stored.data if stored is not None else b"{}")
            loaded = json.loads(raw)
            data = loaded if isinstance(loaded, Mapping) else {}
        except Exception:  # a lock that cannot be read is still a lock: judged by its age alone
            data = {}
        pid = data.get("pid")
        found.append(
            Lock(
                key=item.key,
                age=now - item.modified,
                pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                host=str(data.get("hostname") or ""),
                user=str(data.get("username") or ""),
            )
        )
    return found


# ------------------------------------------------------------------------------------------ the command


def report_lines(found: Plan) -> list[str]:
    """What the state and the journal hold, and what recovery does (or would do) about each."""
    lines = [f"stack {found.stack}:"]
    if not found.decisions:
        lines.append("  no pending create of a Together object in its state")
    for decision in found.decisions:
        pending = decision.pending
        lines.append(f"  pending create of {pending.kind} {pending.name}: {pending.urn}")
        lines.append(f"    inputs {pending.shown_inputs()}")
        for seen in decision.entries:
            lines.append("    " + _entry_line(seen))
        verb = _verb(decision)
        if decision.action == Action.CLEAR and found.left:
            verb += " after the next `pulumi up` (clearing it now would clear the others with it)"
        lines.append(f"    -> {verb}: {decision.why}")
    for seen in found.others:
        lines.append("  journal entry with no pending create: " + _entry_line(seen))
    return lines


def _entry_line(seen: Seen) -> str:
    entry = seen.entry
    live = ", in flight" if entry.state not in ENDED and seen.live() else ""
    sent = f", {len(entry.sends)} POST{'s' if len(entry.sends) != 1 else ''} sent" if entry.sends else ""
    return (
        f"journal entry {seen.name}: {entry.kind} {entry.state.value}{sent}{live}, id {entry.id or '-'}, "
        f"{entry.describe()}"
    )


def _verb(decision: Decision) -> str:
    if decision.action == Action.IMPORT:
        return f"import {decision.id}"
    return "clear it" if decision.action == Action.CLEAR else "leave it"


def run(
    stack: str,
    *,
    report: bool,
    force: bool = False,
    cwd: str | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """The ``recover`` command (see the module docstring): the exit status. ``cwd``: the project's folder, where
    the Pulumi CLI runs (default: here)."""
    from ..orphans.sources import stack_journals
    from ..orphans.states import _pulumi, export_stack  # how the package runs the Pulumi CLI

    out, err = out or sys.stdout, err or sys.stderr

    def say(line: str) -> None:
        out.write(printable(line, 2000) + "\n")
        out.flush()

    def warn(line: str) -> None:
        err.write(printable(line, 2000) + "\n")

    def pulumi(args: list[str], doing: str) -> str:
        return _pulumi(args, doing=doing, what="stack", ident=stack, cwd=cwd, run=subprocess.run)

    def read() -> tuple[StackState, Plan]:
        state = export_stack(stack, cwd=cwd, folder=cwd)
        return state, plan(state, _entries(journals, warn), _authoritative(journals))

    try:
        state = export_stack(stack, cwd=cwd, folder=cwd)
        journals = stack_journals(state, cwd)
        for line in _journal_lines(journals):
            say(line)
        found = plan(state, _entries(journals, warn), _authoritative(journals))
    except UserError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_OK if report else EXIT_FAILED
    for line in report_lines(found):
        say(line)
    if found.live and not report:
        # A lease is a promise of at most its length: a runner killed or thrown away a moment ago holds the
        # stack up that long, and one whose lease is renewed meanwhile is a run at work (refused below).
        try:
            if not journal.outlast(
                lambda: read()[1].live,
                lambda wait, live: say(
                    f"a create of the stack holds a live create journal lease ({live[0].entry.describe()}): "
                    f"waiting up to {format_elapsed(wait)} for it to end or run out"
                ),
            ):
                say("no create of the stack is live any more; read again:")
                state, found = read()  # the run may have ended meanwhile
                for line in report_lines(found):
                    say(line)
        except UserError as exc:
            err.write(f"error: {exc}\n")
            return EXIT_FAILED
    if found.live:
        refusal = refused(stack, found.live)
        if report:
            say(f"recover refuses while it runs: {refusal}")
            return EXIT_OK
        err.write(f"error: {refusal}\n")
        return EXIT_REFUSED
    if report:
        say(f"to recover once no run of the stack is at work: {messages.command(f'recover --stack {stack}')}")
        return EXIT_OK
    try:
        locks = stack_locks(state, cwd)
    except UserError as exc:
        if not force:
            err.write(f"error: {exc}\n")
            return EXIT_REFUSED
        locks = []
    busy = [lock for lock in locks if lock.here or lock.age < LOCK_YOUNG]
    if busy and not force:
        lock = busy[0]
        why = (
            "its process runs on this machine"
            if lock.here
            else f"it is younger than {format_elapsed(LOCK_YOUNG.total_seconds())}"
        )
        err.write(
            "error: "
            + str(
                UserError(
                    "recovering",
                    "stack",
                    stack,
                    f"its lock was {lock.describe()} and {why}, so its `pulumi up` may still be at work (nothing "
                    "was changed)",
                    "Let that run finish; if it is gone, run this command again with --force",
                )
            )
            + "\n"
        )
        return EXIT_REFUSED
    try:
        pulumi(["cancel", "--yes", "--stack", stack], "clearing the lock of")
        say("removed the stack's lock, if it had one (`pulumi cancel`): no create of it is live")
        for decision in found.decisions:
            if decision.reopen is not None:
                _note(decision.reopen, State.CREATED)
                say(
                    f"reopened journal entry {decision.reopen.name}: the next `pulumi up` takes {decision.id} over"
                )
            elif decision.mark is not None:
                _note(decision.mark)
        flags = found.refresh_args()
        if not flags:
            for decision in found.decisions:
                say(f"left the pending create of {decision.pending.name}: {decision.why}")
            return EXIT_OK
        pulumi(["refresh", "--yes", "--skip-preview", "--stack", stack, *flags], "recovering")
        after = export_stack(stack, cwd=cwd, folder=cwd)
    except UserError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    for line in outcome_lines(found, after):
        say(line)
    return EXIT_OK


def _journal_lines(journals: StackJournals) -> list[str]:
    lines = []
    for read in journals.read:
        used = " (the one its `pulumi up` writes to)" if read.url == journals.used.url else ""
        lines.append(read.describe() + used)
    if journals.note:
        lines.append(f"note: {journals.note}; its journalUrl, if it sets one, was not read")
    return lines


def _entries(journals: StackJournals, warn: Any) -> list[Seen]:
    """Every entry of every journal of the stack, each journal probed first (leases judged on its clock). Raises
    :class:`UserError` naming a journal that cannot be read."""
    found: list[Seen] = []
    for read in journals.read:
        where = location.printable(read.url) if read.url else "this machine's folder"
        try:
            opened = journal.at(read.url)
            opened.probe()
            found += opened.entries(warn=warn)
        except journal.Refused as exc:
            raise UserError(
                "recovering",
                "stack",
                None,
                f"its create journal in {where} ({' and '.join(read.sources)}) cannot be read: {exc.cause}",
                f"{exc.todo}; nothing was changed",
            ) from None
    return found


def _authoritative(journals: StackJournals) -> str | None:
    return location.printable(journals.used.url) if journals.used.url else None


RECOVERED = "recovered: "
"""How the note of an entry that ``recover`` dealt with begins: its take-over asks for no recovery again."""


def recovered(note: str | None) -> bool:
    """Whether an entry's note says ``recover`` cleared what its run left."""
    return bool(note) and str(note).startswith(RECOVERED)


def _note(seen: Seen, state: State | None = None) -> None:
    """Note on ``seen`` that its run's pending create and lock are cleared (and with ``state``, reopen a done
    entry whose answer the engine never got, so that the next ``pulumi up`` takes it)."""
    changes: dict[str, Any] = {} if state is None else {"state": state}
    why = "; reopened: the engine never got its answer" if state is not None else ""
    with leases.taken(seen) as held:
        if held is None:
            raise UserError(
                "recovering", "stack", None, f"journal entry {seen.name} is held by a running create",
                "Let that run finish, then run this command again",
            )  # fmt: skip
        held.release(
            f"{RECOVERED}its run's pending create and lock were cleared at {stamp(now())}{why}", **changes
        )


def outcome_lines(found: Plan, after: StackState) -> list[str]:
    """What the refresh did to each pending create, read from the state it left (``after``). An id the state
    now holds under its URN was imported, and its entry is marked done (the state is the record now); a pending
    create that went without its resource being recorded leaves its entry as it is: the next ``pulumi up`` takes
    the object over from the journal by that id."""
    recorded = {str(r.get("urn")): r.get("id") for r in after.resources if r.get("urn")}
    still = {p.urn for p in pending_creates(after)}
    lines = []
    for decision in found.decisions:
        name = decision.pending.name
        if decision.action == Action.IMPORT and recorded.get(decision.pending.urn) == decision.id:
            _settle(decision)
            lines.append(f"imported {decision.pending.kind} {decision.id} into the state as {name}")
        elif decision.action == Action.IMPORT and decision.pending.urn not in still:
            lines.append(
                f"cleared the pending create of {name}; the state does not hold {decision.id}, so the next "
                f"`pulumi up` takes it over from the create journal by that id"
            )
        elif decision.pending.urn not in still:
            lines.append(f"cleared the pending create of {name}: {decision.why}")
        elif decision.action == Action.CLEAR:
            lines.append(
                f"left the pending create of {name} ({decision.why}): `pulumi refresh --clear-pending-creates` "
                "would clear the others with it; run this command again after the next `pulumi up`"
            )
        else:
            lines.append(f"left the pending create of {name}: {decision.why}")
    return lines


def refused(stack: str, live: Sequence[Seen]) -> UserError:
    """The one sentence of a refusal: a create of the stack is live."""
    first = live[0]
    more = f" (and {len(live) - 1} more)" if len(live) > 1 else ""
    return UserError(
        "recovering",
        "stack",
        stack,
        f"a create of it is live: {first.entry.kind} of {first.entry.describe()}{more} holds its journal entry "
        f"{first.name}, so its `pulumi up` is still at work and the stack's lock is its own",
        "Let that run finish or stop it, then run this command again",
    )


def command(owner: str | None) -> str:
    """The recovery command for the stack of declaration ``owner`` (``org/project/stack/name``), as a user
    types it: the stack fully qualified when the organization is known, else its name (run in the project's
    folder)."""
    parsed = ours.parse_owner(owner)
    stack = "<stack>" if parsed is None else (parsed.stack_name if parsed.org else parsed.stack)
    return messages.command(f"recover --stack {shlex.quote(stack)}")


def after_take_over(owner: str | None) -> str:
    """What a take-over adds to its line: the run it took over from may have left a pending create."""
    return (
        "If that `pulumi up` ended before the answer (Ctrl-C twice, a kill), its state keeps a pending create of it: "
        f"once this update is done, `{command(owner)}` clears it (or `pulumi refresh --clear-pending-creates --yes`)"
    )


def after_killed_engine(owner: str | None, ident: str) -> str:
    """The note after taking over from a run whose ``pulumi`` was killed: what its engine left, and the command."""
    return (
        f"note: the `pulumi` command of the run that made {ident} was killed before it got the answer, so it may "
        f"have left the stack locked and a pending create in its state: once this update is done, `{command(owner)}` "
        "clears both (by hand: `pulumi cancel` clears the lock, then `pulumi refresh --clear-pending-creates` the "
        "pending create)"
    )


def _settle(decision: Decision) -> None:
    """The state holds the id now: its entry is done (the record that the id is claimed)."""
    for seen in decision.entries:
        fresh = seen.journal.read(seen.key) if seen.entry.id == decision.id else None
        if fresh is not None:
            with leases.taken(fresh) as held, contextlib.suppress(leases.LeaseLost):
                if held is not None:
                    held.release(state=State.DONE)
