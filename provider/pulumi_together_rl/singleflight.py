"""Single-flight calls: N threads that ask for the same key at once make one call, and all get its answer (or
its exception); with a ``ttl``, the answer also serves later callers for that long. Failures are never kept.

Why by hand: ``functools.cache`` has no single-flight and no expiry, and the well-kept cache libraries
(cachetools) lock around lookups but not around the call, so concurrent misses all call. What is needed is a
dict, a lock and one ``threading.Event`` per key in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class SingleFlight(Generic[V]):
    """A keyed cache whose concurrent misses of one key make one call. Failures are not cached."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._values: dict[Hashable, tuple[float, V]] = {}
        self._flights: dict[Hashable, _Flight[V]] = {}

    def get(self, key: Hashable, call: Callable[[], V]) -> V:
        with self._lock:
            cached = self._values.get(key)
            if cached is not None and time.monotonic() - cached[0] < self._ttl:
                return cached[1]
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = _Flight()
        assert flight is not None
        if not leader:
            return flight.wait()
        try:
            value = call()
        except BaseException as exc:
            flight.fail(exc)
            raise
        finally:
            with self._lock:
                self._flights.pop(key, None)
        if self._ttl > 0:
            with self._lock:
                self._values[key] = (time.monotonic(), value)
        flight.succeed(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class _Flight(Generic[V]):
    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: tuple[V] | None = None  # a tuple: a call's answer may be None itself
        self._error: BaseException | None = None

    def succeed(self, value: V) -> None:
        self._value = (value,)
        self._done.set()

    def fail(self, exc: BaseException) -> None:
        self._error = exc
        self._done.set()

    def wait(self) -> V:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None  # set before _done, when there is no error
        return self._value[0]
