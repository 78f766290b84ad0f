"""The plugin's functions (invokes): what a program asks the API before it declares anything.

* ``getSupportedModels``: ``GET /v1/rl/supported-models`` (the base models and their compute layouts).
* ``estimateCost``: ``POST /v1/rl/model-resources/estimate-cost`` for a model resource's API inputs, checked
  with the same rules as the resource's own inputs (a bad one is a failure naming the field, not a call).
* ``getCheckpoints`` / ``latestCheckpoint``: the core's checkpoint query (:mod:`..resources.checkpoints`), the
  same as the dynamic face's ``get_checkpoints`` / ``latest_checkpoint``.

Both go through the core's cached calls (:mod:`..resources.process`): the same answers a model resource's check
uses, asked once per process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..resources import checkpoints, process
from ..resources.inputs import Failure, validate_inputs
from .package_schema import (
    ESTIMATE_COST,
    GET_CHECKPOINTS,
    GET_SUPPORTED_MODELS,
    LATEST_CHECKPOINT,
    package_schema,
)

Result = tuple[dict[str, Any], list[Failure]]


@dataclasses.dataclass(frozen=True)
class Function:
    token: str
    call: Callable[[Mapping[str, Any]], Result]

    @property
    def inputs(self) -> dict[str, Any]:
        return package_schema()["functions"][self.token].get("inputs", {"properties": {}})

    @property
    def outputs(self) -> dict[str, Any]:
        return package_schema()["functions"][self.token]["outputs"]


def supported_models(args: Mapping[str, Any]) -> Result:
    client = process.api_client("listing", "supported models", None)
    try:
        models = process.supported_models(client)
    except Exception as exc:
        raise _failed("listing", "supported models", None, exc) from exc
    return {"models": models.model_dump(mode="json", exclude_none=True)["data"]}, []


def estimate_cost(args: Mapping[str, Any]) -> Result:
    from ..resources.model_resource_checks import HINTS, Inputs
    from ..resources.model_resource_schema import MODEL_RESOURCE

    inputs, failures = validate_inputs(Inputs, args, required=(MODEL_RESOURCE.required,), hints=HINTS)
    if failures:
        return {}, failures
    base_model = inputs.get("base_model")
    client = process.api_client("estimating the cost of", "a model resource", base_model)
    try:
        estimate = process.estimate_cost(client, MODEL_RESOURCE.to_request(inputs))
    except Exception as exc:
        raise _failed("estimating the cost of", "a model resource", base_model, exc) from exc
    return {"price_per_hour": estimate.price_per_hour, "currency": estimate.currency}, []


def checkpoint_list(args: Mapping[str, Any]) -> Result:
    query, failures = checkpoints.check(args)
    return ({}, failures) if failures else ({"checkpoints": checkpoints.find(query)}, [])


def latest_checkpoint(args: Mapping[str, Any]) -> Result:
    query, failures = checkpoints.check(args)
    return ({}, failures) if failures else (checkpoints.latest(query), [])


def _failed(doing: str, kind: str, ident: str | None, exc: Exception) -> Exception:
    from ..messages import UserError, explain

    return UserError(doing, kind, ident, *explain(exc, doing))


BY_TOKEN = {
    GET_SUPPORTED_MODELS: Function(GET_SUPPORTED_MODELS, supported_models),
    ESTIMATE_COST: Function(ESTIMATE_COST, estimate_cost),
    GET_CHECKPOINTS: Function(GET_CHECKPOINTS, checkpoint_list),
    LATEST_CHECKPOINT: Function(LATEST_CHECKPOINT, latest_checkpoint),
}
