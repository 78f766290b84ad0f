"""The one polling loop every wait of the provider goes through, and the watcher that serves it.

``wait_for`` polls ``fetch`` until ``done`` says the object reached its target state, ``failed`` says it never
will, or ``timeout`` seconds pass. Rules:

* The first poll happens at once; after that the interval grows (doubling from ``min(1 s, poll_interval)``) and
  is capped at ``poll_interval`` (default :data:`DEFAULT_POLL_INTERVAL`, 10 s like the official SDK's helpers).
  The last sleep is shortened so one final poll happens at the deadline.
* Not-found is a state: ``fetch`` returns ``None`` for an object that does not exist (yet or any more), and the
  predicates decide what that means (a stop is done, a create is failed). ``not_found_grace`` covers an API
  with read-after-write lag: for that many seconds from the start a ``None`` means "not visible yet" and the
  predicates are not asked (a create keeps polling instead of failing on its object's first 404).
* A failed state raises :class:`WaitFailed`, which carries the API's own ``error.code`` and ``error.message``
  when the object has them.
* A fetch that fails with an error ``transient`` accepts (the resources pass 429, 5xx and connection failures)
  is no news: the wait says so in a progress line, which also says until when (UTC) it keeps trying and which
  setting sets that (``limit``, e.g. ``create_timeout``), keeps polling at the same pace, and lasts its whole
  ``timeout``. Through the outage that line is repeated at most every :data:`OUTAGE_EVERY` seconds
  (:class:`OutageLines`, which a stop's tries through an outage use too). An API outage of a few seconds (or minutes) during an hour-long capacity wait must not end the
  wait, or the create it belongs to tears down a healthy object and loses its place in the queue. Any other
  exception from ``fetch`` propagates unchanged.
* A timeout raises :class:`WaitTimeout`, naming the last state seen (and the last fetch error, if the API was
  failing at the end).
* Progress goes to stderr (the Pulumi CLI shows a dynamic provider's stderr): one line whenever the described
  state changes, and otherwise at most every :data:`PROGRESS_EVERY` seconds, e.g.
  ``model resource 3f2a…: PENDING, queue position 3, 40 s``.

Clock, sleep and the output stream are injectable so tests run without real time passing.

The provider's waits get their observations from a :class:`Watcher` (one per kind of object in the process:
one list request per tick serves every waiting object, see its docstring): ``fetch`` is a
:meth:`Subscription.fetch`, which blocks until the watcher's next tick, and ``sleep`` does nothing.
"""

from __future__ import annotations

import enum
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import IO, Generic, TypeVar

from .config import DEFAULT_POLL_INTERVAL
from .messages import WaitFailed, WaitTimeout, format_elapsed, progress_line, until

T = TypeVar("T")

FIRST_INTERVAL = 1.0
"""The interval after the first poll; it doubles from here up to the poll interval."""

PROGRESS_EVERY = 30.0
"""While the state does not change, a progress line is repeated at most this often (seconds)."""

OUTAGE_EVERY = 60.0
"""Through an API outage, a line is repeated at most this often (seconds)."""


class OutageLines:
    """When to print a line about an API outage that a wait's polls or a stop's tries go through: at its first
    failure (that line says until when the caller keeps trying), then at most every :data:`OUTAGE_EVERY`
    seconds, whatever the failures say (a flapping gateway alternates 503s and refused connections). An answer
    ends the outage: the next failure is news again. A ten-minute outage is about ten lines, not a hundred."""

    def __init__(self) -> None:
        self._last: float | None = None
        self.since: float | None = None
        """When (``clock`` seconds) the outage began, None while the API answers."""

    def due(self, moment: float) -> bool:
        """A failure at ``moment``: whether to print a line about it now."""
        if self.since is None:
            self.since = moment
        if self._last is None or moment - self._last >= OUTAGE_EVERY:
            self._last = moment
            return True
        return False

    def first(self) -> bool:
        """Whether the line that :meth:`due` just allowed is the outage's first."""
        return self._last == self.since

    def over(self) -> None:
        """The API answered."""
        self._last = self.since = None


