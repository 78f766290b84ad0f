"""Deadlines kept when nobody runs a command: ``python -m pulumi_together_rl reap`` (``docs/cost.md``).

A declared deadline (``stop_after``, :mod:`..resources.deadline`) is kept by ``pulumi up``; between two runs an
object past it keeps billing. ``reap`` reads the stack states the way the orphan finder does (every stack of the
logged-in backend by default: :func:`.sources.gather`), finds each object a state holds whose ``stop_at`` has
passed on the API's clock, and stops it with the finder's stopper (:func:`.stopper.stop_orphans`: sessions
first, then model resources, never with ``force``). This module finds and decides; :mod:`.reap_command` is the
command.

The proof rules are the finder's, turned around: an object is stopped only when

* a stack state read holds its id, with a ``stop_at`` that has passed and no ``stop_reason`` yet (a look-alike
  no state holds is never even looked at);
* the API that stack deploys to answers that id with an object still active (an ended one needs nothing);
* no live create may hold it: no entry of a create journal read records its id (or made it in its POST window)
  while a running process or a live lease holds that entry (:func:`.finder.journal_labels`, the finder's);
* no pending operation of its stack names it (an update of that stack is running, or was killed);
* no other stack read holds the same id with no deadline or one still ahead (the stricter stack wins);
* a model resource: every active training session on it is stopped by this same run (its own deadline has
  passed too). Otherwise the API would refuse the stop without ``force``, and those sessions are somebody's
  work: the resource is left running and said so. ``reap`` never forces, even where the state declares
  ``force_stop``: the next ``pulumi up`` stops it with force.

``reap`` writes no state: the stack's next ``pulumi up`` sees the deadline passed and records the object as
stopped at it (an update that calls nothing but a stop the API answers "already stopped"), and a refresh keeps it
in the state with ``stop_reason: deadline``; neither re-creates it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from .. import ours
from ..ours import MODEL_RESOURCE, TRAINING_SESSION
from ..resources import deadline
from ..resources.keys import snake
from ._common import _aware, _is_id, _short, format_age
from .finder import Orphan
from .states import StackState

AHEAD = "ahead"
STOPPED_AT_DEADLINE = "stopped_at_deadline"
ENDED = "ended"
IN_FLIGHT = "in_flight"
PENDING = "pending"
HELD_ELSEWHERE = "held_elsewhere"
HELD_SESSIONS = "held_sessions"
NOT_CHECKED = "not_checked"


@dataclasses.dataclass
class Due:
    """An object a stack state holds with a declared deadline, and what ``reap`` does with it."""

    state: StackState
    kind: str
    """:data:`MODEL_RESOURCE` or :data:`TRAINING_SESSION`."""
    id: str
    name: str
    """The resource's name in its stack (the last part of its URN)."""
    urn: str
    stop_at: datetime
    words: str
    """The declared deadline as a line names it: ``stop_after 8h``."""
    stopped_at_deadline: bool = False
    """The state says it was stopped at its deadline already (``stop_reason: deadline``)."""
    live: Orphan | None = None
    """The object as its API answered it, in the shape the finder's stopper and journal labels take; None:
    not found, or not asked (no key for its API)."""
    live_status: str | None = None
    """The short status its API answered; None: 404 (or not asked)."""
    attached: list[str] = dataclasses.field(default_factory=list)
    """Model resources: the active training sessions on it."""
    unchecked: str | None = None
    """Why its API was not asked (no key for it, or the request failed); None: it was."""
    stop: bool = False
    held_back: str | None = None
    """Why it is not stopped (:data:`AHEAD`, :data:`IN_FLIGHT`, ...); None when it is."""
    why: str = ""

    @property
    def label(self) -> str:
        """``model resource gpu (mr-1)``."""
        return f"{self.kind} {self.name} ({self.id})"

    @property
    def deadline(self) -> str:
        """``stop_after 8h (2026-12-07T20:00:00Z)``; a time once: ``stop_after 2026-12-07T20:00:00Z``."""
        stamp = _stamp(self.stop_at)
        return self.words if self.words.endswith(stamp) else f"{self.words} ({stamp})"


def props_of(resource: Mapping[str, Any]) -> dict[str, Any]:
    """A state resource's outputs in the core's names (the plugin face writes ``stopAt``, the dynamic face
    ``stop_at``)."""
    outputs = resource.get("outputs")
    return {snake(k): v for k, v in (outputs if isinstance(outputs, Mapping) else {}).items()}


