"""A create journal store in this process's memory, for tests that drive the journal's protocol through many
interleavings (tests/model): a peer of :class:`~pulumi_together_rl.ownership.stores.folder.FolderStore` and
:class:`~pulumi_together_rl.ownership.stores.bucket.BucketStore` behind the same
:class:`~pulumi_together_rl.ownership.stores.Store` interface, with its first-use check
(:meth:`~pulumi_together_rl.ownership.stores.Store.verify`) inherited, not re-implemented.

* **Faithful**: create-if-absent and compare-and-swap are atomic under one lock; every write gives a new version
  (a counter, never reused, so a swap on a version read before any later write is refused); ``modified`` is the
  store's own clock, a function the test controls; reads are bounded as the interface says.
* **Like a bucket**: it has no hold (:meth:`~pulumi_together_rl.ownership.stores.Store.hold` proves nothing), so
  leases are judged by the store's clock alone.
* **Fault switches**: :attr:`MemoryStore.ignore_if_none_match` (every create wins, as an S3-compatible server that
  accepts the header and ignores it) and :attr:`MemoryStore.ignore_if_match` (every swap wins); the first-use check
  must refuse either.
* **Views** (:meth:`MemoryStore.view`): one runner's window on the store, the process that runs the journal's code.
  A view counts the runner's writes, calls a hook before each write is sent and after it lands (where a test pauses
  the runner: a straggler), and can *crash*: right after its k-th write lands (:attr:`StoreView.crash_after`), or
  whenever the test says (:meth:`StoreView.die`). A crashed view raises :class:`Crashed` at every call from then on,
  so the runner's code, unwinding, can neither write nor read again: it does nothing more, as a killed process.
* **History** (:attr:`MemoryStore.history`): every write that landed, with the object it replaced, so that a test can
  judge each one after the fact (was the lease it took over still live?).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable
from datetime import datetime

from pulumi_together_rl.ownership.stores import MAX_READ, Listed, Store, Stored, Unreadable


class Crashed(BaseException):
    """The runner's process died at this point. A ``BaseException``: the code under test handles ``Exception``s (a
    store error, an API error) and must not handle this one, exactly as it cannot handle a SIGKILL."""


@dataclasses.dataclass(frozen=True)
class Written:
    """One write that landed: which view made it (None: the store itself, unseen by any runner), the operation, the
    key, the object it replaced (None: there was none) and the one it left (None: removed)."""

    by: str | None
    op: str
    key: str
    before: Stored | None
    after: Stored | None


class MemoryStore(Store):
    """The store (see the module docstring). ``clock``: the store's clock, what ``modified`` says."""

    def __init__(self, clock: Callable[[], datetime], location: str = "memory://journal") -> None:
        self.location = location
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[str, Stored] = {}
        self._versions = itertools.count(1)
        self.ignore_if_none_match = False
        """A fault: create-if-absent writes whatever is there (``If-None-Match: *`` ignored)."""
        self.ignore_if_match = False
        """A fault: compare-and-swap writes whatever version is there (``If-Match`` ignored)."""
        self.history: list[Written] = []

    # ------------------------------------------------------------------------------------ the interface

    def where(self, key: str) -> str:
        return f"{self.location}/{key}"

    def create(self, key: str, data: bytes, *, by: str | None = None) -> str | None:
        with self._lock:
            before = self._objects.get(key)
            if before is not None and not self.ignore_if_none_match:
                return None
            return self._put(by, "create", key, data, before)

    def swap(self, key: str, data: bytes, version: str, *, by: str | None = None) -> str | None:
        with self._lock:
            before = self._objects.get(key)
            if not self.ignore_if_match and (before is None or before.version != version):
                return None
            return self._put(by, "swap", key, data, before)

    def read(self, key: str, limit: int = MAX_READ) -> Stored | None:
        with self._lock:
            found = self._objects.get(key)
        if found is not None and len(found.data) > limit:
            raise Unreadable(key, f"it is {len(found.data)} bytes, more than any entry this provider writes")
        return found

    def remove(self, key: str, *, by: str | None = None) -> None:
        with self._lock:
            before = self._objects.pop(key, None)
            if before is not None:
                self.history.append(Written(by, "remove", key, before, None))

    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        with self._lock:
            found = [
                Listed(key, stored.version, len(stored.data), stored.modified)
                for key, stored in self._objects.items()
                if key.startswith(prefix) and (recursive or "/" not in key[len(prefix) :])
            ]
        return sorted(found, key=lambda item: item.key)

    def _put(self, by: str | None, op: str, key: str, data: bytes, before: Stored | None) -> str:
        stored = Stored(bytes(data), f"v{next(self._versions)}", self._clock())
        self._objects[key] = stored
        self.history.append(Written(by, op, key, before, stored))
        return stored.version

    # ------------------------------------------------------------------------------------ for tests

    def keys(self, prefix: str = "") -> list[str]:
        """Every key (under ``prefix``), sorted."""
        with self._lock:
            return sorted(k for k in self._objects if k.startswith(prefix))

    def contents(self) -> dict[str, Stored]:
        """Every object now, by key (a copy)."""
        with self._lock:
            return dict(self._objects)

    def view(self, name: str, hook: Callable[[str, str, str, int], None] | None = None) -> StoreView:
        """A runner's view of this store (:class:`StoreView`), named ``name`` in :attr:`history`."""
        return StoreView(self, name, hook)


