"""The provider process's lifeline to its engine: when the ``pulumi`` CLI it serves is gone, it stops waiting
and exits, keeping its create journal entries for the next run.

The CLI starts each plugin in a process group of its own, so a CLI killed hard (SIGKILL: a CI runner's cancel,
the OOM killer) leaves the dynamic provider running: it would go on waiting for READY for up to an hour, then
finish its create and remove the journal entry of an object whose answer nobody received. The next ``pulumi up``
would make a second one.

:func:`watch` (started by ``configure`` in the provider server only) looks at the engine process every
:data:`CHECK_EVERY` seconds (by pid *and* start time, :class:`~.Process`, so a reused pid is not taken
for it). Once it is gone, :func:`gone` is true: a create no longer stops its object or marks its entry done
(the engine never got the answer), the POSTs in flight get up to :data:`POST_GRACE` seconds to answer (so their
ids are recorded), then every entry this process holds is released with a note, and the process exits. The
next ``pulumi up`` takes the objects over by id, even while this process is still shutting down.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from .messages import progress_line
from .ownership import leases
from .ownership.records import Process, State, engine_process

CHECK_EVERY = 0.5
"""Seconds between two looks at the engine process."""

POST_GRACE = 30.0
"""Seconds the exit waits for POSTs in flight to answer, so that their ids are recorded."""

GONE_NOTE = "the engine (the pulumi CLI) was gone before it got the answer"

_gone = threading.Event()
_lock = threading.Lock()
_watching: list[threading.Thread] = []
_watched: list[tuple[Process, Callable[[int], object]]] = []  # the engine watched, and how to exit


def gone() -> bool:
    """Whether the engine this process serves is gone (its answers reach nobody): what the watch saw, or what a
    look now sees. A create asks right before it marks its entry done: an engine that died since the watch's last
    look (up to :data:`CHECK_EVERY` ago) must not get a create marked done whose answer nobody will read."""
    if _gone.is_set():
        return True
    with _lock:
        watched = _watched[0] if _watched else None
    if watched is None or watched[0].running() is not False:
        return False
    engine, exit = watched
    threading.Thread(target=_gone_now, args=(engine, exit), name="lifeline-now", daemon=True).start()
    _gone.wait()  # set first thing by engine_gone, which then lets POSTs in flight answer and exits
    return True


def watch(
    engine: Process | None = None,
    *,
    exit: Callable[[int], object] = os._exit,
    every: float = CHECK_EVERY,
) -> bool:
    """Watch ``engine`` (default: :func:`engine_process`) from a daemon thread, once per process.
    Returns whether a watch is running (False when the engine cannot be told apart from another process)."""
    engine = engine or engine_process()
    if engine.running() is not True:
        return False  # cannot see it (no /proc, another namespace): no watch rather than a false alarm
    with _lock:
        if _watching:
            return True
        thread = threading.Thread(target=_watch, args=(engine, exit, every), name="lifeline", daemon=True)
        _watching.append(thread)
        _watched.append((engine, exit))
    thread.start()
    return True


def _watch(engine: Process, exit: Callable[[int], object], every: float) -> None:
    while engine.running() is not False:
        time.sleep(every)
    _gone_now(engine, exit)


def _gone_now(engine: Process, exit: Callable[[int], object]) -> None:
    engine_gone(f"the engine this provider served (pulumi, {engine.describe()}) is gone", exit)


def engine_gone(why: str, exit: Callable[[int], object] = os._exit, *, quiet_if_idle: bool = False) -> None:
    """The engine will read no more answers (``why``): stop, keep every entry held for the next run, exit.
    What :func:`watch` does once the engine process is gone; also the plugin's answer to the signal that ends
    it (SIGINT from the engine, SIGTERM from a language host), which says nothing when it holds no entry: that
    is how every command ends its plugins."""
    if _gone.is_set():
        return
    _gone.set()
    # First act, one write per entry: an id already known goes to the journal, lease released, before anything
    # else (a CI cancel sends SIGTERM 7.5 s after SIGINT, and SIGKILL 2.5 s after that).
    for held in leases.holding():
        if held.entry.id:
            _leave(held)
    if leases.holding() or not quiet_if_idle:
        progress_line(f"{why}: keeping the create journal's entries for the next `pulumi up` and exiting")
    deadline = time.monotonic() + POST_GRACE
    while time.monotonic() < deadline and any(_posting(h) for h in leases.holding()):
        time.sleep(0.1)
    for held in leases.holding():
        _leave(held)
    exit(0)


def _leave(held: leases.Holding) -> None:
    """Released with the note, in one write (its lease goes with it); a journal that cannot be written keeps
    the lease, which runs out by itself."""
    try:
        held.release(GONE_NOTE)
    except Exception:
        leases.forget(held)


def _posting(held: leases.Holding) -> bool:
    entry = held.entry
    return entry.state == State.POSTING and bool(entry.sends) and entry.answered_at is None


def reset() -> None:
    """Forget that the engine was gone, and the watch (tests)."""
    _gone.clear()
    with _lock:
        _watching.clear()
        _watched.clear()
