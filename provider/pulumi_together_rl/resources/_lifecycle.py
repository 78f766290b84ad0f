"""The parts of the two transactions (``_transactions``) and of reads: waiting, persisting, 404s of young
objects, a refused stop, abandoning a failed create.

:func:`wait` (with a grace for read-after-write lag, and through API outages), :func:`persist` (a call that
outlasts an outage), :func:`retry_404` / :func:`kept_while_young` / :func:`not_found_on_stop` (a 404 for an
object made under a minute ago is not proof it is gone), :func:`restopping` (a stop that did not take is sent
again), :func:`look_after_refused_stop` (a refused stop is judged by the object's state) and :func:`abandon`
(stop what a failed create made).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, NoReturn, TypeVar

from pulumi.dynamic import ReadResult

from ..client import errors
from ..waiting import NOTHING, NoAnswerYet, format_elapsed, until, wait_for
from ._errors import ProviderError, explain, log

T = TypeVar("T")


def _aware(moment: Any) -> Any:
    """``moment`` with UTC as its zone when it has none."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def age_of(props: dict[str, Any]) -> float | None:
    """Seconds since the object in the state was created (its ``created_at`` output), None if unknown."""
    created = props.get("created_at")
    if not isinstance(created, str) or not created:
        return None
    try:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (datetime.now(timezone.utc) - _aware(moment)).total_seconds()


def young(props: dict[str, Any]) -> bool:
    """Whether a 404 for this object may still be the API's read-after-write lag (made under a minute ago)."""
    age = age_of(props)
    return age is not None and age < NOT_FOUND_GRACE


def retry_404(
    call: Callable[[], T], *, props: dict[str, Any], sleep: Callable[[float], None] = time.sleep
) -> T:
    """``call()``; a 404 for a young object (:func:`young`) is tried again over a few seconds before it is
    believed, so refresh never drops and delete never calls "gone" an object the API has not shown yet."""
    delays = list(ABANDON_STOP_RETRY_DELAYS) if young(props) else []
    while True:
        try:
            return call()
        except errors.NotFound:
            if not delays:
                raise
            sleep(delays.pop(0))


def kept_while_young(kind: str, ident: str, props: dict[str, Any], input_keys: Any) -> ReadResult | None:
    """Refresh got a 404 (after :func:`retry_404`): for a young object, keep it in the state as it is (the
    API may not show it yet; dropping it would make the next ``up`` create a second one); else None."""
    if not young(props):
        return None
    log(
        f"{kind} {ident}: the API answers 404 for it, but it was created {format_elapsed(age_of(props) or 0)} "
        "ago: keeping it in the state (read-after-write lag); refresh again in a minute"
    )
    return ReadResult(ident, props, inputs={k: props[k] for k in input_keys if k in props})


def not_found_on_stop(kind: str, ident: str, props: dict[str, Any]) -> None:
    """A stop answered 404 (after :func:`retry_404`): done for an old object, an error for a young one (it
    may exist and bill; calling it gone would let delete-before-replace make the replacement beside it)."""
    if young(props):
        raise ProviderError(
            "deleting",
            kind,
            ident,
            f"stopping it answered 404 (not found) for several seconds, but it was created "
            f"{format_elapsed(age_of(props) or 0)} ago, so it may still exist (read-after-write lag)",
            "Run the command again in a minute",
        )
    log(f"{kind} {ident}: already gone")


def get_or_none(getter: Callable[[str], T], ident: str) -> T | None:
    """``getter(ident)``, with 404 as ``None`` (not-found is a state)."""
    try:
        return getter(ident)
    except errors.NotFound:
        return None


NOT_FOUND_GRACE = 60.0
"""Seconds after a create during which a 404 for the new object means "not visible yet" (read-after-write lag
of the API), not "gone": the create wait keeps polling that long (or until ``create_timeout``)."""

STOP_PERSIST_WINDOW = 120.0
"""Seconds a stop after a failed create keeps trying through 429s, 5xx and connection failures (the failure
it cleans up after is often the same outage): long enough for a typical blip, bounded so a dead API still
ends the command with the id to stop by hand."""

PERSIST_MAX_DELAY = 15.0
"""Longest pause (seconds) between two tries of :func:`persist`."""

ABANDON_STOP_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
"""Pauses (seconds) between the retries of a stop that answers 404 after a failed create (the object was just
made, so a 404 may be read-after-write lag rather than proof it is gone)."""


