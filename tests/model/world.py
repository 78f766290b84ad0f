"""The world the journal's state machine runs in: several runner processes inside one Python process.

Every runner (a ``pulumi up`` of the declaration on some machine, or a colleague's of another declaration) is a
:class:`Proc`: a thread that runs the real :func:`pulumi_together_rl.ownership.transaction.create` with a real
:class:`~pulumi_together_rl.client.TogetherRL` client against the emulator, its journal a
:class:`~pulumi_together_rl.ownership.journal.Journal` over its own view of one shared
:class:`harness.memory_store.MemoryStore`. The test's thread and the runners' threads take turns: exactly one of
them runs at any time (a runner runs until it pauses or ends, then hands back), so every step is one
deterministic interleaving.

**What a process owns, per runner.** The code keeps some things once per Python process, as it should for one
provider process; here each runner is a process of its own, so :class:`World` routes each of them to the runner
whose thread asks (:meth:`World.current`):

* the journal (``journal.at``'s cache, reached through ``journal.for_stack``): each runner has its own
  :class:`Journal`, probed at its first create like a fresh process's;
* the holding registry (``leases._held``); its renewal thread (``leases._renewer``) is never started: renewals
  happen where the model says (:meth:`World.renew`) and while virtual time passes (:meth:`World.advance`);
* the client's claim set (``reconcile._CLAIMS``) and the model resource kind's create gate (``_MODEL_RESOURCE.gate``):
  a runner paused inside a create's send must not hold up another runner's lookup, which it could not on
  another machine.

**Liveness of a process.** Every entry names this one Python process (``Process.this()``), so
:meth:`~pulumi_together_rl.ownership.records.Process.running` says True for every runner, crashed or not. That
proves nothing here: the memory store has no holds (like a bucket), and a lease whose process runs is judged by
its clock alone (only a process proven gone ends a lease early). So leases decide by time, as across machines.

**Time.** Virtual, and one for all: every clock reads :attr:`World.offset` seconds past one fixed moment (the
store's ``modified``; the emulator's, whose wall clock this world replaces, with its ``created_at`` and ``Date``
header; each runner's monotonic clock, ``journal.time`` and ``transaction.time``; and its wall clock,
``records.now``, ``reconcile._utcnow``, the transport's ``time.time``). Real time never shows, so an example runs
the same way every time (Hypothesis replays and shrinks it). Time moves when the model says (:meth:`World.advance`),
when a runner sleeps (waiting out a lease, a list's lag: virtual time moves instead), and by a millisecond at
every store write (writes are ordered in time, as entries are sorted by it). A runner's wall clock is further off
by its *skew* (a machine whose clock is wrong, for the life of the process). While time moves, the runners alive
and at work (paused in their settle, or the one sleeping) renew their leases every ``renew_every`` seconds, as
their renewal threads would; frozen ones (paused inside a store write: a straggler) do not.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, MutableMapping
from datetime import datetime, timedelta, timezone
from typing import Any

from harness.memory_store import Crashed, MemoryStore, StoreView

from pulumi_together_rl.client import TogetherRL, reconcile, transport
from pulumi_together_rl.messages import UserError
from pulumi_together_rl.ownership import journal, leases, records, recovery, transaction
from pulumi_together_rl.ownership.journal import Journal
from pulumi_together_rl.ownership.leases import Holding
from pulumi_together_rl.resources.model_resource_schema import MODEL_RESOURCE

URL = "memory://journal"
MODEL = "Qwen/Qwen3.5-4B"
LIST_LAG = 1.0
"""Seconds each runner's client lets a list lag a create (virtual: a wait for it moves the clock)."""
EPOCH = datetime(2026, 6, 1, tzinfo=timezone.utc)
"""The moment every virtual clock starts from."""
WRITE_TAKES = 0.001
"""Virtual seconds a store write takes."""
HANG = 60.0
"""Real seconds a runner may take to reach its next pause or its end before the step fails as a hang."""


