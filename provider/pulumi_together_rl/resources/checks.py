"""What ``check`` judges the same way for every kind (each kind's own judgement is in its ``*_checks`` module).

A failure names the field and never echoes a value the user gave (an id is quoted by its first characters
only): it could be a secret pasted into the wrong field, and a preview can end up in a pull-request comment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from ..client import errors
from ..client.collections import Obj, Req
from ..client.models import Status
from . import deadline as rule
from . import process
from .inputs import Failure, answers_the_input, id_prefix, iso, refused_at_check
from .kind import Kind, Props

if TYPE_CHECKING:
    from ..client.api import TogetherRL


def adoptable(
    kind: Kind[Obj, Req],
    client: TogetherRL,
    adopt_id: str,
    inputs: Props,
    *,
    declared: Callable[[Obj], tuple[Props, list[Failure]]] | None = None,
) -> list[Failure]:
    """``adopt_id`` names an object of the kind that can be adopted, whose settings match the declared ones.

    ``declared(live)`` gives the inputs to compare with (and failures of its own), for a kind whose inputs are
    not all known at preview (a session on a model resource new in the same change)."""
    name, quoted = kind.name, id_prefix(adopt_id)
    request = f"GET {kind.path}/<adopt_id>"
    try:
        live = process.lookup(client, kind.collection, adopt_id)
    except errors.NotFound:
        return [Failure("adopt_id", f"no {name} {quoted} exists ({request} answered 404). Check adopt_id, or "
                                    "remove it to create a new one")]  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("adopt_id", request, exc, f"Check adopt_id (the id of an existing {name}), or "
                                 "remove it to create a new one")]  # fmt: skip
    if live.status not in kind.adoptable:
        return [Failure("adopt_id", f"{name} {quoted} is {live.status.short}: only a {name} that is "
                                    f"{_either(kind.adoptable)} can be adopted. Remove adopt_id to create a "
                                    "new one")]  # fmt: skip
    compared, failures = declared(live) if declared is not None else (inputs, [])
    if failures:
        return failures
    mismatched = [
        m.split(" (", 1)[0] for m in kind.differences(compared, live)
    ]  # field names only: no values
    if mismatched:
        verb = "differs" if len(mismatched) == 1 else "differ"
        return [Failure("adopt_id", f"{name} {quoted} was created with other settings: "
                                    f"{_listed(mismatched, 'and')} {verb}. Declare the inputs it was created "
                                    "with, or remove adopt_id to create a new one")]  # fmt: skip
    return []


def _either(statuses: Iterable[Status]) -> str:
    return _listed(sorted(s.short for s in statuses), "or")


def _listed(words: list[str], last: str) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def deadline(
    kind: str, subject: object, olds: Props, inputs: Props, *, hourly: tuple[float, str] | None = None
) -> list[Failure]:
    """``stop_after`` (its shape is the validated-inputs model's, :data:`.deadline.StopAfter`): when new or
    changed, a time is ahead of now and at most :data:`.deadline.MAX_AHEAD` ahead, and ``keep_ready_until`` does
    not reach past the deadline; then one line says when the object stops and, given its ``hourly`` price (a
    model resource's estimate: the number and its currency), the most it can cost until then. An unchanged
    deadline is not judged again: one that has passed is what the diff and ``reap`` act on."""
    declared = rule.parse(inputs.get(rule.INPUT))
    if declared is None:
        return []
    now = datetime.now(timezone.utc)
    at = rule.expected(inputs, now)
    assert at is not None
    moved = olds.get(rule.INPUT) != inputs.get(rule.INPUT)
    if moved and isinstance(declared, datetime):
        if at <= now:
            return [
                Failure(rule.INPUT, f"{rule.INPUT} has passed: a new deadline must be ahead. {rule.HINT}")
            ]
        if at - now > rule.MAX_AHEAD:
            return [
                Failure(
                    rule.INPUT, f"{rule.INPUT} is more than {rule.MAX_AHEAD.days} days ahead. {rule.HINT}"
                )
            ]
    keep = rule.parse(inputs.get("keep_ready_until"))
    if isinstance(keep, datetime) and keep > at:
        return [Failure("keep_ready_until", f"keep_ready_until ({iso(keep)}) reaches past the deadline, "
                        f"{rule.words(inputs)} ({iso(at)}): a keep holds the GPU READY that the deadline stops. "
                        "Choose a keep_ready_until no later than the deadline, or move stop_after")]  # fmt: skip
    if moved or not olds:
        counted = "from its creation" if isinstance(declared, timedelta) else "ahead"
        hours = (declared if isinstance(declared, timedelta) else at - now).total_seconds() / 3600
        cost = ""
        if hourly is not None:
            price, currency = hourly
            cost = f": at most {hours:.1f} h x {price:.2f} {currency}/h = {hours * price:.2f} {currency}"
        line = f"{kind} ({subject}): stops by {iso(at)} ({rule.words(inputs)}, {hours:.1f} h {counted}){cost}"
        process.log_once((kind, inputs.get("owner"), "deadline", inputs.get(rule.INPUT), cost), line)
    return []
