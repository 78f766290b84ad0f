"""The dynamic face's seams into the Pulumi SDK's dynamic-provider server: errors the user reads are one sentence,
every create and delete of a stack runs at once, and a provider whose CLI was killed, or that the engine ends
(SIGINT) while a create waits, keeps its journal entries and exits.

**Worker pool.** The server serves its RPCs from ``futures.ThreadPoolExecutor(max_workers=4)``, and a create
holds its worker until READY / RUNNING: a stack of 2 resources + 16 sessions ran 4 operations at a time, and a
READY resource waited (billing, idle) for its sessions to get a worker. :func:`widen_the_pool` raises that
executor's ``_max_workers`` to :data:`POOL_SIZE` from inside ``configure`` (which runs on one of its workers: the
executor is the one whose threads include the current thread), so the next RPCs get threads of their own, and
those already queued behind the 4 busy workers get theirs at once. The
waits themselves are cheap (they block on the process's watcher, :mod:`.watch`), so 128 idle threads cost
memory only. Version guard: only in the running server module, and only where the executor still has the
private ``_max_workers``, ``_threads``, ``_work_queue`` and ``_adjust_thread_count`` of CPython 3.8-3.13; anywhere else it warns
once and the server keeps its 4 workers. Upstream change that removes the need: let ``pulumi.dynamic``'s
server take its worker count from the environment (or serve with ``grpc.aio``).

**Tracebacks.**
The server (``python -m pulumi.dynamic``, module ``pulumi.dynamic.__main__``) answers an exception from
``create``/``read``/``update``/``delete``/``diff``/``check`` with ``context.abort(UNKNOWN,
traceback.format_exc())``, so the CLI prints 13 to 26 lines of Python traceback around the one useful line.
A :class:`~..messages.UserError` already is that line (``<doing> <kind> (<id>): <cause>. <what to do>``),
so the server's ``traceback`` global is swapped for a stand-in whose ``format_exc`` returns just the message
of a UserError; every other exception, and a UserError whose cause is a bug (:func:`..messages.is_bug`),
keeps its full traceback (the traceback is what a report needs), and so does everything where
``TOGETHER_RL_DEBUG=1``.

Version guard: the swap happens only where that module is the running ``__main__`` and still has the
``_abort_with_traceback`` wrapper and a ``traceback`` global that is the standard module; anywhere else
(another SDK version, tests in-process) nothing changes and tracebacks stay as they are. An SDK whose
dynamic-provider server let a provider shape its own error details would remove the need for this.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from types import ModuleType
from typing import Any

from ..messages import UserError, is_bug, log

_SERVER_MODULE = "pulumi.dynamic.__main__"
_lock = threading.Lock()


class _ShortTracebacks:
    """The ``traceback`` module, except ``format_exc`` of a UserError: its message alone."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    def format_exc(self, *args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        debug = os.environ.get("TOGETHER_RL_DEBUG") == "1"
        # A UserError that wraps a bug keeps the bug's traceback: that is what a report needs.
        if isinstance(exc, UserError) and not debug and not is_bug(exc.__cause__):
            return str(exc)
        return traceback.format_exc(*args, **kwargs)


def server_module() -> ModuleType | None:
    """The running dynamic-provider server's module, if this process is one."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is not None and getattr(spec, "name", None) == _SERVER_MODULE:
        return main
    return None


POOL_SIZE = 128
"""Workers of the dynamic-provider server once widened: more than any stack's concurrent operations."""

_widened = False


def widen_the_pool(size: int = POOL_SIZE) -> bool:
    """Raise the server's worker count to ``size`` once; whether it is (at least) that wide now."""
    global _widened
    if _widened:
        return True
    if server_module() is None:
        return False
    import concurrent.futures
    import gc

    me = threading.current_thread()
    with _lock:
        if _widened:
            return True
        pools = [
            o
            for o in gc.get_objects()
            if isinstance(o, concurrent.futures.ThreadPoolExecutor) and me in getattr(o, "_threads", ())
        ]
        needed = ("_max_workers", "_adjust_thread_count", "_work_queue")
        if len(pools) != 1 or not all(hasattr(pools[0], a) for a in needed):
            log("warning: pulumi_together_rl could not widen the dynamic-provider server's 4 workers (another "
                "pulumi SDK or Python version): at most 4 creates and deletes run at once")  # fmt: skip
            _widened = True  # warn once
            return False
        pool = pools[0]
        pool._max_workers = max(pool._max_workers, size)
        # A thread is started only when work is submitted: RPCs queued behind the 4 busy workers before now
        # (a destroy sends all its deletes at once) get theirs here.
        for _ in range(pool._work_queue.qsize()):
            pool._adjust_thread_count()
        _widened = True
    return True


def shorten_tracebacks() -> bool:
    """Install the stand-in once; whether the server now reports UserErrors as one sentence."""
    main = server_module()
    if main is None or not hasattr(main, "_abort_with_traceback"):
        return False
    with _lock:
        current = getattr(main, "traceback", None)
        if isinstance(current, _ShortTracebacks):
            return True
        if current is not traceback:
            return False
        main.traceback = _ShortTracebacks()  # type: ignore[attr-defined]
    return True


def watch_the_engine() -> bool:
    """In the provider server only: watch the engine (:mod:`...lifeline`), so that a provider whose ``pulumi``
    CLI was killed stops waiting, keeps its journal entries and exits. Whether a watch runs."""
    if server_module() is None:
        return False
    from .. import lifeline

    return lifeline.watch()


_ending_hooked = False


def keep_entries_when_ended() -> bool:
    """In the provider server only: when the server is ended while creates are in flight, keep their journal
    entries for the next run and exit, as the plugin face does on SIGINT and SIGTERM. Whether the hook is in.

    The engine ends its plugins with SIGINT. The server answers it in its main thread (``KeyboardInterrupt``:
    ``server.stop(0)``), which cancels every RPC, so no answer reaches the engine any more; but the interpreter
    then waits for the worker threads, and a create would go on waiting for READY and mark its entry done, an
    object whose id nobody received, which the next ``pulumi up`` would make a second time. A signal handler
    cannot be installed from here (only the main thread may, and it is the SDK's); the hook is threading's
    own shutdown callback, which runs once the main thread is done and before the workers are joined. Version
    guard: CPython's ``threading._register_atexit`` (3.9+); without it nothing changes and the lifeline remains
    (a CLI that ends after the SIGINT still leaves the entries, once it is gone)."""
    global _ending_hooked
    if server_module() is None or not hasattr(threading, "_register_atexit"):
        return False
    with _lock:
        if not _ending_hooked:
            threading._register_atexit(_server_ended)
            _ending_hooked = True
    return True


def _server_ended() -> None:
    from .. import lifeline
    from ..ownership import leases

    if leases.holding():  # how every command ends its plugin: nothing to say when no create is in flight
        lifeline.engine_gone("this provider was ended (SIGINT) before the engine got its answers")


def install() -> None:
    """Every seam, in the provider server only (anywhere else each does nothing): called from ``configure``."""
    shorten_tracebacks()  # errors shown as their one sentence
    widen_the_pool()  # every create and delete runs at once
    watch_the_engine()  # a killed CLI ends the waits, entries kept
    keep_entries_when_ended()  # so does the engine's SIGINT