class _TimeModule:
    """``time`` as the journal, the transaction and the transport see it: the world's clocks (see the module
    docstring); anything else is the real module's."""

    def __init__(self, world: World) -> None:
        self._world = world

    def monotonic(self) -> float:
        return 1_000_000.0 + self._world.offset

    def time(self) -> float:
        return self._world.wall().timestamp()

    def sleep(self, seconds: float) -> None:
        self._world.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _PerProcess(MutableMapping[str, Holding]):
    """``leases._held``: the registry of the runner whose thread asks."""

    def __init__(self, world: World) -> None:
        self._world = world

    def _mine(self) -> dict[str, Holding]:
        return self._world.current().held

    def __getitem__(self, key: str) -> Holding:
        return self._mine()[key]

    def __setitem__(self, key: str, value: Holding) -> None:
        self._mine()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._mine()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._mine()))

    def __len__(self) -> int:
        return len(self._mine())


class _Claims:
    """``reconcile._CLAIMS``: the claim set of the runner whose thread asks."""

    def __init__(self, world: World) -> None:
        self._world = world

    def claim(self, scope: str, id: str) -> bool:
        return self._world.current().claims.claim(scope, id)

    def release(self, scope: str, id: str) -> None:
        self._world.current().claims.release(scope, id)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._world.current().claims

    def clear(self) -> None:
        self._world.current().claims.clear()


class _Gate:
    """The model resource kind's create gate: the one of the runner whose thread asks."""

    def __init__(self, world: World) -> None:
        self._world = world

    def sending(self) -> Any:
        return self._world.current().gate.sending()

    def reconciling(self) -> Any:
        return self._world.current().gate.reconciling()


