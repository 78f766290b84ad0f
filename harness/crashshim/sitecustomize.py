"""The crash-point shim: loaded by Python at startup (``sitecustomize``) in the processes of a killed `pulumi up`
whose environment puts this folder first on ``PYTHONPATH`` (:mod:`harness.crashpoints` does, for that one command
only). It is the harness's, never shipped: the package itself has no kill switch.

With ``CRASHPOINT_LOG`` set it wraps the write methods of the journal's stores (``create``, ``swap``, ``remove`` of
:class:`~pulumi_together_rl.ownership.stores.folder.FolderStore` and
:class:`~pulumi_together_rl.ownership.stores.bucket.BucketStore`) from outside: each write that returned (landed,
or was refused by its condition) is appended to that log as one JSON line (the process, its number, what it
wrote). With ``CRASHPOINT_KILL_AT=k`` too, right after the k-th write of the process it writes
``CRASHPOINT_MARK`` (the write's line) and stops itself with SIGSTOP, holding the writers' lock so that no other
thread of it (the lease's renewals) writes after it: frozen right after its k-th write, it is the harness's to
SIGKILL, with its whole machine (:meth:`harness.runner.Runner.kill`). With ``CRASHPOINT_KILL_BEFORE=k`` instead
it stops right before its k-th write is sent. The log and the mark are synced before the stop: a kill loses
nothing of them.
"""

from __future__ import annotations

import json
import os
import signal
import threading

_lock = threading.RLock()
_count = [0]


def _stop() -> None:
    """Frozen (SIGSTOP) for the harness to SIGKILL with its machine; or, with ``CRASHPOINT_SIGNAL=KILL``, SIGKILLed
    here and now, the process alone (the OOM killer's way): its CLI lives on and sees its plugin die.

    A frozen process that is continued stops again at once, and SIGHUP is ignored (:func:`_install`): when the
    machine's SIGKILLs orphan the provider's process group, the kernel sends it SIGHUP and SIGCONT, and a provider
    that ran on or died then, before its own SIGKILL, would do what the crash point is not (a write, a death its
    CLI could still see)."""
    if os.environ.get("CRASHPOINT_SIGNAL") == "KILL":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        os.kill(os.getpid(), signal.SIGSTOP)


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _wrap(cls: type, op: str) -> None:
    inner = getattr(cls, op)

    def write(self, key, *args, **kwargs):  # type: ignore[no-untyped-def]
        with (
            _lock
        ):  # one write at a time, so that "the k-th" is one write and nothing follows it before the stop
            data = args[0] if op in ("create", "swap") and args else b""
            try:
                body = json.loads(data) if data else None
            except ValueError:
                body = data.decode(errors="replace")
            if os.environ.get("CRASHPOINT_KILL_BEFORE") == str(_count[0] + 1):
                # Right before the write: the store as after the one before it, and whatever the process did
                # since (a POST answered, say) lost with it. The mark says what the write would have been.
                line = json.dumps({"pid": os.getpid(), "n": _count[0] + 1, "op": op, "key": key, "landed": False,
                                   "data": body, "before": True}, default=str)  # fmt: skip
                _append(os.environ["CRASHPOINT_MARK"], line)
                _stop()
            result = inner(self, key, *args, **kwargs)
            _count[0] += 1
            line = json.dumps(
                {
                    "pid": os.getpid(),
                    "n": _count[0],
                    "op": op,
                    "key": key,
                    "landed": op == "remove" or result is not None,
                    "data": body,
                },
                default=str,
            )
            _append(os.environ["CRASHPOINT_LOG"], line)
            if os.environ.get("CRASHPOINT_KILL_AT") == str(_count[0]):
                _append(os.environ["CRASHPOINT_MARK"], line)
                _stop()
            return result

    write.__wrapped__ = inner  # type: ignore[attr-defined]
    setattr(cls, op, write)


def _install() -> None:
    try:
        from pulumi_together_rl.ownership.stores.bucket import BucketStore
        from pulumi_together_rl.ownership.stores.folder import FolderStore
    except (
        Exception
    ):  # a process of the command that has no provider (a language host's helper): nothing to wrap
        return
    for cls in (FolderStore, BucketStore):
        for op in ("create", "swap", "remove"):
            _wrap(cls, op)


if os.environ.get("CRASHPOINT_LOG"):
    if (
        os.environ.get("CRASHPOINT_SIGNAL") != "KILL"
        and threading.current_thread() is threading.main_thread()
    ):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # see _stop: set here, where the main thread runs
    _install()
