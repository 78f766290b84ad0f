"""Stopping orphans: sessions first, then model resources, never with force."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from .. import config, stopping
from ..client import errors
from ..client.api import TogetherRL
from ..client.collections import MODEL_RESOURCES, TRAINING_SESSIONS, Collection, Obj, Req
from ..client.models import (
    LIVE_SESSION_STATUSES,
    SESSION_HOLDS_SLOT,
    TrainingSession,
)
from ..messages import WaitFailed, WaitTimeout, format_elapsed
from ..ours import MODEL_RESOURCE, TRAINING_SESSION
from ..waiting import wait_for
from ._common import (
    DEFAULT_STOP_TIMEOUT,
    OrphanError,
    _http,
    _short,
    explain,
)
from .finder import Orphan

# --------------------------------------------------------------------------------------------- stopping

STOP_WINDOW = 60.0
"""Seconds one stop keeps trying through an outage (429, 5xx, no answer) before it is reported as failed."""


@dataclasses.dataclass
class StopResult:
    orphan: Orphan
    stopped: bool
    message: str
    """One sentence: what happened (``stopped ...``) or the error, in the project's grammar."""


def stop_orphans(
    client: TogetherRL,
    orphans: Sequence[Orphan],
    *,
    timeout: float = DEFAULT_STOP_TIMEOUT,
    poll_interval: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    out: IO[str] | None = None,
) -> list[StopResult]:
    """Stop ``orphans``: training sessions first, then model resources, never with ``force``.

    A model resource the API refuses to stop is looked at: when the sessions attached to it are all ending
    (the orphans just stopped), the stop waits for them (up to ``timeout`` seconds, progress lines on ``out``)
    and is sent again; when one is still CREATING or RUNNING (held by a stack, or another user's), it is
    reported and left running. A failure never stops the others from being tried. Results are in stop order.
    """
    interval = poll_interval if poll_interval is not None else config.current().poll_interval
    results: list[StopResult] = []
    for orphan in (o for o in orphans if o.kind == TRAINING_SESSION):
        results.append(_stop_session(client, orphan))
    orphan_sessions = {o.id for o in orphans if o.kind == TRAINING_SESSION}
    for orphan in (o for o in orphans if o.kind == MODEL_RESOURCE):
        results.append(_stop_resource(client, orphan, orphan_sessions, timeout, interval, sleep, clock, out))
    return results


def _stop_session(client: TogetherRL, orphan: Orphan) -> StopResult:
    try:
        outcome = _stop(TRAINING_SESSIONS, client, orphan.id)
    except errors.TogetherError as exc:
        cause, todo = explain(exc)
        return StopResult(
            orphan, False, str(OrphanError("stopping", TRAINING_SESSION, orphan.id, cause, todo))
        )
    if outcome.outcome == stopping.REFUSED:
        assert outcome.error is not None
        cause, todo = explain(outcome.error)
        return StopResult(
            orphan, False, str(OrphanError("stopping", TRAINING_SESSION, orphan.id, cause, todo))
        )
    return StopResult(orphan, True, _stopped(TRAINING_SESSION, orphan.id, outcome))


def _stop(collection: Collection[Obj, Req], client: TogetherRL, ident: str) -> stopping.Stop[Obj]:
    """The one stop (:func:`..stopping.stop`): an outage is tried through for a minute, a refusal judged by the
    object's state."""
    return stopping.stop(
        collection, client, ident, window=STOP_WINDOW, limit="the orphan finder tries for 1 min"
    )


def _stopped(kind: str, ident: str, outcome: stopping.Stop[Any]) -> str:
    if outcome.outcome == stopping.ENDED or outcome.error is not None:
        state = "gone" if outcome.last is None else _short(outcome.last.status)
        return f"{kind} {ident} was already {state}"
    assert outcome.last is not None  # an accepted stop: its answer
    return f"stopped {kind} {ident} (now {_short(outcome.last.status)})"


def _stop_resource(
    client: TogetherRL,
    orphan: Orphan,
    orphan_sessions: set[str],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    out: IO[str] | None,
) -> StopResult:
    ident = orphan.id
    for attempt in range(2):  # the second only after waiting for the attached sessions to end
        try:
            outcome = _stop(MODEL_RESOURCES, client, ident)
        except errors.TogetherError as exc:
            cause, todo = explain(exc)
            return _refused(orphan, cause, todo)
        if outcome.outcome != stopping.REFUSED:
            return StopResult(orphan, True, _stopped(MODEL_RESOURCE, ident, outcome))
        assert outcome.error is not None  # a refusal is what makes the outcome REFUSED
        failure = outcome.error
        if attempt:
            break
        try:
            attached = _attached(client, ident)
        except errors.TogetherError as exc:
            cause, todo = explain(exc)
            refusal = f"the API refused the stop ({_http(failure)}), and listing its sessions failed: {cause}"
            return _refused(orphan, refusal, todo)
        if not attached:
            break
        blocking = [s.id for s in attached if s.status in LIVE_SESSION_STATUSES]
        unstopped = [i for i in blocking if i in orphan_sessions]  # orphans whose own stop failed above
        if unstopped:
            return _refused(
                orphan,
                "the API refused to stop it because orphan training sessions whose stop failed are still "
                f"attached: {', '.join(unstopped)}",
                "Fix what stopped those (see their errors), then run again; it was left running",
            )
        if blocking:
            return _refused(
                orphan,
                "the API refused to stop it because training sessions that are not orphans are attached: "
                f"{', '.join(blocking)} (a given stack holds them, or another user made them)",
                "Stop or destroy those sessions where they are managed, then run again; it was left running",
            )
        try:
            wait_for(
                lambda: _attached(client, ident),
                done=lambda sessions: not sessions,
                failed=lambda sessions: any(s.status in LIVE_SESSION_STATUSES for s in sessions or ()),
                describe=lambda sessions: (
                    f"{MODEL_RESOURCE} {ident}: waiting for "
                    f"{len(sessions) if sessions is not None else 'its'} stopping training session(s) to end"
                ),
                timeout=timeout,
                poll_interval=interval,
                transient=errors.is_transient,
                clock=clock,
                sleep=sleep,
                out=out,
                limit="--timeout",
            )
        except WaitTimeout:
            return _refused(
                orphan,
                f"its training sessions were still stopping after {format_elapsed(timeout)}",
                "Run again later (or with a longer --timeout); it was left running",
            )
        except WaitFailed as exc:
            started = [s.id for s in exc.last or () if s.status in LIVE_SESSION_STATUSES]
            return _refused(
                orphan,
                f"a training session was started on it while its orphan sessions stopped: {', '.join(started)}",
                "Find out who uses it before stopping it; it was left running",
            )
        except errors.TogetherError as exc:
            cause, todo = explain(exc)
            return _refused(orphan, f"waiting for its training sessions to end failed: {cause}", todo)
    cause, todo = explain(failure)
    return _refused(orphan, cause, todo)


def _refused(orphan: Orphan, cause: str, todo: str) -> StopResult:
    return StopResult(orphan, False, str(OrphanError("stopping", orphan.kind, orphan.id, cause, todo)))


def _attached(client: TogetherRL, resource_id: str) -> list[TrainingSession]:
    """Every session (any user's) that still holds a slot on the resource."""
    return list(
        client.iter_training_sessions(model_resources_id=resource_id, status=tuple(SESSION_HOLDS_SLOT))
    )