class Proc:
    """One process: a runner's ``pulumi up`` (its create of ``owner``'s declaration), or the model's own (``owner``
    None: ``recover``, the plants, the reads of the invariants)."""

    def __init__(self, world: World, name: str, owner: str | None, skew: float = 0.0) -> None:
        self.world = world
        self.name = name
        self.owner = owner
        self.skew = skew
        self.view: StoreView = world.store.view(name, self._event if owner else None)
        self.journal = Journal(self.view, URL)
        self.held: dict[str, Holding] = {}
        self.claims = reconcile._Claims()
        self.gate = reconcile._CreateGate()
        self.client: TogetherRL | None = None
        # The coordination with the test's thread.
        self._cv = threading.Condition()
        self.status = "new"  # running, paused, ended
        self.where = ""
        """Where it is paused: ``before write 7: swap entries/...``, ``after ...``, ``settling``."""
        self.busy = False
        """Paused at work (its settle: waiting for its object), renewing its lease; else frozen."""
        self._left: int | None = None
        self._linger = False
        self._command: str | None = None
        self.outcome: tuple[str, str] | None = None
        """``("made", id)``, ``("refused", sentence)``, ``("crashed", where)``, ``("bug", traceback)``."""
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<{self.name} {self.status} {self.where}>"

    # ------------------------------------------------------------------------------------ the runner's thread

    def launch(self, stop_at: int | None, linger: bool) -> None:
        """Start its create; come back once it is paused (at its ``stop_at``-th write event, counting the events
        before and after each write from 0; or in its settle when ``linger``) or has ended."""
        world = self.world
        self.client = TogetherRL(
            api_key=world.api_key, base_url=world.base_url, list_lag=LIST_LAG, settle_window=0.0
        )
        self._guard(self.client)
        self._left, self._linger = stop_at, linger
        self.status = "running"
        self._thread = threading.Thread(target=self._main, name=f"runner-{self.name}", daemon=True)
        self._thread.start()
        self._wait()

    def _guard(self, client: TogetherRL) -> None:
        """A crashed runner sends nothing more to the API either (its unwinding must not reach it)."""
        request = client._transport.request

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.view.dead:
                raise Crashed(self.name)
            return request(*args, **kwargs)

        client._transport.request = guarded  # type: ignore[method-assign]

    def _main(self) -> None:
        world = self.world
        world.local.proc = self
        inputs = {"base_model": MODEL, "owner": self.owner}
        body = MODEL_RESOURCE.to_request(inputs).to_wire()
        assert self.client is not None
        try:
            made = transaction.create(MODEL_RESOURCE, self.client, inputs, body, MODEL, self._settle)
            outcome = ("made", made)
        except Crashed:
            outcome = ("crashed", self.where)
        except UserError as exc:
            outcome = ("refused", str(exc))
        except BaseException:  # anything else is a bug of the code under test: the step says so
            import traceback

            outcome = ("bug", traceback.format_exc())
        finally:
            world.local.proc = None
        with self._cv:
            self.outcome = outcome
            self.status = "ended"
            self._cv.notify_all()

    def _settle(self, created: Any) -> str:
        if self._linger:
            self._linger = False
            self._pause("settling", busy=True)
        return str(created.id)

    def _event(self, when: str, op: str, key: str, number: int) -> None:
        """The view's hook, in this runner's thread: count down to the pause."""
        if self._left is None:
            return
        if self._left > 0:
            self._left -= 1
            return
        self._pause(f"{when} write {number}: {op} {key}")

    def _pause(self, where: str, busy: bool = False) -> None:
        with self._cv:
            self.status, self.where, self.busy = "paused", where, busy
            self._cv.notify_all()
            while self._command is None:
                self._cv.wait()
            command, self._command = self._command, None
            self.status, self.busy = "running", False
        if command == "crash":
            self.view.die()
            raise Crashed(self.name)

    # ------------------------------------------------------------------------------------ the test's thread

    def resume(self, left: int | None, linger: bool = False) -> None:
        """Let it go on for ``left`` more write events (None: to its end), pausing in its settle if ``linger``."""
        assert self.status == "paused", self
        with self._cv:
            self._left, self._linger = left, linger
            self.status = "running"
            self._command = "go"
            self._cv.notify_all()
        self._wait()

    def crash(self) -> None:
        """It dies where it is paused: nothing it holds is released or renewed again (``leases.forget``)."""
        assert self.status == "paused", self
        for held in list(self.held.values()):
            with self.world.acting(self):
                leases.forget(held)
        with self._cv:
            self.status = "running"
            self._command = "crash"
            self._cv.notify_all()
        self._wait()
        assert self.outcome is not None and self.outcome[0] != "bug", self.outcome
        # Whatever its code raised while unwinding (a create that knew its lease lost raises that, touching
        # nothing) reached nobody: the process is dead.
        self.outcome = ("crashed", self.where)

    def _wait(self) -> None:
        self.world.moves += 1
        with self._cv:
            if not self._cv.wait_for(lambda: self.status in ("paused", "ended"), timeout=HANG):
                raise AssertionError(f"runner {self.name} neither paused nor ended within {HANG} s: a hang")
        if self.status == "ended" and self.client is not None:
            self.client.close()
        if self._thread is not None and self.status == "ended":
            self._thread.join(HANG)


