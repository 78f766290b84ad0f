"""The process's cached API lookups behind ``check``: supported models, a model resource's facts, a session's
facts, cost estimates.

Each is **single-flight**: N threads of the provider server that ask for the same key at once make one request,
and all of them get its answer (or its exception). A preview checks every resource of the stack concurrently,
so without this a stack of 20 resources would ask ``GET /v1/rl/supported-models`` 20 times.

Why by hand: ``functools.cache`` has no single-flight and no expiry, and the well-kept cache libraries
(cachetools) lock around lookups but not around the call, so concurrent misses all call. What is needed is a
dict, a lock and one ``threading.Event`` per key in flight.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .. import config

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.models import CostEstimate, ModelResource, SupportedModelList, TrainingSession

V = TypeVar("V")

SUPPORTED_MODELS_TTL = 600.0
"""How long (seconds) one process trusts its copy of ``GET /v1/rl/supported-models``."""

ESTIMATE_TTL = 600.0
"""How long (seconds) one process trusts a cost estimate for one create body."""

OBJECT_TTL = 10.0
"""How long (seconds) a looked-up resource or session serves other checks (its status can change)."""


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
        self._value: Any = None
        self._error: BaseException | None = None

    def succeed(self, value: V) -> None:
        self._value = value
        self._done.set()

    def fail(self, exc: BaseException) -> None:
        self._error = exc
        self._done.set()

    def wait(self) -> V:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


_supported: SingleFlight[SupportedModelList] = SingleFlight(SUPPORTED_MODELS_TTL)
_estimates: SingleFlight[CostEstimate] = SingleFlight(ESTIMATE_TTL)
_resources: SingleFlight[ModelResource] = SingleFlight(OBJECT_TTL)
_sessions: SingleFlight[TrainingSession] = SingleFlight(OBJECT_TTL)


def supported_models(client: TogetherRL) -> SupportedModelList:
    """``GET /v1/rl/supported-models``, cached per process for :data:`SUPPORTED_MODELS_TTL` seconds."""
    return _supported.get(config.current().base_url, client.list_supported_models)


def estimate_cost(client: TogetherRL, request: Any) -> CostEstimate:
    """``POST /v1/rl/model-resources/estimate-cost`` for one create body, cached per body."""
    key = (config.current().base_url, json.dumps(request.to_wire(), sort_keys=True))
    return _estimates.get(key, lambda: client.estimate_model_resource_cost(request))


def model_resource(client: TogetherRL, resource_id: str) -> ModelResource:
    """``GET`` of a model resource a check refers to (an error, ``NotFound`` included, propagates uncached)."""
    return _resources.get(
        (config.current().base_url, resource_id), lambda: client.get_model_resource(resource_id)
    )


def training_session(client: TogetherRL, session_id: str) -> TrainingSession:
    """``GET`` of a training session a check refers to (``adopt_id``)."""
    return _sessions.get(
        (config.current().base_url, session_id), lambda: client.get_training_session(session_id)
    )


def clear() -> None:
    for cache in (_supported, _estimates, _resources, _sessions):
        cache.clear()
