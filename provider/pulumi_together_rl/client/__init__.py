"""Client of the Together RL API: the only code in this project that speaks HTTP.

``from pulumi_together_rl.client import TogetherRL, NotFound, ModelResourceCreateRequest`` — names are
resolved lazily (PEP 562), so importing this package costs nothing until a name is used; using one loads
httpx and pydantic, never pulumi or the official ``together`` SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "TogetherRL": "api",
    "DEFAULT_BASE_URL": "api",
    "ENV_API_KEY": "api",
    "ENV_BASE_URL": "api",
    "RetryPolicy": "transport",
}
_EXPORTS.update(
    dict.fromkeys(
        (
            "TogetherError",
            "ConfigurationError",
            "InvalidArgument",
            "ApiError",
            "BadRequest",
            "Unauthorized",
            "PermissionDenied",
            "NotFound",
            "Conflict",
            "RateLimited",
            "ServerError",
            "ApiConnectionError",
            "ApiTimeout",
        ),
        "errors",
    )
)
_EXPORTS.update(
    dict.fromkeys(
        (
            "AdamConfig",
            "ComputeConfigParams",
            "CostEstimate",
            "GpuType",
            "LoraConfig",
            "ModelResource",
            "ModelResourceCreateRequest",
            "ModelResourceErrorCode",
            "ModelResourceList",
            "ModelResourceStatus",
            "MuonConfig",
            "MuonScalingStrategy",
            "OptimizerConfig",
            "SessionMetadata",
            "SupportedModel",
            "SupportedModelList",
            "TrainingSession",
            "TrainingSessionCreateRequest",
            "TrainingSessionErrorCode",
            "TrainingSessionList",
            "TrainingSessionStatus",
            "TrainingSessionUpdateRequest",
            "WandbMetadata",
            "LISTED_RESOURCE_STATUSES",
            "LISTED_SESSION_STATUSES",
            "LIVE_RESOURCE_STATUSES",
            "LIVE_SESSION_STATUSES",
            "RESOURCE_ACTIVE",
            "RESOURCE_GONE",
            "RESOURCE_PROVISIONING",
            "SESSION_GONE",
            "SESSION_HOLDS_SLOT",
        ),
        "models",
    )
)

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