class World:
    """The shared things (the store, the emulator, the clocks) and the routing of per-process state (see the
    module docstring). One per test; :meth:`reset` before each example."""

    def __init__(self, emulator: Any, server: Any, monkeypatch: Any) -> None:
        self.control = emulator.control
        self.api_key = emulator.api_key
        self.base_url = emulator.base_url.rstrip("/")
        self.local = threading.local()
        self.offset = 0.0
        self.moves = 0
        """Counts what may have changed the emulator's objects (a runner ran, time moved): a cache key."""
        self.procs: list[Proc] = []
        self.store = MemoryStore(self.store_now, URL)
        self.observer = Proc(self, "model", None)
        clock = _TimeModule(self)
        monkeypatch.setattr(journal, "time", clock)
        monkeypatch.setattr(transaction, "time", clock)
        monkeypatch.setattr(transport, "time", clock)
        for module in (records, transaction, recovery):
            monkeypatch.setattr(module, "now", self.wall)
        monkeypatch.setattr(reconcile, "_utcnow", self.wall)
        monkeypatch.setattr(leases, "_held", _PerProcess(self))
        monkeypatch.setattr(leases, "_renewer", ["the model renews"])  # never a renewal thread of its own
        monkeypatch.setattr(reconcile, "_CLAIMS", _Claims(self))
        monkeypatch.setattr(reconcile._MODEL_RESOURCE, "gate", _Gate(self))
        monkeypatch.setattr(journal, "for_stack", lambda stack_backend=None: self.current().journal)
        monkeypatch.setattr(server.app.state.clock, "_wall", lambda: EPOCH + timedelta(seconds=self.offset))

    def reset(self) -> None:
        """A fresh example: the emulator reset (objects, clock), a new store, no runners."""
        self.close()
        self.control.reset()
        self.offset = 0.0
        self.store = MemoryStore(self.store_now, URL)
        self.procs = []
        self.observer = Proc(self, "model", None)
        self.observer.journal.probe()

    def close(self) -> None:
        """Every runner still paused dies (its thread unwinds and ends)."""
        for proc in self.procs:
            if proc.status == "paused":
                proc.crash()

    # ------------------------------------------------------------------------------------ processes

    def current(self) -> Proc:
        """The process whose thread runs now (the model's own outside any runner)."""
        return getattr(self.local, "proc", None) or self.observer

    @contextlib.contextmanager
    def acting(self, proc: Proc, quiet: bool = False) -> Iterator[None]:
        """Run as ``proc`` in this thread (its registry, claims, journal); ``quiet``: its writes pass its pause
        hook (its renewal thread's, which the model does not pause)."""
        before = getattr(self.local, "proc", None)
        self.local.proc = proc
        proc.view.quiet.on = quiet
        try:
            yield
        finally:
            proc.view.quiet.on = False
            self.local.proc = before

    def spawn(self, name: str, owner: str, skew: float) -> Proc:
        proc = Proc(self, name, owner, skew)
        self.procs.append(proc)
        return proc

    def alive(self) -> list[Proc]:
        return [p for p in self.procs if p.status == "paused"]

    def renew(self, proc: Proc) -> None:
        """One beat of ``proc``'s renewal thread: every entry it holds renewed (the real :meth:`Holding.renew`),
        except one its own thread is writing now (the beat would wait for that write)."""
        with self.acting(proc, quiet=True):
            for held in leases.holding():
                if not held._writing.locked():
                    held.renew()

    # ------------------------------------------------------------------------------------ time

    def store_now(self) -> datetime:
        """The store's clock, read as it writes: each write takes a millisecond."""
        self.offset += WRITE_TAKES
        return EPOCH + timedelta(seconds=self.offset)

    def wall(self) -> datetime:
        """The wall clock of the process whose thread asks (its skew included)."""
        return EPOCH + timedelta(seconds=self.offset + self.current().skew)

    def advance(self, seconds: float, sleeper: Proc | None = None) -> None:
        """Move every clock ``seconds`` on, in steps of a renewal beat; after each step the processes at work (and
        ``sleeper``, whose thread sleeps) renew, as their renewal threads would."""
        self.moves += 1
        beat = journal.renew_every()
        left = seconds
        while left > 0:
            step = min(left, beat)
            left -= step
            self.offset += step
            for proc in self.alive():
                if proc.busy:
                    self.renew(proc)
            if sleeper is not None:
                self.renew(sleeper)

    def sleep(self, seconds: float) -> None:
        """A runner's sleep (``time.sleep`` in the journal and the transaction): virtual time moves instead."""
        proc = self.current()
        self.advance(max(seconds, 0.0), sleeper=proc if proc is not self.observer else None)