class StoreView(Store):
    """One runner's window on a :class:`MemoryStore` (see the module docstring).

    ``hook(when, op, key, n)`` is called with ``when`` ``"before"`` (the ``n``-th write is about to be sent) and
    ``"after"`` (it landed); it may block (the runner is paused there) or raise :class:`Crashed` (after
    :meth:`die`). Writes made while :attr:`quiet` is set (a renewal thread's, which the test does not pause) skip the
    hook but are counted and can crash the view like any other."""

    def __init__(
        self, store: MemoryStore, name: str, hook: Callable[[str, str, str, int], None] | None = None
    ) -> None:
        self.store = store
        self.name = name
        self.location = store.location
        self.hook = hook
        self.writes = 0
        """Writes sent so far (a compare-and-swap that was refused counts: it was sent)."""
        self.crash_after: int | None = None
        """Crash right after this many writes have landed (None: only when :meth:`die` is called)."""
        self.dead = False
        self.quiet = threading.local()

    def die(self) -> None:
        """The runner's process is gone: every later call raises :class:`Crashed`."""
        self.dead = True

    def _alive(self) -> None:
        if self.dead:
            raise Crashed(self.name)

    def _write(self, op: str, key: str, send: Callable[[], str | None]) -> str | None:
        self._alive()
        number = self.writes + 1
        quiet = getattr(self.quiet, "on", False)
        if self.hook is not None and not quiet:
            self.hook("before", op, key, number)
            self._alive()
        self.writes = number
        answer = send()
        if self.crash_after is not None and number >= self.crash_after:
            self.die()
            raise Crashed(self.name)
        if self.hook is not None and not quiet:
            self.hook("after", op, key, number)
            self._alive()
        return answer

    def where(self, key: str) -> str:
        return self.store.where(key)

    def create(self, key: str, data: bytes) -> str | None:
        return self._write("create", key, lambda: self.store.create(key, data, by=self.name))

    def swap(self, key: str, data: bytes, version: str) -> str | None:
        return self._write("swap", key, lambda: self.store.swap(key, data, version, by=self.name))

    def remove(self, key: str) -> None:
        def send() -> None:
            self.store.remove(key, by=self.name)
            return None

        self._write("remove", key, send)

    def read(self, key: str, limit: int = MAX_READ) -> Stored | None:
        self._alive()
        return self.store.read(key, limit)

    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        self._alive()
        return self.store.listing(prefix, recursive=recursive)