def wait(
    client: Any,
    kind: str,
    ident: str,
    *,
    done: Callable[[T | None], bool],
    failed: Callable[[T | None], bool],
    describe: Callable[[T | None], str],
    timeout: float,
    not_found_grace: float = 0.0,
    first: Any = NOTHING,
    wrap: Callable[[Callable[[], T | None]], Callable[[], T | None]] | None = None,
    limit: str | None = None,
) -> T | None:
    """:func:`waiting.wait_for` on the process's watcher of ``kind`` (:mod:`._watch`): one list per tick serves
    every wait of the kind. ``first`` is an observation in hand (a create's own answer): the first check uses
    it, with no request. ``wrap`` decorates the fetch (a delete's re-stop). 429, 5xx and connection failures of
    a tick are no news (the wait lasts its whole timeout through an API outage); ``limit`` names the setting
    of ``timeout`` (``"create_timeout"``) for the lines that say until when it keeps trying."""
    from . import _watch

    with _watch.watcher(client, kind).watch(ident, first).until(time.monotonic() + float(timeout)) as sub:
        return wait_for(
            wrap(sub.fetch) if wrap else sub.fetch,
            done=done,
            failed=failed,
            describe=describe,
            timeout=float(timeout),
            not_found_grace=not_found_grace,
            transient=lambda exc: errors.is_transient(exc) or isinstance(exc, NoAnswerYet),
            sleep=lambda seconds: None,  # the watcher paces: fetch blocks until its next tick
            limit=limit,
        )


