"""The one stop-and-wait: stop an object, judge a refused stop by the object's state, and wait until it holds
nothing, sending the stop again if it did not take. It serves a resource's delete, the clean-up after a failed
create, and the orphan finder; each says what the outcome means to its reader.

* :func:`stop` sends ``POST .../stop`` through an outage (429, 5xx and connection failures are tried again for
  ``window`` seconds: one line says until when, then a line a minute at most, :class:`.waiting.OutageLines`),
  tries a 404 again for a young object (the
  API may not show it yet), and reads the object after a refusal (409/400): the API's answer to stopping
  something already stopped is not documented, so a refusal is judged by the state, never by the message.
* :func:`restopping` makes a wait's fetch send the stop again while the object is still untouched
  :data:`RESTOP_AFTER` seconds after the last one, and :func:`took` checks an accepted stop: a stop can answer
  200 and not take.

Only an object the caller holds proof of is passed here (see :mod:`.journal`): these functions stop what they
are given, and nothing else.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from .client import errors
from .client.collections import Collection, Obj, Req
from .messages import explain, format_elapsed, log, until
from .waiting import OutageLines

if TYPE_CHECKING:
    from .client.api import TogetherRL

T = TypeVar("T")

RETRY_404_DELAYS = (0.5, 1.0, 2.0, 4.0)
"""Pauses (seconds) between the tries of a stop that answers 404 for a young object (read-after-write lag)."""

PERSIST_MAX_DELAY = 15.0
"""Longest pause (seconds) between two tries through an outage."""

RESTOP_AFTER = 15.0
"""Seconds an object may stay as it was after its stop was accepted before the stop is sent again (a stop that
answered 200 but did not take must not leave a wait running out its timeout while the GPU bills)."""

ENDED, STOPPING, REFUSED, NOT_FOUND_YET = "ended", "stopping", "refused", "not found yet"


@dataclasses.dataclass(frozen=True)
class Stop(Generic[Obj]):
    """How a stop went: ``outcome`` is

    * :data:`ENDED`: it holds nothing (404, or an ended state);
    * :data:`STOPPING`: the stop was accepted, or refused for an object already stopping;
    * :data:`REFUSED`: the API refused it and the object is still active (``error`` is the refusal);
    * :data:`NOT_FOUND_YET`: a young object answered 404 to every try: it may exist (read-after-write lag).
    """

    outcome: str
    last: Obj | None = None
    """The stop's answer, or the object as read after a refusal (None: 404)."""
    error: errors.ApiError | None = None
    tries: int = 1
    seconds: float = 0.0


def untouched(collection: Collection[Obj, Req], obj: Obj | None) -> bool:
    """Whether ``obj`` is still as active as before any stop (not stopping, not ended)."""
    return obj is not None and obj.status in collection.live


def stop(
    collection: Collection[Obj, Req],
    client: TogetherRL,
    ident: str,
    *,
    window: float,
    limit: str,
    force: bool = False,
    young: bool = False,
    what: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Stop[Obj]:
    """Stop ``ident``; how it went. ``window`` is how long (seconds) an outage is tried through, ``limit`` the
    words for what sets it (``delete_timeout 900 s``); ``young`` tries a 404 again (:data:`RETRY_404_DELAYS`).
    Any other failure (a 401, an outage longer than the window) is raised."""
    what = what or f"{collection.name} {ident}: stopping"
    started, tries = clock(), 0
    delays = list(RETRY_404_DELAYS) if young else []
    while True:
        tries += 1
        try:
            answer = _persist(
                lambda: collection.stop(client, ident, force=force), window, what, limit, sleep, clock
            )
        except errors.NotFound:
            if delays:
                sleep(delays.pop(0))
                continue
            outcome = NOT_FOUND_YET if young else ENDED
            return Stop(outcome, None, tries=tries, seconds=clock() - started)
        except (errors.Conflict, errors.BadRequest) as refusal:
            live = _get_or_none(collection, client, ident, refusal)
            if live is None or live.status in collection.ended:
                return Stop(ENDED, live, refusal, tries, clock() - started)
            if untouched(collection, live):
                return Stop(REFUSED, live, refusal, tries, clock() - started)
            return Stop(STOPPING, live, refusal, tries, clock() - started)
        return Stop(STOPPING, answer, tries=tries, seconds=clock() - started)


def restopping(
    collection: Collection[Obj, Req],
    client: TogetherRL,
    ident: str,
    *,
    force: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Callable[[], Obj | None]], Callable[[], Obj | None]]:
    """A decorator for the fetch of a wait until a stopped object ends: the fetch sends the stop again (it is
    idempotent) whenever the object is still untouched :data:`RESTOP_AFTER` seconds after the last stop."""
    last = clock()

    def wrap(fetch: Callable[[], Obj | None]) -> Callable[[], Obj | None]:
        def fetch_and_restop() -> Obj | None:
            nonlocal last
            obj = fetch()
            if obj is not None and untouched(collection, obj) and clock() - last >= RESTOP_AFTER:
                log(
                    f"{collection.name} {ident}: still {obj.status.short} {format_elapsed(clock() - last)} "
                    "after the stop; stopping again"
                )
                last = clock()
                collection.stop(client, ident, force=force)
            return obj

        return fetch_and_restop

    return wrap


STOP_CHECK_DELAYS = (1.0, 2.0, 4.0, 8.0)
"""Pauses (seconds) between the checks, and re-sends, of an accepted stop whose object is still untouched."""


def took(
    collection: Collection[Obj, Req],
    client: TogetherRL,
    ident: str,
    *,
    force: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """After an accepted stop: whether the object starts stopping (or is gone) within :data:`STOP_CHECK_DELAYS`,
    the stop sent again before each look. False: it never did (the stop answered 200 and did nothing)."""
    for delay in (0.0, *STOP_CHECK_DELAYS):
        if delay:
            sleep(delay)
            try:
                collection.stop(client, ident, force=force)
            except Exception:  # the look below decides
                pass
        try:
            obj = collection.get(client, ident)
        except errors.NotFound:
            return True
        except Exception:
            continue  # cannot tell yet
        if not untouched(collection, obj):
            return True
    return False


def _persist(
    call: Callable[[], T],
    window: float,
    what: str,
    limit: str,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> T:
    """``call()`` until it answers or fails for good: 429, 5xx and connection failures (after the transport's
    own retries) are tried again with growing pauses for ``window`` seconds. The first failure's line says until
    when; later ones come at most once a minute (:class:`.waiting.OutageLines`)."""
    start, delay = clock(), 1.0
    deadline = until(window)
    lines = OutageLines()
    while True:
        try:
            return call()
        except Exception as exc:
            moment = clock()
            spent = moment - start
            if not errors.is_transient(exc) or spent + delay > window:
                raise
            if lines.due(moment):
                cause, _ = explain(exc)
                if lines.first():
                    log(f"{what}: {cause}; trying again until {deadline} ({limit})")
                else:
                    log(f"{what}: {cause}; still trying ({format_elapsed(spent)} so far, until {deadline})")
            sleep(delay)
            delay = min(delay * 2, PERSIST_MAX_DELAY)


def _get_or_none(
    collection: Collection[Obj, Req], client: TogetherRL, ident: str, refusal: errors.ApiError
) -> Obj | None:
    """The object after a refused stop (None = 404). If reading it fails too, the refusal is what is raised."""
    try:
        return collection.get(client, ident)
    except errors.NotFound:
        return None
    except errors.TogetherError:
        raise refusal from None
