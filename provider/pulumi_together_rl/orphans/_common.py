"""Shared by the orphan finder's modules: kinds, exit statuses, the one-sentence error, small helpers."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .. import messages
from ..client import errors
from ..client.models import (
    ModelResource,
    TrainingSession,
)
from ..messages import UserError

#: Exit statuses of the command (2 is argparse's own, for usage errors such as --none with a stack state).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ORPHANS_FOUND = 3
EXIT_REFUSED = 4
"""``--stop`` refused to act, so nothing was stopped: no terminal to confirm on and no ``--yes``, or no state read
holds any Together object (every active object would look orphaned)."""

#: How long ``--stop`` waits, by default, for stopping orphan sessions to end before stopping their resource.
DEFAULT_STOP_TIMEOUT = 600.0
#: How long one ``pulumi`` CLI command may take.
PULUMI_TIMEOUT = 300.0
#: ``--min-age`` by default, in minutes: ``--stop`` leaves younger orphans running. A ``pulumi up`` on another
#: machine records what it creates only when the create returns, and a model resource's create waits for READY
#: for up to its ``create_timeout`` (3600 s by default: a capacity queue can be long) before it returns or
#: stops what it made; 30 more minutes cover the state write, a create retried by its next run, and clocks
#: that disagree.
DEFAULT_MIN_AGE_MINUTES = 90.0
#: How many ``pulumi`` commands (exports, config reads) run at once.
PULUMI_PARALLEL = 4

NONE_WITH_SOURCES = (
    "finding orphans: --none says no stack holds anything, which contradicts the stack states also asked for. "
    "Pass either --none or --state/--stack/--all-stacks."
)


OrphanError = UserError
"""The orphan finder's errors are the project's one sentence (:class:`~..messages.UserError`)."""


def _short(status: Any) -> str:
    short = getattr(status, "short", None)
    return str(short if short is not None else status)


def _oldest_first(obj: ModelResource | TrainingSession) -> tuple[datetime, str]:
    return _aware(obj.created_at), obj.id


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def format_age(seconds: float) -> str:
    """``<1 min``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 1:
        return "<1 min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def explain(exc: BaseException, key: str | None = None) -> tuple[str, str]:
    """(cause, what to do) of a client error, for an operator running this command; ``key`` names where the
    key came from (``stack dev's together:apiKey``), for the error that blames it."""
    return messages.explain(exc, audience=messages.operator(key))


def _http(exc: errors.TogetherError) -> str:
    status = getattr(exc, "status", None)
    message = getattr(exc, "message", None) or str(exc)
    return f"HTTP {status}: {message}" if status else message