def deadlines(states: Iterable[StackState]) -> list[Due]:
    """Every object the states hold with a declared deadline (its ``stop_at``), in state order. Only ids a
    state holds: nothing else is ever a candidate."""
    found: list[Due] = []
    for state in states:
        for resource in state.resources:
            kind = ours.kind_of(str(resource.get("type", "")))
            ident = resource.get("id")
            if kind is None or not isinstance(ident, str) or not _is_id(ident):
                continue
            props = props_of(resource)
            at = deadline.recorded(props)
            if at is None:
                continue
            urn = str(resource.get("urn") or "")
            found.append(
                Due(
                    state=state,
                    kind=kind,
                    id=ident,
                    name=urn.rsplit("::", 1)[-1] if "::" in urn else ident,
                    urn=urn,
                    stop_at=at,
                    words=deadline.words(props) if props.get(deadline.INPUT) else "stop_after",
                    stopped_at_deadline=deadline.stopped_at(props),
                )
            )
    return found


def decide(dues: Sequence[Due], states: Sequence[StackState], now: datetime) -> None:
    """Set each one's ``stop``, ``held_back`` and ``why`` (the module docstring's rules, in that order); ``now``
    is the API's clock. Each ``live`` must carry the journal's word on it already (:func:`.finder.journal_labels`)."""
    kept: dict[str, list[str]] = {}  # id -> stacks that hold it with no deadline, or one still ahead
    for state in states:
        for resource in state.resources:
            ident = resource.get("id")
            # A `.get()` (external) reads the object; it does not own it, so it decides nothing.
            if not isinstance(ident, str) or not ident or resource.get("external"):
                continue
            props = props_of(resource)
            if deadline.passed(props, now) is None:
                at = props.get(deadline.STOP_AT)
                kept.setdefault(ident, []).append(
                    f"{state.title} (its deadline {at} is ahead)" if at else f"{state.title} (no deadline)"
                )
    for due in sorted(dues, key=lambda d: d.kind != TRAINING_SESSION):  # sessions first: resources need them
        due.stop, due.held_back = False, None
        if due.stopped_at_deadline:
            _hold(due, STOPPED_AT_DEADLINE, "the state says it was stopped at its deadline: nothing to do")
        elif due.stop_at > now:
            _hold(due, AHEAD, f"its deadline is ahead (in {format_age((due.stop_at - now).total_seconds())})")
        elif due.unchecked:
            _hold(due, NOT_CHECKED, due.unchecked)
        elif due.live is None:
            _hold(
                due,
                ENDED,
                f"its deadline has passed and it is {due.live_status or 'gone (404)'}: nothing to stop "
                "(the next `pulumi up` or refresh records it, stopped)",
            )
        elif due.live.journal == "in_flight":
            _hold(
                due,
                IN_FLIGHT,
                f"a live create may hold it: {due.live.journal_label}; run reap again once it ends",
            )
        elif due.urn and any(p.urn == due.urn for p in due.state.pending):
            cancel, refresh, where = due.state.clear_commands()
            _hold(
                due,
                PENDING,
                f"{due.state.title} has a pending operation on it (an update of that stack is running, or one was "
                f"killed): run reap again once it ends, or clear it (`{cancel}`, then `{refresh}`{where})",
            )
        elif kept.get(due.id):
            _hold(
                due,
                HELD_ELSEWHERE,
                f"another stack holds it too: {', '.join(kept[due.id])}; that stack decides when it stops",
            )
        else:
            blocking = _blocking(due, dues)
            if blocking:
                _hold(
                    due,
                    HELD_SESSIONS,
                    f"training sessions whose deadline has not passed run on it ({', '.join(blocking)}), and reap "
                    "never forces a stop: give them a stop_after no later than its, or stop them; reap stops it "
                    "once they have ended",
                )
            else:
                due.stop, due.why = True, f"its deadline has passed and it is {due.live_status}"


def _blocking(due: Due, dues: Sequence[Due]) -> list[str]:
    if due.kind != MODEL_RESOURCE:
        return []
    stopping = {d.id for d in dues if d.kind == TRAINING_SESSION and d.stop}
    return [ident for ident in due.attached if ident not in stopping]


def _hold(due: Due, code: str, why: str) -> None:
    due.stop, due.held_back, due.why = False, code, why


def live_record(kind: str, obj: Any, base_url: str) -> Orphan:
    """An object its API answered, as the finder's stopper and journal labels take it."""
    return Orphan(
        kind=kind,
        id=obj.id,
        status=_short(obj.status),
        created_at=_aware(obj.created_at),
        base_model=getattr(obj, "base_model", None),
        model_resources_id=getattr(obj, "model_resources_id", None),
        api=base_url,
    )


def line(due: Due) -> str:
    """The dry run's sentence for one object: the stack, the object, the deadline, what ``--stop`` does."""
    verb = "--stop stops it" if due.stop else "--stop leaves it"
    return f"{due.state.title}: {due.label}, {due.deadline}: {verb}: {due.why}."


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
