"""The process's cached API lookups behind ``check``: supported models, a model resource's facts, a session's
facts, cost estimates.

Each is **single-flight**: N threads of the provider server that ask for the same key at once make one request,
and all of them get its answer (or its exception). A preview checks every resource of the stack concurrently,
so without this a stack of 20 resources would ask ``GET /v1/rl/supported-models`` 20 times.

The mechanism is :class:`~pulumi_together_rl.singleflight.SingleFlight` (shared with the client's create
snapshots).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from .. import config
from ..singleflight import SingleFlight

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


LIST_TTL = 2.0
"""How long (seconds) one list of a kind's live objects answers refresh reads: a refresh reads every object
of the stack at once, and N reads should cost one list, not N GETs."""

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


_listed: SingleFlight[dict[str, Any]] = SingleFlight(LIST_TTL)


def listed(client: TogetherRL, kind: str) -> dict[str, Any]:
    """``{id: object}`` of the caller's existing objects of ``kind`` (the watcher's own list,
    :func:`._watch.list_live`), shared for :data:`LIST_TTL` seconds. An id missing from it is not proof of
    anything (a list may lag, or the object is another user's): the caller asks by GET."""
    from ._watch import list_live

    return _listed.get((config.current().base_url, kind), lambda: list_live(client, kind))


def clear() -> None:
    for cache in (_supported, _estimates, _resources, _sessions, _listed):
        cache.clear()
