"""``python -m pulumi_together_rl recover --stack STACK [--report]``: what a killed ``pulumi up`` left, cleared.

A ``pulumi`` CLI that is killed (SIGKILL, a CI runner's hard cancel or GitHub's cancel sequence, a runner thrown
away) leaves two things in its stack's backend that only a person clears by hand: the stack's **lock**, and a
**pending create** (``deployment.pending_operations`` of type ``creating``: the URN, type and inputs the engine
wrote before it called the provider's Create; never the id, which the engine never got). The create journal may
hold what the engine lost: the id the API answered (:mod:`.journal`).

For one stack, this command reads both (``pulumi stack export``, and the journal entries of that stack's
declarations) and shows them. Then, unless ``--report`` (only the report: for a CI ``if: cancelled()`` step):

* **a create of the stack is live** (its entry is held: a ``pulumi up`` on this machine, or another runner whose
  lease is live): a lease is first waited for, at most as long as it has left (a runner killed or thrown away a
  moment ago holds the stack up that long, judged on the store's clock); one still live then (renewed: its run is
  at work), or a lock held on this machine, is refused, in one sentence naming whose it is, and nothing is
  changed: the stack's lock is that run's.
* otherwise it removes the stale lock (``pulumi cancel --yes``), and decides each pending create of a Together
  object on the evidence:

  - **the id is known** (one unfinished entry of that declaration holds it): ``pulumi refresh
    --import-pending-creates URN --import-pending-creates ID``. The pinned CLI (v3.274.1) turns the pending create
    into a pending import and drops it *without recording the resource* (checked through it:
    ``tests/e2e/test_cli_runners.py``), so the entry keeps the id and the next ``pulumi up`` takes the object over
    by it (no POST). A CLI that records it instead is seen in the state read back afterwards: the entry is then
    marked done, the state being the record of the id.
  - **provably made nothing** (its entries were written and never sent a POST), or **already recorded** (the
    state holds a resource of that URN: an ``up`` after the kill took it over): the pending create is dropped.
  - **ambiguous** (a POST was sent and no answer recorded; several ids; no journal entry at all): left as it is,
    with what the next ``pulumi up`` will do.

  The pending creates are rewritten with one ``pulumi refresh``: ``--import-pending-creates`` for the known ids
  (the one way the CLI drops a single pending create), and ``--clear-pending-creates`` (which drops every pending
  create it does not import) only when no ambiguous one must stay; otherwise the ones to drop stay too, and a later run of this command drops them once the next
  ``pulumi up`` has recorded their resources.

What it cannot see: an update of the stack that is running but not creating a Together object at this moment
(its lock is live and no journal entry shows it). Run it once the run it recovers from has ended.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from .. import ours
from ..messages import SECRET, UserError, format_elapsed, printable
from . import journal
from .stores import StoreError

if TYPE_CHECKING:  # the orphan finder's CLI plumbing is imported by the command only, not by a provider
    from ..orphans.states import StackState

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 4
"""A create of the stack is live: nothing was changed."""

SECRET_SIG = "4dabf18193072939515e22adb298388d"
"""The key Pulumi marks a secret value with in a state (``stack export`` shows it encrypted)."""


class Action(str, enum.Enum):
    """What happens to one pending create."""

    IMPORT = "import"
    """The journal holds its id: handed to ``--import-pending-creates`` (the pinned CLI drops the pending create
    without recording it; the next ``pulumi up`` takes the object over by that id)."""
    CLEAR = "clear"
    """Provably made nothing, or already recorded: dropped."""
    LEAVE = "leave"
    """Ambiguous: left for the next ``pulumi up``."""


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
    entries: list[journal.Entry]
    action: Action
    id: str | None
    why: str
    """The evidence, and for one that is left, what the next ``pulumi up`` does."""


@dataclasses.dataclass
class Plan:
    """What the state and the journal hold for one stack, and what recovery does about it."""

    stack: str
    decisions: list[Decision]
    others: list[journal.Entry]
    """Unfinished entries of the stack's declarations that no pending create names (the next ``pulumi up`` takes
    them over, or the orphan finder reports them)."""
    live: list[journal.Entry]
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


def plan(state: StackState, entries: Sequence[journal.Entry]) -> Plan:
    """Decide, from a stack's export and the journal's entries, what recovery does (see the module docstring)."""
    mine = [e for e in entries if _of_stack(state, e)]
    unfinished = [e for e in mine if e.state not in journal.ENDED]
    live = [e for e in mine if e.state != journal.State.DONE and e.in_flight()]
    recorded = {str(r.get("urn")): r.get("id") for r in state.resources if r.get("urn")}
    decisions: list[Decision] = []
    named: set[int] = set()
    for pending in pending_creates(state):
        of = [e for e in unfinished if _declares(e, pending)]
        named.update(id(e) for e in of)
        decisions.append(_decide(pending, of, recorded.get(pending.urn)))
    others = [e for e in unfinished if id(e) not in named]
    return Plan(state.label, decisions, others, live)


def _decide(pending: PendingCreate, entries: list[journal.Entry], recorded: Any) -> Decision:
    def decision(action: Action, why: str, ident: str | None = None) -> Decision:
        return Decision(pending, entries, action, ident, why)

    if recorded:
        return decision(Action.CLEAR, f"the state already holds {pending.name} as {recorded}: it is stale")
    ids = sorted({e.id for e in entries if e.id})
    if len(ids) == 1:
        return decision(Action.IMPORT, f"the create journal holds its id, {ids[0]}", ids[0])
    if len(ids) > 1:
        return decision(
            Action.LEAVE,
            f"the create journal holds {len(ids)} ids for it ({', '.join(ids)}), from several interrupted runs: "
            "the next `pulumi up` takes over the oldest that is still active, and the orphan finder reports the rest",
        )
    if any(e.sends for e in entries):
        return decision(
            Action.LEAVE,
            "its POST was sent and no answer was recorded: the next `pulumi up` takes over what it made only if "
            "it is the one object that matches within that POST's window, creates a new one if none does, and "
            "stops and names them if several do",
        )
    if entries:
        return decision(Action.CLEAR, "its create was stopped before its POST was sent: it made nothing")
    return decision(
        Action.LEAVE,
        "the create journal has no entry of it (the run may have used another machine's journal): the next "
        "`pulumi up` creates it anew, and the orphan finder reports anything that run made",
    )


def _of_stack(state: StackState, entry: journal.Entry) -> bool:
    owner = ours.parse_owner(entry.owner)
    return owner is not None and state.holds_declarations_of(owner, entry.backend)


def _declares(entry: journal.Entry, pending: PendingCreate) -> bool:
    owner = ours.parse_owner(entry.owner)
    return owner is not None and owner.name == pending.name and entry.kind == pending.kind


def _hide_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        if SECRET_SIG in value:
            return SECRET
        return {k: _hide_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide_secrets(v) for v in value]
    return value


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
        for entry in decision.entries:
            lines.append("    " + _entry_line(entry))
        verb = _verb(decision)
        if decision.action == Action.CLEAR and found.left:
            verb += " after the next `pulumi up` (clearing it now would clear the ambiguous ones with it)"
        lines.append(f"    -> {verb}: {decision.why}")
    for entry in found.others:
        lines.append("  journal entry with no pending create: " + _entry_line(entry))
    return lines


def _entry_line(entry: journal.Entry) -> str:
    live = ", in flight" if entry.in_flight() else ""
    sent = f", {len(entry.sends)} POST{'s' if len(entry.sends) != 1 else ''} sent" if entry.sends else ""
    return (
        f"journal entry {entry.path.stem}: {entry.kind} {entry.state.value}{sent}{live}, id {entry.id or '-'}, "
        f"{entry.describe()}"
    )


def _verb(decision: Decision) -> str:
    if decision.action == Action.IMPORT:
        return f"import {decision.id}"
    return "clear it" if decision.action == Action.CLEAR else "leave it"


def run(stack: str, *, report: bool, cwd: str | None = None, out: IO[str] | None = None,
        err: IO[str] | None = None) -> int:  # fmt: skip
    """The ``recover`` command (see the module docstring): the exit status. ``cwd``: the project's folder, where
    the Pulumi CLI runs (default: here); the journal is the one of the backend the CLI uses there."""
    from ..orphans.states import _pulumi, export_stack  # how the package runs the Pulumi CLI

    out, err = out or sys.stdout, err or sys.stderr

    def say(line: str) -> None:
        out.write(printable(line, 2000) + "\n")
        out.flush()

    def warn(line: str) -> None:
        err.write(printable(line, 2000) + "\n")

    def pulumi(args: list[str], doing: str) -> str:
        return _pulumi(args, doing=doing, what="stack", ident=stack, cwd=cwd, run=subprocess.run)

    try:
        state = export_stack(stack, cwd=cwd, folder=cwd)
        _learn_the_stores_clock()
        found = plan(state, journal.entries(warn=warn))
    except (UserError, journal.Refused) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_OK if report else EXIT_FAILED
    for line in report_lines(found):
        say(line)
    if found.live and not report:
        # A lease is a promise of at most its length: a runner killed or thrown away a moment ago holds the
        # stack up that long, and one whose lease is renewed meanwhile is a run at work (refused below).
        try:
            if not journal.outlast(
                lambda: plan(state, journal.entries(warn=warn)).live,
                lambda wait, live: say(
                    f"a create of the stack holds a live create journal lease ({live[0].describe()}): waiting "
                    f"up to {format_elapsed(wait)} for it to end or run out"
                ),
            ):
                say("no create of the stack is live any more; read again:")
                state = export_stack(stack, cwd=cwd, folder=cwd)  # the run may have ended meanwhile
                found = plan(state, journal.entries(warn=warn))
                for line in report_lines(found):
                    say(line)
        except (UserError, journal.Refused) as exc:
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
        say(
            f"to recover once no run of the stack is at work: python -m pulumi_together_rl recover --stack {stack}"
        )
        return EXIT_OK
    try:
        pulumi(["cancel", "--yes", "--stack", stack], "clearing the lock of")
        say("removed the stack's lock, if it had one (`pulumi cancel`): no create of it is live")
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


def _learn_the_stores_clock() -> None:
    """A shared journal's leases are judged on its store's clock, learnt from a probe write: a reader that
    writes nothing judges them on this machine's clock with two minutes more (:data:`.shared.UNPROBED_SKEW`),
    so a runner killed a moment ago would hold recovery up that much longer than its lease."""
    shared_journal = journal.current()
    if shared_journal is None:
        return
    try:
        shared_journal.verify()
    except StoreError as exc:
        raise journal.Unreachable(exc) from exc


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
                "would clear the ambiguous ones with it; run this command again after the next `pulumi up`"
            )
        else:
            lines.append(f"left the pending create of {name}: {decision.why}")
    return lines


def refused(stack: str, live: Sequence[journal.Entry]) -> UserError:
    """The one sentence of a refusal: a create of the stack is live."""
    first = live[0]
    more = f" (and {len(live) - 1} more)" if len(live) > 1 else ""
    return UserError(
        "recovering",
        "stack",
        stack,
        f"a create of it is live: {first.kind} of {first.describe()}{more} holds its journal entry "
        f"{first.path.stem}, so its `pulumi up` is still at work and the stack's lock is its own",
        "Let that run finish or stop it, then run this command again",
    )


def command(owner: str | None) -> str:
    """The recovery command for the stack of declaration ``owner`` (``org/project/stack/name``), as a user
    types it: the stack fully qualified when the organization is known, else its name (run in the project's
    folder)."""
    parsed = ours.parse_owner(owner)
    stack = "<stack>" if parsed is None else (parsed.stack_name if parsed.org else parsed.stack)
    return f"python -m pulumi_together_rl recover --stack {shlex.quote(stack)}"


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
    for entry in decision.entries:
        if entry.id == decision.id and entry.claim():
            entry.done()