def persist(
    call: Callable[[], T],
    *,
    window: float,
    what: str,
    limit: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()`` until it answers or fails for good; 429, 5xx and connection failures (after the transport's
    own retries) are tried again with growing pauses for ``window`` seconds, each try logged with until when it
    goes on and what sets that (``limit``: ``"delete_timeout 900 s"``).

    For the calls that must outlast an outage: the stop after a failed create and the stop of a delete. A
    create is never passed here (the client's reconciliation owns its retries)."""
    start, delay = clock(), 1.0
    last = until(window)
    while True:
        try:
            return call()
        except Exception as exc:
            spent = clock() - start
            if not errors.is_transient(exc) or spent + delay > window:
                raise
            cause, _ = explain(exc)
            log(
                f"{what}: {cause}; trying again in {format_elapsed(delay)} ({format_elapsed(spent)} so far; "
                f"keeps trying until {last}, {limit})"
            )
            sleep(delay)
            delay = min(delay * 2, PERSIST_MAX_DELAY)


RESTOP_AFTER = 15.0
"""Seconds an object may stay as it was after its stop was accepted before the stop is sent again (a stop that
answered 200 but did not take must not leave a delete waiting out its whole timeout while the GPU bills)."""


def restopping(
    fetch: Callable[[], T | None],
    stop: Callable[[], Any],
    untouched: Callable[[T], bool],
    what: str,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[], T | None]:
    """``fetch`` for a delete's wait that sends ``stop`` again (it is idempotent) whenever the object is still
    ``untouched`` (not stopping at all) :data:`RESTOP_AFTER` seconds after the last stop."""
    last = clock()

    def fetch_and_restop() -> T | None:
        nonlocal last
        obj = fetch()
        if obj is not None and untouched(obj) and clock() - last >= RESTOP_AFTER:
            log(
                f"{what}: still {obj.status.short} {format_elapsed(clock() - last)} after the stop; stopping again"
            )
            last = clock()
            stop()
        return obj

    return fetch_and_restop


def look_after_refused_stop(
    doing: str, kind: str, ident: str, fetch: Callable[[], T | None], refusal: errors.ApiError
) -> T | None:
    """A stop was refused (409/400): GET the object to learn why. Returns it (``None`` = 404).

    The API's answer to stopping an object that is already stopped is not documented, so a refusal is judged by
    the object's state, never by the message text. If the GET fails too, the refusal is what gets reported.
    """
    try:
        return fetch()
    except Exception as exc:
        raise ProviderError(doing, kind, ident, *explain(refusal, doing)) from exc


def abandon(
    doing: str,
    kind: str,
    ident: str,
    exc: BaseException,
    *,
    stop: Callable[[], Any],
    fetch: Callable[[], Any],
    gone: Callable[[Any], bool],
    path: str,
    stopped_note: str,
    untouched: Callable[[Any], bool] = lambda obj: False,
    on_stopped: Callable[[], Any] = lambda: None,
) -> NoReturn:
    """After a failed create: stop what was made (best effort, logged), then raise the error naming the id.

    ``fetch`` GETs the object (``None`` = 404) and ``gone`` says whether its state counts as stopped: a stop the
    API refuses (409/400) for an object already in such a state is a success. A stop that answers 404 is retried
    (:data:`ABANDON_STOP_RETRY_DELAYS`): right after the create that may be read-after-write lag, so a lasting
    404 is reported as "may still exist", never as proof it is gone. ``path`` is the collection's API path (for
    the manual check), ``stopped_note`` what a successful stop means for billing. An accepted stop is checked:
    while ``untouched`` says the object is not even stopping, the stop is sent again (a stop can answer 200 and
    not take), and one that never takes is reported as such, not as stopped.
    ``KeyboardInterrupt``/``SystemExit`` are re-raised as they are, after the stop."""
    stopped, done = _stop_after_failed_create(kind, ident, stop, fetch, gone, untouched, path, stopped_note)
    if done:
        on_stopped()
    if not isinstance(exc, Exception):
        raise exc
    cause, todo = explain(exc, doing)
    raise ProviderError(doing, kind, ident, cause, f"{stopped}. {todo}") from exc


STOP_CHECK_DELAYS = (1.0, 2.0, 4.0, 8.0)
"""Pauses (seconds) between the checks, and re-sends, of an accepted stop after a failed create whose object is
still not stopping."""


def _stop_took(
    fetch: Callable[[], Any], untouched: Callable[[Any], bool], stop: Callable[[], Any]
) -> bool | None:
    """After an accepted stop: True once the object is stopping (or gone), None if it never is."""
    for delay in (0.0, *STOP_CHECK_DELAYS):
        if delay:
            time.sleep(delay)
            try:
                stop()
            except Exception:  # the check below decides
                pass
        try:
            obj = fetch()
        except Exception:
            continue  # cannot tell yet
        if obj is None or not untouched(obj):
            return True
    return None


def _stop_after_failed_create(
    kind: str,
    ident: str,
    stop: Callable[[], Any],
    fetch: Callable[[], Any],
    gone: Callable[[Any], bool],
    untouched: Callable[[Any], bool],
    path: str,
    stopped_note: str,
) -> tuple[str, bool]:
    """Stop the object; the sentence saying how that went, and whether it is stopped."""
    by_hand = f"check it with GET {path}/{ident} and stop it if it is there (POST {path}/{ident}/stop)"
    delays = list(ABANDON_STOP_RETRY_DELAYS)
    started, attempts = time.monotonic(), 0
    while True:
        attempts += 1
        try:
            persist(
                stop,
                window=STOP_PERSIST_WINDOW,
                what=f"{kind} {ident}: stopping it after the failed create",
                limit=f"a stop after a failed create tries for {format_elapsed(STOP_PERSIST_WINDOW)}",
            )
        except errors.NotFound:
            if delays:
                time.sleep(delays.pop(0))
                continue
            tried = f"{attempts} times over {format_elapsed(time.monotonic() - started)}"
            log(f"{kind} {ident}: create failed; stopping it answered 404 (not found) {tried}")
            return (
                f"It may still exist: stopping it answered 404 (not found) {tried}, which can be the API's "
                f"read-after-write lag; {by_hand}"
            ), False
        except (errors.Conflict, errors.BadRequest) as stop_exc:
            try:
                obj = fetch()
            except Exception:
                obj = None
            if obj is not None and gone(obj):
                state = obj.status.short
                log(f"{kind} {ident}: create failed; it is already {state}")
                return f"It is already {state}: {stopped_note}", True
            stop_cause, _ = explain(stop_exc)
            log(f"{kind} {ident}: create failed and stopping it failed: {stop_cause}")
            return f"Stopping it failed too ({stop_cause}); {by_hand}", False
        except Exception as stop_exc:
            stop_cause, _ = explain(stop_exc)
            log(f"{kind} {ident}: create failed and stopping it failed: {stop_cause}")
            return f"Stopping it failed too ({stop_cause}); {by_hand}", False
        else:
            took = _stop_took(fetch, untouched, stop)
            if took is None:
                log(f"{kind} {ident}: create failed; stopping it was accepted, but it is still running")
                return (
                    f"Stopping it was accepted {1 + len(STOP_CHECK_DELAYS)} times but did not take: it may still "
                    f"be running; {by_hand}"
                ), False
            log(f"{kind} {ident}: create failed; stopped it")
            return f"It has been stopped: {stopped_note}", True