def wait_for(
    fetch: Callable[[], T | None],
    *,
    done: Callable[[T | None], bool],
    failed: Callable[[T | None], bool],
    describe: Callable[[T | None], str],
    timeout: float,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    not_found_grace: float = 0.0,
    transient: Callable[[BaseException], bool] = lambda exc: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    out: IO[str] | None = None,
    limit: str | None = None,
    now: Callable[[], datetime] | None = None,
) -> T | None:
    """Poll ``fetch`` until ``done(obj)``; return the last object (``None`` = not found).

    ``describe(obj)`` renders the state for progress lines and errors (``"model resource 3f2a…: PENDING"``).
    ``done`` is consulted before ``failed``; while ``fetch`` returns ``None`` within the first
    ``not_found_grace`` seconds, neither is (the object is not visible yet). Raises :class:`WaitFailed` or
    :class:`WaitTimeout`; exceptions from ``fetch`` propagate unchanged unless ``transient(exc)`` is true.

    ``limit`` names the setting ``timeout`` comes from (``"create_timeout"``), for the line an API outage
    prints: ``...; the API is failing (HTTP 503), still waiting until 14:03:12 UTC (create_timeout 3600 s)``.
    ``now`` is the UTC wall clock that deadline is read from (tests), as ``clock`` is the monotonic one.
    """
    out = out if out is not None else sys.stderr
    poll_interval = max(float(poll_interval), 0.001)
    interval = min(FIRST_INTERVAL, poll_interval)
    deadline = _deadline_words(timeout, limit, now)  # once: the line repeats it through the whole outage
    start = clock()
    last_line: str | None = None
    last_print = start
    outage = OutageLines()
    obj: T | None = None
    seen = False  # whether any fetch has answered yet
    while True:
        try:
            obj, trouble = fetch(), None
            seen = True
        except Exception as exc:
            if not transient(exc):
                raise
            trouble = exc
        moment = clock()
        elapsed = moment - start
        if trouble is None:
            description = describe(obj)
            line = description
        else:
            # Keep the last state we know; say the API is failing, and that the wait goes on.
            description = describe(obj) if seen else describe(None).split(": ", 1)[0] + ": unknown"
            line = f"{description}; the API is failing ({_short(trouble)}), still waiting {deadline}"
        if trouble is None:
            outage.over()
            due = line != last_line or moment - last_print >= PROGRESS_EVERY
        else:
            due = outage.due(moment)
        if due:
            _progress(out, f"{line}, {format_elapsed(elapsed)}")
            last_line, last_print = line, moment
        if trouble is None:
            not_visible_yet = obj is None and elapsed < not_found_grace
            if not not_visible_yet and done(obj):
                return obj
            if not not_visible_yet and failed(obj):
                raise WaitFailed(last=obj, description=description, elapsed=elapsed)
        remaining = timeout - elapsed
        if remaining <= 0:
            if trouble is not None:
                description = f"{description} (the API was failing: {_short(trouble)})"
            raise WaitTimeout(
                last=obj, description=description, elapsed=elapsed, timeout=timeout, limit=limit
            )
        sleep(min(interval, remaining))
        interval = min(interval * 2, poll_interval)


def _deadline_words(timeout: float, limit: str | None, now: Callable[[], datetime] | None) -> str:
    """``until 14:03:12 UTC (create_timeout 3600 s)``: when a wait through an outage gives up, and why then."""
    seconds = float(timeout)
    amount = f"{seconds:.1f}".rstrip("0").rstrip(".")
    setting = f"({limit or 'timeout'} {amount} s)"
    try:
        return f"until {until(seconds, now)} {setting}"
    except (OverflowError, ValueError):  # an infinite (or NaN) timeout has no moment to name
        return f"with no deadline {setting}"


def _short(exc: BaseException) -> str:
    """An error in a few words, for a progress line (``HTTP 503``, ``ApiConnectionError``)."""
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__


def _progress(out: IO[str], line: str) -> None:
    progress_line(line, out, status=True)


# ---------------------------------------------------------------------------------------------- the watcher


class Nothing(enum.Enum):
    """The type of :data:`NOTHING`."""

    NOTHING = "nothing"


NOTHING = Nothing.NOTHING
"""No observation in hand (a :meth:`Watcher.watch` without ``first``)."""
_NOTHING = NOTHING


COALESCE = 0.05
"""Seconds a tick brought forward by a newcomer waits for others registering at the same moment."""


class NoAnswerYet(Exception):
    """A wait's deadline came before the watcher's first answer (it is no news, like an API outage)."""


