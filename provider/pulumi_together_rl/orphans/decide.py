"""What ``--stop`` does with each orphan, and why: the ownership rule applied to what was found.

An orphan is stopped only with proof that it is safe to: no state read holds it (that is what made it an
orphan) *and* nobody is creating it. "Nobody is creating it" has no direct proof from outside, so each hint that
someone may be holds it back, the strongest first:

1. ``in_flight``: a running process on this machine holds its journal entry, or a create on any machine holds
   a live lease on it in a shared journal (with its id, or, with none yet, a POST whose window it was made in):
   a create in flight. Never stopped.
   ``journal_window``: no entry records its id, but it was made in the POST window of an interrupted create (of
   any stack, on any machine) that got no id, younger than a day: the next ``pulumi up`` of that declaration
   takes a unique look-alike of that window over. Never stopped (an older entry is no create's any more).
2. ``pending_create``: a state read has a pending create of the same kind (an update of that stack is running,
   or one was killed before its state recorded the object): it may be that create's. ``--ignore-pending-creates``
   stops it anyway.
   ``interrupted_create``: an unfinished entry (of any stack, on any machine) records its id, younger than a day:
   the next ``pulumi up`` of that declaration takes it over by that id (after ``recover`` where the engine left a
   lock). Never stopped while that holds; a day on, no create takes it over any more and it is stopped like any
   orphan the journal says an interrupted ``pulumi up`` left (or at once, once ``journal prune`` drops the entry
   of a stack that is gone).
3. ``owner_not_read``: its journal entry names a stack that was not read: that stack may hold it.
   ``--ignore-journal-owner`` stops it anyway (for a stack that is gone).
4. ``held_sessions``: a model resource that training sessions a stack holds run on: the API refuses to stop it
   while they run (and they are somebody's work), so it is not tried.
5. ``too_young``: younger than ``--min-age``: a ``pulumi up`` elsewhere may be creating it (its state records it
   only when the create returns). Not for an object the journal says an interrupted create left: nobody is
   creating that one any more. ``--min-age 0`` stops it anyway.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from .. import ours
from ..messages import command
from ..ownership import journal
from ._common import format_age
from .finder import Orphan
from .states import StackState

IN_FLIGHT = "in_flight"
JOURNAL_WINDOW = "journal_window"
INTERRUPTED_CREATE = "interrupted_create"
PENDING_CREATE = "pending_create"
OWNER_NOT_READ = "owner_not_read"
HELD_SESSIONS = "held_sessions"
TOO_YOUNG = "too_young"


@dataclasses.dataclass(frozen=True)
class Rules:
    min_age: float
    """Seconds: younger orphans are left running, unless an interrupted create left them."""
    ignore_pending_creates: bool = False
    ignore_journal_owner: bool = False
    none: bool = False
    """``--none``: no stack holds anything, on purpose (so no stack can own anything either)."""


def decide(
    orphans: Iterable[Orphan], states: Sequence[StackState], rules: Rules, now: datetime | None = None
) -> None:
    """Set each orphan's ``stop``, ``held_back``, ``why`` and ``young``."""
    moment = now or datetime.now(timezone.utc)
    pending: dict[str, list[tuple[StackState, str]]] = {}
    for state in states:
        for operation in state.pending_creates:
            if operation.kind:
                pending.setdefault(operation.kind, []).append((state, operation.name))
    for orphan in orphans:
        age = orphan.age(moment)
        interrupted = orphan.journal == "interrupted"
        orphan.young = age < rules.min_age and not interrupted
        creates = pending.get(orphan.kind, [])
        orphan.pending_creates = [f"{state.title}: {name}" for state, name in creates]
        owner = ours.parse_owner(orphan.journal_owner)
        if orphan.journal == "in_flight":
            who = (
                f"a running create (its lease in {orphan.journal_where} is live)"
                if orphan.journal_where
                else "a running process on this machine"
            )
            _hold(
                orphan, IN_FLIGHT, f"{who} is creating it, so its stack will hold it once that create returns"
            )
        elif orphan.journal == "window":
            _hold(
                orphan,
                JOURNAL_WINDOW,
                f"an interrupted create of {orphan.journal_owner or 'an unknown declaration'} got no answer to a "
                "POST sent when it was made, so it may be that create's, which the next `pulumi up` of that stack "
                "takes over; run that `pulumi up`, or stop it by hand if you know it is not",
            )
        elif creates and not rules.ignore_pending_creates:
            which = "; ".join(
                f"the pending create of {name} in {state.title} (cleared by `{refresh}`{where})"
                for state, name in creates
                for _, refresh, where in [state.clear_commands()]
            )
            _hold(
                orphan,
                PENDING_CREATE,
                f"it may be what a pending create is making: {which}; --ignore-pending-creates stops it anyway",
            )
        elif (
            interrupted
            and orphan.interrupted_at is not None
            and moment - orphan.interrupted_at < journal.MAX_AGE
        ):
            _hold(
                orphan,
                INTERRUPTED_CREATE,
                f"an interrupted create of {orphan.journal_owner or 'an unknown declaration'} recorded its id, and "
                "the next `pulumi up` of that stack takes it over by it: run that `pulumi up` "
                f"(`{command('recover --stack <stack>')}` first if the stack is locked); if that stack is gone, drop "
                f"the entry (`{command('journal prune <entry>')}`) and it is an orphan like any other",
            )
        elif (
            owner is not None
            and not rules.none
            and not rules.ignore_journal_owner
            and not any(state.holds_declarations_of(owner, orphan.journal_backend) for state in states)
        ):
            where = (
                f" in backend {orphan.journal_backend_location}" if orphan.journal_backend_location else ""
            )
            _hold(
                orphan,
                OWNER_NOT_READ,
                f"its journal entry names stack {owner.stack_name}{where}, which was not read and may hold it; read "
                "that stack too, or pass --ignore-journal-owner if it is gone",
            )
        elif orphan.held_sessions:
            _hold(
                orphan,
                HELD_SESSIONS,
                f"training sessions a stack holds run on it ({', '.join(orphan.held_sessions)}): stop or destroy "
                "them where they are managed first",
            )
        elif orphan.young:
            _hold(
                orphan,
                TOO_YOUNG,
                f"it is {format_age(age)} old, younger than --min-age ({format_age(rules.min_age)}): a `pulumi up` "
                "elsewhere may be creating it; --min-age 0 stops it anyway",
            )
        else:
            orphan.stop, orphan.held_back = True, None
            held = "--none says no stack holds anything" if rules.none else "no state read holds it"
            if interrupted:
                orphan.why = f"{held}, and the journal says an interrupted pulumi up left it"
            elif rules.min_age > 0:
                orphan.why = f"{held}, and it is older than --min-age ({format_age(rules.min_age)})"
            else:
                orphan.why = f"{held} (--min-age 0)"


def _hold(orphan: Orphan, code: str, why: str) -> None:
    orphan.stop, orphan.held_back, orphan.why = False, code, why
