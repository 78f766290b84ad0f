"""A declared deadline, ``stop_after``, the same for every kind and face: this object must not run past this
moment. What it means, what the state records of it, and when one has passed; the lifecycle
(:mod:`.lifecycle`) acts on it, the checks bound it, ``reap`` (:mod:`..orphans.reap`) keeps it when nobody runs a
command.

* ``stop_after`` is a duration counted from the object's creation (``"8h"``, ``"90m"``, ``"1d12h"``, the API's
  ``created_at``) or an RFC 3339 time with its zone (``"2026-12-24T18:00:00Z"``). A duration is at least
  :data:`MIN_DURATION` and at most :data:`MAX_AHEAD`; a time is ahead of now (when declared or changed) and at
  most :data:`MAX_AHEAD` ahead.
* The state records the moment as ``stop_at`` (an RFC 3339 time, from the inputs and ``created_at``: the same
  on every read), and ``stop_reason`` = :data:`REASON` once the object was stopped at it.
* Past it, an object stays stopped: a refresh keeps it in the state (it is not "gone", so the next ``up`` does not
  re-create it), an ``up`` stops one still running (an update: the preview shows it), and moving the deadline of
  one that has passed replaces it (a new object, with the new deadline). While it is ahead, moving it is an
  update in place: a running training is not replaced to give it more time.
* Which clock: the API's where the API is asked anyway (a create's wait, a refresh, ``reap``: the Date header of
  its answers, :func:`.process.api_now`), this machine's in a diff (no request at all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, Strict, StringConstraints

from .inputs import NO_CONTROL_CHARACTERS, is_unknown, iso

INPUT = "stop_after"
"""The input, in every kind's ``update_in_place`` (:func:`.lifecycle.diff` makes a move of a passed one a
replacement)."""
STOP_AT = "stop_at"
"""The output: the deadline as a moment."""
STOP_REASON = "stop_reason"
"""The output set when the object was stopped at its deadline (:data:`REASON`)."""
OUTPUTS = (STOP_AT, STOP_REASON)
REASON = "deadline"
"""``stop_reason`` of an object stopped at its deadline (by an ``up``, a create's wait, a refresh that found it
stopped past it, or ``reap``)."""

MIN_DURATION = timedelta(minutes=1)
"""The shortest duration: less is more likely a missing unit than a plan."""
MAX_AHEAD = timedelta(days=30)
"""The furthest a deadline may reach (a duration, or a time from now): the bound ``keep_ready_until`` has too.
A deadline further out keeps no promise worth checking; a longer run moves it once it draws near."""

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
HINT = (
    'Use a duration from the object\'s creation such as "8h", "90m" or "1d12h" (d, h, m, s; at least '
    f"{MIN_DURATION.seconds // 60} minute, at most {MAX_AHEAD.days} days), or an RFC 3339 time with its zone such "
    f'as "2026-12-24T18:00:00Z" (at most {MAX_AHEAD.days} days ahead), or leave stop_after unset for no deadline'
)


def parse(value: object) -> timedelta | datetime | None:
    """``stop_after`` as a duration or an aware moment; None when unset, unknown or not one of them."""
    if not isinstance(value, str) or not value or is_unknown(value):
        return None
    found = _DURATION.match(value)
    if found and any(found.groups()):
        days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
        if max(days, hours, minutes, seconds) > 10**6:  # timedelta's own bound is ~2.7 million days
            return timedelta.max
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def validate(value: str) -> str:
    """The shape and bounds a deadline has whenever it is declared (pydantic's ``AfterValidator``): a
    duration within its bounds, or a time with its zone. How far ahead a time is, is judged by :func:`ahead`."""
    parsed = parse(value)
    if parsed is None:
        raise ValueError("must be a duration such as 8h or 90m, or an RFC 3339 time with its zone")
    if isinstance(parsed, timedelta) and not MIN_DURATION <= parsed <= MAX_AHEAD:
        raise ValueError(
            f"must be at least {MIN_DURATION.seconds // 60} minute and at most {MAX_AHEAD.days} days"
        )
    return value  # echoed as declared: the state compares like with like


StopAfter = Annotated[
    str, Strict(), StringConstraints(max_length=64), NO_CONTROL_CHARACTERS, AfterValidator(validate)
]
"""``stop_after`` in a kind's validated-inputs model."""


def moment(inputs: Mapping[str, Any], created_at: object) -> datetime | None:
    """The deadline of an object declared with ``inputs`` and created at ``created_at`` (an RFC 3339 string or a
    datetime); None: no deadline, or a duration before the object exists."""
    declared = parse(inputs.get(INPUT))
    if isinstance(declared, datetime):
        return declared.astimezone(timezone.utc)
    if declared is None:
        return None
    created = created_at if isinstance(created_at, datetime) else _time(created_at)
    if created is None:
        return None
    try:
        return (created + declared).astimezone(timezone.utc)
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)


def expected(inputs: Mapping[str, Any], now: datetime) -> datetime | None:
    """The deadline an object declared now would get (a duration counted from ``now``): for a check."""
    return moment(inputs, now)


def outputs(inputs: Mapping[str, Any], created_at: object, stopped: bool = False) -> dict[str, Any]:
    """The state's :data:`OUTPUTS` for an object declared with ``inputs``: ``stop_at``, and ``stop_reason``
    when ``stopped`` at it. Empty without a deadline."""
    at = moment(inputs, created_at)
    if at is None:
        return {}
    return {STOP_AT: iso(at), **({STOP_REASON: REASON} if stopped else {})}


def recorded(props: Mapping[str, Any]) -> datetime | None:
    """The state's deadline (``stop_at``); None: none."""
    return _time(props.get(STOP_AT))


def passed(props: Mapping[str, Any], now: datetime) -> datetime | None:
    """The state's deadline (``stop_at``) when it is at or before ``now``; None: none, or ahead."""
    at = _time(props.get(STOP_AT))
    return at if at is not None and at <= now else None


def stopped_at(props: Mapping[str, Any]) -> bool:
    """Whether the state says its object was stopped at its deadline."""
    return props.get(STOP_REASON) == REASON


def due(props: Mapping[str, Any], now: datetime, ended: Iterable[str]) -> datetime | None:
    """The deadline of a state whose object it says is still running past it (``status`` not one of the short
    names in ``ended``): what an ``up`` stops. None: nothing due."""
    at = passed(props, now)
    if at is None or stopped_at(props) or props.get("status") in set(ended):
        return None
    return at


def words(inputs: Mapping[str, Any]) -> str:
    """How a line names the declared deadline: ``stop_after 8h`` / ``stop_after 2026-12-24T18:00:00Z``."""
    return f"stop_after {inputs.get(INPUT)}"


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def now() -> datetime:
    """This machine's clock, for a diff (no request is made there)."""
    return datetime.now(timezone.utc)