class Watcher(Generic[T]):
    """One per kind of object (and client) in the process, like a Kubernetes shared informer: every waiting
    object registers, and one thread serves them all with **one list request per tick** (``list_all``, which
    returns ``{id: object}`` for the objects a list can show), and a ``get_one`` only for a registered id the
    list did not show (it ended and left the filtered list, or the list lags a create). ``get_one`` returns
    ``None`` for a 404.

    The tick adapts: ``pace(objects)`` is the seconds until the next tick given the latest observation of every
    registered object (fast near an expected flip, slow deep in a capacity queue). A failed list is delivered
    to every waiter (a transient one is no news to :func:`wait_for`), and the next tick waits at least the
    failure's ``retry_after`` (429), else twice the pace. A failed ``get_one`` is delivered only to the waiters
    of that id (the others get their observations), and the next tick waits at least its ``retry_after``.
    The thread ends when nobody is registered.
    """

    def __init__(
        self,
        name: str,
        *,
        list_all: Callable[[], dict[str, T]],
        get_one: Callable[[str], T | None],
        pace: Callable[[list[T | None]], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._list_all, self._get_one, self._pace, self._clock = list_all, get_one, pace, clock
        self._cond = threading.Condition()
        self._subs: dict[int, Subscription[T]] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None
        self._wake = False

    def watch(self, ident: str, first: T | Nothing | None = _NOTHING) -> Subscription[T]:
        """Register ``ident``; ``first`` is an observation already in hand (the create's or the stop's own
        answer), which the first fetch returns without a request. Either way the next tick comes at once (with
        whoever joins within :data:`COALESCE`): an answer in hand is rarely final (PENDING, STOPPING), and what
        follows it is often a moment away, not a tick away."""
        with self._cond:
            key = self._next_key
            self._next_key += 1
            sub = Subscription(self, key, ident, first)
            self._subs[key] = sub
            self._wake = True  # a newcomer: tick now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"watcher-{self.name}", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return sub

    def _drop(self, key: int) -> None:
        with self._cond:
            self._subs.pop(key, None)
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # a bug here must end the waits with it, not leave them blocked
            with self._cond:
                subs, self._thread = list(self._subs.values()), None
            for sub in subs:
                sub._deliver(error=exc)  # each waiter raises it (not this thread: no stray traceback)

    def _loop(self) -> None:
        with self._cond:
            delay = self._pace(_observed(self._subs.values()))
        deadline = self._clock() + delay
        while True:
            with self._cond:
                while self._subs:
                    if self._wake:  # a newcomer: tick soon, with whoever else joins
                        deadline = min(deadline, self._clock() + min(COALESCE, delay))
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if not self._subs:
                    self._thread = None
                    return
                subs = list(self._subs.values())
                self._wake = False  # this tick serves every newcomer so far
            delay = self._tick(subs)
            deadline = self._clock() + delay

    def _tick(self, subs: list[Subscription[T]]) -> float:
        try:
            seen = self._list_all()
        except Exception as exc:  # the list is everyone's answer: everyone gets its failure
            for sub in subs:
                sub._deliver(error=exc)
            pace = self._pace(_observed(subs))
            return max(_retry_after(exc), 2 * pace)
        observed: dict[str, T | None] = {}
        failures: dict[str, Exception] = {}
        for ident in {s.ident for s in subs}:
            if ident in seen:
                observed[ident] = seen[ident]
                continue
            try:
                observed[ident] = self._get_one(ident)
            except Exception as exc:  # about this one object: the others keep their observations
                failures[ident] = exc
        for sub in subs:
            if sub.ident in failures:
                sub._deliver(error=failures[sub.ident])
            else:
                sub._deliver(value=observed[sub.ident])
        known = _observed(s for s in subs if s.ident in failures)
        pace = self._pace(list(observed.values()) + known)
        # A 429 on one GET is the API's word for this key, so the next tick honours it; a failed GET does not
        # slow the others down otherwise (their waits are near their flip, the failing one's is its own).
        return max([pace] + [_retry_after(exc) for exc in failures.values()])


def _observed(subs: Iterable[Subscription[T]]) -> list[T | None]:
    """The latest observation of each of ``subs`` that has one."""
    return [s._latest for s in subs if not isinstance(s._latest, Nothing)]


def _retry_after(exc: BaseException) -> float:
    """The seconds a failure asks the next request to wait (a 429's ``Retry-After``), else 0."""
    try:
        return max(0.0, float(getattr(exc, "retry_after", None) or 0.0))
    except (TypeError, ValueError):
        return 0.0


class Subscription(Generic[T]):
    """One waiter's view of a :class:`Watcher`: :meth:`fetch` for :func:`wait_for` returns the next observation
    (blocking until the watcher's next tick, at most until :meth:`until`), and :meth:`close` unregisters."""

    def __init__(self, watcher: Watcher[T], key: int, ident: str, first: T | Nothing | None) -> None:
        self._watcher, self._key, self.ident = watcher, key, ident
        self._latest: T | Nothing | None = first
        self._error: BaseException | None = None
        self._fresh = first is not _NOTHING
        self._deadline = float("inf")

    def until(self, deadline: float) -> Subscription[T]:
        self._deadline = deadline
        return self

    def _deliver(self, *, value: T | Nothing | None = _NOTHING, error: BaseException | None = None) -> None:
        with self._watcher._cond:
            if error is None:
                self._latest, self._error = value, None
            else:
                self._error = error
            self._fresh = True
            self._watcher._cond.notify_all()

    def fetch(self) -> T | None:
        cond = self._watcher._cond
        with cond:
            while not self._fresh:
                remaining = self._deadline - self._watcher._clock()
                if remaining <= 0:
                    break
                cond.wait(min(remaining, 60.0))
            self._fresh = False
            if self._error is not None:
                raise self._error
            if isinstance(self._latest, Nothing):  # the deadline came before the first tick
                raise NoAnswerYet(f"no answer from the API yet ({self._watcher.name})")
            return self._latest

    def close(self) -> None:
        self._watcher._drop(self._key)

    def __enter__(self) -> Subscription[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
